"""Host memory registration from Python: a buffer the program owns made
device-accessible (host_register), used by kernels and copies, and the
checker's view of it."""

import ctypes

import pytest

import streampool as sp
from conftest import MiB

PAGE = 4096


def _address(buf):
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def test_registered_buffer_is_used_by_kernels_and_copies():
    buf = bytearray(4 * PAGE)
    host = _address(buf)
    with sp.Runtime(capacity=64 * MiB) as rt:
        rt.enable_checker()
        s = rt.create_stream()
        dev = rt.host_register(host, 2 * PAGE)
        assert dev == host
        assert rt.host_device_pointer(host + 100) == host + 100
        rt.launch_kernel(s, duration_ns=100, accesses=[(dev, 2 * PAGE, True)])
        a = rt.malloc_async(PAGE, s)
        rt.memset_async(dev, 7, PAGE, s)
        rt.memcpy_async(a, dev, PAGE, s)
        rt.memcpy_async(dev + PAGE, a, PAGE, s)
        rt.free_async(a, s)
        s.synchronize()
        assert buf[PAGE] == 7 and buf[2 * PAGE - 1] == 7
        assert rt.checker_reports() == []
        rt.host_unregister(host)
        rt.launch_kernel(s, duration_ns=100, accesses=[(dev, 8, False)])
        reports = rt.checker_reports()
        assert [r["kind"] for r in reports] == ["out_of_bounds"]


def test_registration_errors_name_their_c_codes():
    buf = bytearray(2 * PAGE)
    host = _address(buf)
    with sp.Runtime(capacity=64 * MiB) as rt:
        with pytest.raises(sp.Error) as e:
            rt.host_register(host, 0)
        assert e.value.code == "spErrorInvalidValue"
        rt.host_register(host, PAGE, read_only=True)
        with pytest.raises(sp.Error) as e:
            rt.host_register(host + 8, 8)
        assert e.value.code == "spErrorHostMemoryAlreadyRegistered"
        with pytest.raises(sp.Error) as e:
            rt.host_unregister(host + 8)
        assert e.value.code == "spErrorHostMemoryNotRegistered"
        with pytest.raises(sp.Error) as e:
            rt.host_device_pointer(host + PAGE)
        assert e.value.code == "spErrorHostMemoryNotRegistered"
        rt.host_unregister(host)


def test_freeing_registered_pinned_memory_is_reported():
    with sp.Runtime(capacity=64 * MiB) as rt:
        rt.enable_checker()
        p = rt.malloc_host(PAGE)
        rt.host_register(p, PAGE)
        rt.free_host(p)
        assert [r["kind"] for r in rt.checker_reports()] == ["free_while_registered"]
        rt.clear_checker_reports()
