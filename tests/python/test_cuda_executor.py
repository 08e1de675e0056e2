"""executor='cuda': on a machine without a driver the runtime is refused
with the C API's code and a reason; with a device, allocations are device
memory and PyTorch's streams can be adopted."""

import pytest

import streampool as sp


def cuda_runtime():
    try:
        return sp.Runtime(executor="cuda", devices=0, capacity=0)
    except sp.Error as e:
        if e.code in ("spErrorInsufficientDriver", "spErrorNoDevice"):
            pytest.skip(f"no CUDA device here: {e}")
        raise


def test_without_a_driver_the_error_names_it():
    try:
        rt = sp.Runtime(executor="cuda", devices=0, capacity=0)
    except sp.Error as e:
        assert e.code in ("spErrorInsufficientDriver", "spErrorNoDevice")
        assert "CUDA" in e.message
        return
    rt.close()
    pytest.skip("this machine has a CUDA device")


def test_simulator_settings_do_not_apply_to_a_cuda_runtime():
    with pytest.raises(sp.Error) as err:
        sp.Runtime(executor="cuda", devices=0, capacity=0, backing="address")
    assert err.value.code == "spErrorInvalidValue"


def test_native_streams_only_on_native_runtimes():
    rt = sp.Runtime()
    with pytest.raises(sp.Error) as err:
        rt.native_stream(rt.create_stream())
    assert err.value.code == "spErrorNotSupported"
    with pytest.raises(sp.Error) as err:
        rt.adopt_stream(1234)
    assert err.value.code == "spErrorNotSupported"


def test_device_round_trip_and_adoption():
    rt = cuda_runtime()
    s = rt.create_stream()
    assert rt.native_stream(s) != 0
    legacy = rt.adopt_stream(0)
    assert rt.native_stream(legacy) == 0
    a = rt.malloc_async(1 << 20, s)
    rt.free_async(a, s)
    b = rt.malloc_async(1 << 20, s)
    assert int(b) == int(a)
    rt.free_async(b, s)
    s.synchronize()
    rt.close()
