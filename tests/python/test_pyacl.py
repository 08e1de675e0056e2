"""The acl package (pyACL over the AscendCL face, python/pyacl/acl/): pyACL's
calling conventions, every function's error codes as the C face returns
them, and the memory the face allocates as streampool.acl_runtime() sees it.

The face's runtime is per process and pytest runs every test in one, so each
test begins with acl.init() and leaves the face finalized (checked after each
test). Device and context choices are per host thread and outlive
aclFinalize, so what a thread without a device sees runs on a fresh thread.
"""

import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import acl
import streampool as sp

HERE = os.path.dirname(os.path.abspath(__file__))
ACL_HEADERS = os.path.join(HERE, "..", "..", "include", "streampool", "acl", "acl")

KiB = 1 << 10
MiB = 1 << 20
# A handle no runtime made: a handle's kind lives in its top bits.
FORGED = 0x7777


def align_up(n, a):
    return (n + a - 1) // a * a


def on_new_thread(fn):
    """fn() on a thread that never chose a device; its result."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@pytest.fixture(autouse=True)
def leaves_acl_finalized():
    yield
    assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE, "the test left acl initialized"


@pytest.fixture
def device():
    """acl initialized with device 0 set; reset and finalized afterwards."""
    assert acl.init() == acl.ACL_SUCCESS
    assert acl.rt.set_device(0) == acl.ACL_SUCCESS
    yield 0
    assert acl.rt.reset_device(0) == acl.ACL_SUCCESS
    assert acl.finalize() == acl.ACL_SUCCESS


@pytest.fixture
def stream(device):
    s, ret = acl.rt.create_stream()
    assert ret == acl.ACL_SUCCESS and s != 0
    yield s
    assert acl.rt.destroy_stream(s) == acl.ACL_SUCCESS


# ------------------------------------------------------- the article's pattern


class TestCopyRoundTrip:
    """The pattern pyACL's articles teach: init, device, stream; device memory
    sized from a numpy array; a copy in, a copy out; synchronize; compare;
    free; and everything undone in reverse."""

    def setup_method(self):
        assert acl.init() == acl.ACL_SUCCESS
        self.device_id = 0
        assert acl.rt.set_device(self.device_id) == acl.ACL_SUCCESS
        self.stream, ret = acl.rt.create_stream()
        assert ret == acl.ACL_SUCCESS

    def teardown_method(self):
        assert acl.rt.destroy_stream(self.stream) == acl.ACL_SUCCESS
        assert acl.rt.reset_device(self.device_id) == acl.ACL_SUCCESS
        assert acl.finalize() == acl.ACL_SUCCESS

    def test_host_to_device_and_back(self):
        host_in = np.arange(64 * KiB, dtype=np.float32)
        size = host_in.nbytes
        dev_ptr, ret = acl.rt.malloc(size, acl.rt.malloc_type.HUGE_FIRST)
        assert ret == acl.ACL_SUCCESS and dev_ptr != 0
        ret = acl.rt.memcpy(dev_ptr, size, host_in.ctypes.data, size,
                            acl.rt.memcpy_kind.HOST_TO_DEVICE)
        assert ret == acl.ACL_SUCCESS
        host_out = np.zeros_like(host_in)
        ret = acl.rt.memcpy(host_out.ctypes.data, size, dev_ptr, size,
                            acl.rt.memcpy_kind.DEVICE_TO_HOST)
        assert ret == acl.ACL_SUCCESS
        assert acl.rt.synchronize_stream(self.stream) == acl.ACL_SUCCESS
        np.testing.assert_array_equal(host_out, host_in)
        assert acl.rt.free(dev_ptr) == acl.ACL_SUCCESS

    def test_through_the_stream_with_util_pointers(self):
        host_in = np.arange(1000, dtype=np.int32)
        size = host_in.nbytes
        dev_ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
        assert ret == acl.ACL_SUCCESS
        assert acl.rt.memcpy_async(dev_ptr, size, acl.util.numpy_to_ptr(host_in), size,
                                   acl.ACL_MEMCPY_HOST_TO_DEVICE, self.stream) == 0
        out = bytes(size)  # pyACL programs copy into a bytes object
        assert acl.rt.memcpy_async(acl.util.bytes_to_ptr(out), size, dev_ptr, size,
                                   acl.ACL_MEMCPY_DEVICE_TO_HOST, self.stream) == 0
        assert acl.rt.synchronize_stream(self.stream) == acl.ACL_SUCCESS
        np.testing.assert_array_equal(np.frombuffer(out, dtype=np.int32), host_in)
        view = acl.util.ptr_to_numpy(acl.util.bytes_to_ptr(out), (10, 100), 5)  # NPY_INT32
        assert view.shape == (10, 100) and view[3, 7] == 307
        assert acl.rt.free(dev_ptr) == acl.ACL_SUCCESS


# ---------------------------------------------------------------- the package


def test_acl_comes_from_the_pyacl_directory():
    # CTest puts <build>/pyacl on PYTHONPATH; never a site-packages copy.
    package = os.path.dirname(os.path.abspath(acl.__file__))
    assert os.path.basename(package) == "acl"
    assert os.path.basename(os.path.dirname(package)) == "pyacl"


def test_acl_alone_on_the_path_finds_its_streampool(tmp_path):
    """With only the acl package's directory on PYTHONPATH, acl/_location.py
    leads it to the streampool package it was built with."""
    pyacl_dir = os.path.dirname(os.path.dirname(os.path.abspath(acl.__file__)))
    env = dict(os.environ, PYTHONPATH=pyacl_dir)
    code = ("import acl, streampool; print(acl.init(), acl.finalize()); "
            "print(streampool.__file__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    assert out[0] == "0 0"
    assert os.path.dirname(os.path.dirname(out[1])) == os.path.dirname(
        os.path.dirname(os.path.abspath(sp.__file__)))


def _header_constants():
    """Every ACL_* name the face's headers define, with its value there."""
    values = {}
    for root, _, files in os.walk(ACL_HEADERS):
        for name in files:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
            for m in re.finditer(r"static const int (ACL_\w+) = (\w+);", text):
                values[m[1]] = int(m[2], 0)
            for m in re.finditer(r"#define (ACL_\w+) (\d\w*)", text):
                values[m[1]] = int(m[2], 0)
            for body in re.findall(r"typedef enum[^{]*\{(.*?)\}", text, flags=re.S):
                nxt = 0
                for entry in body.split(","):
                    m = re.match(r"\s*(ACL_\w+)\s*(?:=\s*(\w+))?", entry)
                    if m:
                        value = int(m[2], 0) if m[2] else nxt
                        values[m[1]] = value
                        nxt = value + 1
    return values


def test_every_header_constant_with_the_headers_value():
    expected = _header_constants()
    assert len(expected) > 100
    got = {name: getattr(acl, name, None) for name in expected}
    assert got == expected


def test_namespaces_name_the_header_values():
    mt, mk = acl.rt.malloc_type, acl.rt.memcpy_kind
    assert (mt.HUGE_FIRST, mt.HUGE_ONLY, mt.NORMAL_ONLY) == (
        acl.ACL_MEM_MALLOC_HUGE_FIRST, acl.ACL_MEM_MALLOC_HUGE_ONLY,
        acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert (mt.HUGE_FIRST_P2P, mt.HUGE_ONLY_P2P, mt.NORMAL_ONLY_P2P) == (3, 4, 5)
    assert (mk.HOST_TO_HOST, mk.HOST_TO_DEVICE, mk.DEVICE_TO_HOST, mk.DEVICE_TO_DEVICE,
            mk.DEFAULT) == (0, 1, 2, 3, 4)
    assert mk.DEFAULT == acl.ACL_MEMCPY_DEFAULT
    with pytest.raises(AttributeError):
        mt.HUGE_FIRST = 7
    with pytest.raises(AttributeError):
        mt.NO_SUCH_POLICY  # noqa: B018


# ---------------------------------------------------------- init and devices


def test_init_and_finalize_are_counted_once():
    assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE
    assert acl.init("/no/such/acl.json") == acl.ACL_ERROR_INVALID_FILE
    assert acl.init("/tmp/\0acl.json") == acl.ACL_ERROR_INVALID_FILE
    assert acl.init("") == acl.ACL_SUCCESS  # "" is no file, as None
    assert acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert acl.init(None) == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert acl.finalize() == acl.ACL_SUCCESS
    assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE
    with pytest.raises(TypeError):
        acl.init(3)


def test_init_reads_a_config_file_path(tmp_path):
    config = tmp_path / "acl.json"
    config.write_text("{}")
    assert acl.init(config) == acl.ACL_SUCCESS  # os.PathLike as str
    assert acl.finalize() == acl.ACL_SUCCESS
    assert acl.init(str(tmp_path)) == acl.ACL_ERROR_INVALID_FILE  # a directory


def test_devices(device):
    assert acl.rt.get_device_count() == (1, acl.ACL_SUCCESS)  # STREAMPOOL_ACL_DEVICES
    assert acl.rt.get_device() == (0, acl.ACL_SUCCESS)
    for bad in (1, -1, 2**31, -(2**40)):
        assert acl.rt.set_device(bad) == acl.ACL_ERROR_RT_INVALID_DEVICEID, bad
    assert acl.rt.reset_device(5) == acl.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.synchronize_device() == acl.ACL_SUCCESS
    # A thread that never chose a device has none (and no context).
    assert on_new_thread(acl.rt.get_device) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    with pytest.raises(TypeError):
        acl.rt.set_device("0")
    with pytest.raises(TypeError):
        acl.rt.set_device(0.0)


def test_numpy_integers_and_bools_are_ints(device):
    assert acl.rt.set_device(np.int64(0)) == acl.ACL_SUCCESS
    ptr, ret = acl.rt.malloc(np.uint32(64), np.int8(acl.ACL_MEM_MALLOC_HUGE_FIRST))
    assert ret == acl.ACL_SUCCESS
    assert acl.rt.free(ptr) == acl.ACL_SUCCESS
    assert acl.rt.reset_device(0) == acl.ACL_SUCCESS


# ------------------------------------------------------ streams and events


def test_stream_and_event_error_cases(device):
    s, ret = acl.rt.create_stream()
    e, ret2 = acl.rt.create_event()
    assert (ret, ret2) == (acl.ACL_SUCCESS, acl.ACL_SUCCESS)
    assert acl.rt.destroy_stream(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.destroy_stream(FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.synchronize_stream(FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.destroy_event(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.destroy_event(FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.record_event(0, s) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.record_event(e, FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.stream_wait_event(s, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.stream_wait_event(FORGED, e) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.synchronize_event(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.query_event_status(0) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.query_event_status(FORGED) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.event_elapsed_time(0, e) == (0.0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.event_elapsed_time(e, -1) == (0.0, acl.ACL_ERROR_INVALID_PARAM)
    # Never recorded: complete, as CANN reports it.
    assert acl.rt.query_event_status(e) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    # The default stream is 0.
    assert acl.rt.record_event(e, 0) == acl.ACL_SUCCESS
    assert acl.rt.synchronize_stream(0) == acl.ACL_SUCCESS
    assert acl.rt.destroy_event(e) == acl.ACL_SUCCESS
    assert acl.rt.destroy_event(e) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.destroy_stream(s) == acl.ACL_SUCCESS
    assert acl.rt.destroy_stream(s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.synchronize_stream(s) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_async_copies_with_events_and_elapsed_time(stream):
    other, ret = acl.rt.create_stream()
    assert ret == acl.ACL_SUCCESS
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    host_in = np.full(MiB, 7, dtype=np.uint8)
    host_out = np.zeros_like(host_in)
    dev, ret = acl.rt.malloc(MiB, acl.rt.malloc_type.HUGE_FIRST)
    assert ret == acl.ACL_SUCCESS
    # event first, then stream; the copy runs in the stream's order.
    assert acl.rt.record_event(start, stream) == acl.ACL_SUCCESS
    assert acl.rt.memcpy_async(dev, MiB, host_in.ctypes.data, MiB,
                               acl.rt.memcpy_kind.HOST_TO_DEVICE, stream) == acl.ACL_SUCCESS
    assert acl.rt.record_event(end, stream) == acl.ACL_SUCCESS
    assert acl.rt.query_event_status(end) == (acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
    assert acl.rt.event_elapsed_time(start, end) == (0.0, acl.ACL_ERROR_RT_EVENT_NOT_COMPLETE)
    # stream first, then event: the other stream reads after the copy.
    assert acl.rt.stream_wait_event(other, end) == acl.ACL_SUCCESS
    assert acl.rt.memcpy_async(host_out.ctypes.data, MiB, dev, MiB,
                               acl.rt.memcpy_kind.DEVICE_TO_HOST, other) == acl.ACL_SUCCESS
    assert acl.rt.synchronize_stream(other) == acl.ACL_SUCCESS
    np.testing.assert_array_equal(host_out, host_in)
    assert acl.rt.synchronize_event(end) == acl.ACL_SUCCESS
    assert acl.rt.query_event_status(end) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    ms, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == acl.ACL_SUCCESS
    assert isinstance(ms, float) and ms > 0.0  # a MiB takes virtual time to copy
    assert acl.rt.free(dev) == acl.ACL_SUCCESS
    for e in (start, end):
        assert acl.rt.destroy_event(e) == acl.ACL_SUCCESS
    assert acl.rt.destroy_stream(other) == acl.ACL_SUCCESS


# -------------------------------------------------------------------- memory


def test_malloc_error_cases(device):
    hf = acl.rt.malloc_type.HUGE_FIRST
    for malloc in (acl.rt.malloc, acl.rt.malloc_cached, acl.rt.malloc_align32):
        assert malloc(0, hf) == (0, acl.ACL_ERROR_INVALID_PARAM)
        assert malloc(64, 0x42) == (0, acl.ACL_ERROR_INVALID_PARAM)  # no such policy
        assert malloc(64, -1) == (0, acl.ACL_ERROR_INVALID_PARAM)
        assert malloc(64, acl.ACL_MEM_MALLOC_HUGE1G_ONLY) == (
            0, acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
        assert malloc(64, acl.ACL_MEM_ACCESS_USER_SPACE_READONLY) == (
            0, acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
        assert malloc(2 << 30, hf) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)  # 1 GiB device
        # Sizes no size_t holds never reach C.
        assert malloc(-1, hf) == (0, acl.ACL_ERROR_INVALID_PARAM)
        assert malloc(2**64, hf) == (0, acl.ACL_ERROR_INVALID_PARAM)
        assert malloc(2**64 - 1, hf) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
        with pytest.raises(TypeError):
            malloc(64.0, hf)
        with pytest.raises(TypeError):
            malloc(None, hf)
        with pytest.raises(TypeError):
            malloc(64)
    # Memory-type bits ride along with any policy.
    p, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST_P2P | acl.ACL_MEM_TYPE_HIGH_BAND_WIDTH)
    assert ret == acl.ACL_SUCCESS
    assert acl.rt.free(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(-5) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(p + 64) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.media.dvpp_free(p) == acl.ACL_ERROR_RT_PARAM_INVALID  # not DVPP memory
    assert acl.rt.free(p) == acl.ACL_SUCCESS
    assert acl.rt.free(p) == acl.ACL_ERROR_RT_PARAM_INVALID  # freed already


def test_a_pool_free_refuses_synchronous_allocations(device):
    p, _ = acl.rt.malloc(64, acl.rt.malloc_type.HUGE_FIRST)
    d, _ = acl.media.dvpp_malloc(64)
    try:
        assert acl.rt.mem_pool_free_async(p, 0) == acl.ACL_ERROR_RT_PARAM_INVALID
        assert acl.rt.mem_pool_free_async(d, 0) == acl.ACL_ERROR_RT_PARAM_INVALID
    finally:
        acl.rt.free(p)
        acl.media.dvpp_free(d)


def test_allocators_follow_canns_size_rules(device):
    rules = {
        acl.rt.malloc: lambda n: align_up(align_up(n, 32) + 32, 64),
        acl.rt.malloc_cached: lambda n: align_up(align_up(n, 32) + 32, 64),
        acl.rt.malloc_align32: lambda n: align_up(n, 64),
    }
    with sp.acl_runtime() as rt:
        for malloc, rule in rules.items():
            ptrs = []
            for n in (1, 32, 33, 100, 1000):
                p, ret = malloc(n, acl.rt.malloc_type.NORMAL_ONLY)
                assert ret == acl.ACL_SUCCESS and p % 64 == 0
                ptrs.append((p, n))
            sizes = {a["ptr"]: a["block_size"] for a in rt.live_allocations()}
            for p, n in ptrs:
                assert sizes[p] == rule(n), (malloc.__name__, n)
                assert acl.rt.free(p) == acl.ACL_SUCCESS


def test_mem_info_counts_device_memory(device):
    free0, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert ret == acl.ACL_SUCCESS and total == 1 << 30 and free0 <= total
    p, ret = acl.rt.malloc(4 * MiB, acl.rt.malloc_type.HUGE_FIRST)
    assert ret == acl.ACL_SUCCESS
    free1, _, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert free1 <= free0 - 4 * MiB
    assert acl.rt.free(p) == acl.ACL_SUCCESS
    assert acl.rt.get_mem_info(acl.ACL_DDR_MEM) == (free0, total, acl.ACL_SUCCESS)
    assert acl.rt.get_mem_info(31) == (0, 0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.get_mem_info(-1) == (0, 0, acl.ACL_ERROR_INVALID_PARAM)


def test_host_memory_round_trip(device):
    assert acl.rt.malloc_host(0) == (0, acl.ACL_ERROR_INVALID_PARAM)
    host, ret = acl.rt.malloc_host(1000)
    assert ret == acl.ACL_SUCCESS and host % 64 == 0
    data = bytes(range(256)) * 3 + b"xyz"
    assert acl.rt.memcpy(host, 1000, acl.util.bytes_to_ptr(data), len(data),
                         acl.rt.memcpy_kind.HOST_TO_HOST) == acl.ACL_SUCCESS
    assert acl.util.ptr_to_bytes(host, len(data)) == data
    dev, _ = acl.rt.malloc(1000, acl.rt.malloc_type.HUGE_FIRST)
    assert acl.rt.memcpy(dev, 1000, host, len(data), acl.rt.memcpy_kind.DEFAULT) == 0
    back = bytearray(len(data))
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(back), len(back), dev, len(data),
                         acl.rt.memcpy_kind.DEVICE_TO_HOST) == acl.ACL_SUCCESS
    assert bytes(back) == data
    assert acl.rt.free(dev) == acl.ACL_SUCCESS
    assert acl.rt.free(host) == acl.ACL_ERROR_RT_PARAM_INVALID  # free_host's
    assert acl.rt.free_host(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free_host(host) == acl.ACL_SUCCESS
    assert acl.rt.free_host(host) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_copy_and_fill_error_cases(stream):
    dev, _ = acl.rt.malloc(256, acl.rt.malloc_type.HUGE_FIRST)
    host = np.full(256, 5, dtype=np.uint8)
    h = host.ctypes.data
    h2d = acl.rt.memcpy_kind.HOST_TO_DEVICE
    assert acl.rt.memcpy(dev, 128, h, 256, h2d) == acl.ACL_ERROR_INVALID_PARAM  # count > dest_max
    assert acl.rt.memcpy(0, 256, h, 256, h2d) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(dev, 256, 0, 256, h2d) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(dev, 256, h, 256, 99) == acl.ACL_ERROR_INVALID_PARAM  # no such kind
    assert acl.rt.memcpy(dev, -1, h, 256, h2d) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(dev, 256, h, 256, -1) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(dev, 256, h, 0, h2d) == acl.ACL_SUCCESS  # nothing to copy
    assert acl.rt.memcpy_async(dev, 256, h, 256, h2d, FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy_async(dev, 128, h, 256, h2d, stream) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memset(dev, 64, 0, 128) == acl.ACL_ERROR_INVALID_PARAM  # count > max_count
    assert acl.rt.memset(0, 64, 0, 64) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memset(dev, 64, 2**31, 64) == acl.ACL_ERROR_INVALID_PARAM  # beyond int32
    assert acl.rt.memset_async(dev, 64, 0, 128, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memset_async(dev, 64, 0, 64, FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    with pytest.raises(TypeError):
        acl.rt.memcpy(dev, 256, host, 256, h2d)  # an array, not its address
    # And what works: a fill over part of a copy.
    assert acl.rt.memcpy(dev, 256, h, 256, h2d) == acl.ACL_SUCCESS
    assert acl.rt.memset(dev, 256, 9, 16) == acl.ACL_SUCCESS
    assert acl.rt.memset_async(dev + 16, 240, 3, 16, stream) == acl.ACL_SUCCESS
    assert acl.rt.synchronize_stream(stream) == acl.ACL_SUCCESS
    back = np.zeros(256, dtype=np.uint8)
    assert acl.rt.memcpy(back.ctypes.data, 256, dev, 256,
                         acl.rt.memcpy_kind.DEVICE_TO_HOST) == acl.ACL_SUCCESS
    assert list(back[:16]) == [9] * 16 and list(back[16:32]) == [3] * 16
    assert list(back[32:]) == [5] * 224
    assert acl.rt.free(dev) == acl.ACL_SUCCESS


def test_dvpp_memory(device):
    assert acl.media.dvpp_malloc(0) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.media.dvpp_malloc(-1) == (0, acl.ACL_ERROR_INVALID_PARAM)
    a, ret = acl.media.dvpp_malloc(1000)
    assert ret == acl.ACL_SUCCESS and a % 128 == 0
    b, ret = acl.himpi.dvpp_malloc(0, 1)  # the same pool
    assert ret == acl.ACL_SUCCESS
    assert b - a == align_up(align_up(1000, 32) + 32, 128)
    for dev_id in (1, -1, 2**40):
        assert acl.himpi.dvpp_malloc(dev_id, 64) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)
    assert acl.himpi.dvpp_malloc(0, 0) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.free(a) == acl.ACL_ERROR_RT_PARAM_INVALID  # dvpp_free's
    assert acl.media.dvpp_free(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.himpi.dvpp_free(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.himpi.dvpp_free(a) == acl.ACL_SUCCESS
    assert acl.media.dvpp_free(b) == acl.ACL_SUCCESS
    assert acl.media.dvpp_free(b) == acl.ACL_ERROR_RT_PARAM_INVALID


# --------------------------------------------------------------------- pools

POOL_PROPS = {
    "allocType": acl.ACL_MEM_ALLOCATION_TYPE_PINNED,
    "handleType": acl.ACL_MEM_HANDLE_TYPE_NONE,
    "location": {"id": 0, "type": acl.ACL_MEM_LOCATION_TYPE_DEVICE},
    "maxSize": 0,
}


def test_pool_allocations_in_stream_order(stream):
    pool, ret = acl.rt.mem_pool_create(POOL_PROPS)
    assert ret == acl.ACL_SUCCESS and pool != 0
    attr = acl.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD
    assert acl.rt.mem_pool_set_attr(pool, attr, 2**64 - 1) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_get_attr(pool, attr) == (2**64 - 1, acl.ACL_SUCCESS)
    switch = acl.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC
    assert acl.rt.mem_pool_get_attr(pool, switch) == (1, acl.ACL_SUCCESS)
    assert acl.rt.mem_pool_set_attr(pool, switch, 0) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_get_attr(pool, switch) == (0, acl.ACL_SUCCESS)

    ptr, ret = acl.rt.mem_pool_malloc_async(MiB, pool, stream)
    assert ret == acl.ACL_SUCCESS and ptr != 0
    assert acl.rt.memset_async(ptr, MiB, 0x5A, MiB, stream) == acl.ACL_SUCCESS
    out = np.zeros(MiB, dtype=np.uint8)
    assert acl.rt.memcpy_async(out.ctypes.data, MiB, ptr, MiB,
                               acl.rt.memcpy_kind.DEVICE_TO_HOST, stream) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_free_async(ptr, stream) == acl.ACL_SUCCESS
    # Same-stream reuse: the next allocation takes the freed block.
    again, ret = acl.rt.mem_pool_malloc_async(MiB, pool, stream)
    assert (again, ret) == (ptr, acl.ACL_SUCCESS)
    assert acl.rt.mem_pool_free_async(again, stream) == acl.ACL_SUCCESS
    assert acl.rt.synchronize_stream(stream) == acl.ACL_SUCCESS
    assert (out == 0x5A).all()
    reserved, ret = acl.rt.mem_pool_get_attr(pool, acl.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT)
    assert ret == acl.ACL_SUCCESS and reserved >= MiB  # kept: the threshold is "max"
    assert acl.rt.mem_pool_trim_to(pool, 0) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_get_attr(pool, acl.ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT) == (
        0, acl.ACL_SUCCESS)
    assert acl.rt.mem_pool_get_attr(pool, acl.ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH) == (
        align_up(align_up(MiB, 32) + 32, 64), acl.ACL_SUCCESS)  # aclrtMalloc's size rule
    assert acl.rt.mem_pool_destroy(pool) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_destroy(pool) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_pool_error_cases(stream):
    assert acl.rt.mem_pool_create(None) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.mem_pool_create({}) == (0, acl.ACL_ERROR_INVALID_PARAM)  # a host location
    for change, code in [
        ({"location": {"id": 0, "type": acl.ACL_MEM_LOCATION_TYPE_HOST}},
         acl.ACL_ERROR_INVALID_PARAM),
        ({"allocType": 3}, acl.ACL_ERROR_INVALID_PARAM),
        ({"handleType": acl.ACL_MEM_HANDLE_TYPE_POSIX}, acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT),
        ({"handleType": 7}, acl.ACL_ERROR_RT_PARAM_INVALID),
        ({"location": {"id": 5, "type": acl.ACL_MEM_LOCATION_TYPE_DEVICE}},
         acl.ACL_ERROR_RT_INVALID_DEVICEID),
        ({"location": {"id": 2**40, "type": acl.ACL_MEM_LOCATION_TYPE_DEVICE}},
         acl.ACL_ERROR_RT_INVALID_DEVICEID),
        ({"reserved": b"\0" * 31 + b"\1"}, acl.ACL_ERROR_INVALID_PARAM),
        ({"reserved": [0] * 33}, acl.ACL_ERROR_INVALID_PARAM),
        ({"maxSize": -1}, acl.ACL_ERROR_INVALID_PARAM),
    ]:
        assert acl.rt.mem_pool_create(dict(POOL_PROPS, **change)) == (0, code), change
    with pytest.raises(TypeError):
        acl.rt.mem_pool_create(dict(POOL_PROPS, max_size=0))  # a field C does not have
    with pytest.raises(TypeError):
        acl.rt.mem_pool_create([0, 0])
    with pytest.raises(TypeError):
        acl.rt.mem_pool_create(dict(POOL_PROPS, location=(0, 1)))

    pool, ret = acl.rt.mem_pool_create(dict(POOL_PROPS, reserved=bytes(32)))
    assert ret == acl.ACL_SUCCESS
    release = acl.ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD
    assert acl.rt.mem_pool_destroy(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_pool_destroy(FORGED) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.mem_pool_set_attr(0, release, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_pool_set_attr(pool, 0, 0) == acl.ACL_ERROR_RT_PARAM_INVALID  # no attr 0
    assert acl.rt.mem_pool_set_attr(pool, acl.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC,
                                    2) == acl.ACL_ERROR_RT_PARAM_INVALID  # a switch is 0 or 1
    assert acl.rt.mem_pool_set_attr(pool, acl.ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC,
                                    2**32) == acl.ACL_ERROR_INVALID_PARAM  # beyond uint32_t
    assert acl.rt.mem_pool_set_attr(pool, release, -1) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_pool_set_attr(pool, acl.ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT,
                                    0) == acl.ACL_ERROR_RT_PARAM_INVALID  # read-only
    assert acl.rt.mem_pool_get_attr(0, release) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.mem_pool_get_attr(pool, 99) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.mem_pool_get_attr(FORGED, release) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.mem_pool_malloc_async(0, pool, stream) == (0, acl.ACL_SUCCESS)  # size 0
    assert acl.rt.mem_pool_malloc_async(64, 0, stream) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.mem_pool_malloc_async(64, pool, 0) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.mem_pool_malloc_async(2 << 30, pool, stream) == (
        0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
    assert acl.rt.mem_pool_malloc_async(64, FORGED, stream) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.mem_pool_free_async(0, stream) == acl.ACL_ERROR_INVALID_PARAM
    p, ret = acl.rt.mem_pool_malloc_async(64, pool, stream)
    assert ret == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_free_async(p + 64, stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.free(p) == acl.ACL_ERROR_RT_PARAM_INVALID  # mem_pool_free_async's
    assert acl.rt.mem_pool_free_async(p, stream) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_trim_to(0, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_pool_trim_to(pool, -1) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.synchronize_stream(stream) == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_destroy(pool) == acl.ACL_SUCCESS


# -------------------------------------------------------------------- util


def test_util_conversions():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    ptr = acl.util.numpy_to_ptr(arr)
    assert ptr == arr.ctypes.data
    assert acl.util.ptr_to_bytes(ptr, arr.nbytes) == arr.tobytes()
    view = acl.util.ptr_to_numpy(ptr, (4, 3), 11)  # NPY_FLOAT32
    assert view.dtype == np.float32 and view.shape == (4, 3)
    view[0, 0] = 42.0  # a view: the writes reach the memory
    assert arr[0, 0] == 42.0
    for number, dtype in [(0, np.bool_), (1, np.int8), (2, np.uint8), (3, np.int16),
                          (4, np.uint16), (5, np.int32), (6, np.uint32), (7, np.int64),
                          (8, np.uint64), (12, np.float64), (23, np.float16)]:
        assert acl.util.ptr_to_numpy(ptr, (2,), number).dtype == dtype, number
    with pytest.raises(ValueError):
        acl.util.ptr_to_numpy(ptr, (2,), 1000)
    with pytest.raises(TypeError):
        acl.util.numpy_to_ptr([1, 2, 3])
    with pytest.warns(UserWarning):
        acl.util.numpy_to_ptr(arr[:, ::2])
    data = bytearray(b"abc")
    assert acl.util.ptr_to_bytes(acl.util.bytes_to_ptr(data), 3) == b"abc"
    assert acl.util.ptr_to_bytes(0, 0) == b""
    with pytest.raises(ValueError):
        acl.util.ptr_to_bytes(0, 4)
    with pytest.raises(TypeError):
        acl.util.bytes_to_ptr("text")


# ------------------------------------------------ streampool.acl_runtime()


def test_acl_runtime_sees_memory_from_acl(stream):
    dev, ret = acl.rt.malloc(1000, acl.rt.malloc_type.HUGE_FIRST)
    assert ret == acl.ACL_SUCCESS
    dvpp, ret = acl.media.dvpp_malloc(1000)
    assert ret == acl.ACL_SUCCESS
    with sp.acl_runtime() as rt:
        assert rt.devices == 1
        attrs = rt.pointer_attributes(dev)
        assert attrs["base"] == dev and attrs["size"] == 1000 and attrs["device"] == 0
        assert attrs["pool"].kind == "huge_page" and attrs["pool"].device == 0
        assert rt.pointer_attributes(dvpp)["pool"].kind == "dvpp"
        assert rt.pointer_attributes(dev + 100)["base"] == dev
        live = {a["ptr"]: a for a in rt.live_allocations()}
        assert live[dev]["block_size"] == align_up(align_up(1000, 32) + 32, 64)
        assert live[dvpp]["block_size"] == align_up(align_up(1000, 32) + 32, 128)
        assert attrs["pool"] in rt.pools()
        blocks = {b["address"]: b for seg in rt.memory_snapshot()["segments"]
                  for b in seg["blocks"]}
        assert blocks[dev]["state"] == "active_allocated"
        assert blocks[dev]["requested_size"] == 1000
        assert blocks[dvpp]["state"] == "active_allocated"
        assert rt.checker_reports() == []
    # Closing the view left the face's runtime alone.
    assert acl.rt.free(dev) == acl.ACL_SUCCESS
    assert acl.media.dvpp_free(dvpp) == acl.ACL_SUCCESS


def test_acl_runtime_checks_stream_order_of_acl_calls(stream):
    other, _ = acl.rt.create_stream()
    pool, _ = acl.rt.mem_pool_create(POOL_PROPS)
    with sp.acl_runtime() as rt:
        rt.enable_checker()  # collect reports instead of aborting
        ptr, ret = acl.rt.mem_pool_malloc_async(MiB, pool, stream)
        assert ret == acl.ACL_SUCCESS
        assert acl.rt.mem_pool_free_async(ptr, stream) == acl.ACL_SUCCESS
        # A fill on another stream, ordered after nothing: after the free.
        assert acl.rt.memset_async(ptr, MiB, 0, 64, other) == acl.ACL_SUCCESS
        (report,) = rt.checker_reports()
        assert report["kind"] == "use_after_free" and report["ptr"] == ptr
        assert report["stream"] == other and report["other_stream"] == stream
        rt.clear_checker_reports()
    assert acl.rt.synchronize_device() == acl.ACL_SUCCESS
    assert acl.rt.mem_pool_destroy(pool) == acl.ACL_SUCCESS
    assert acl.rt.destroy_stream(other) == acl.ACL_SUCCESS


def test_an_acl_runtime_view_outlives_finalize():
    assert acl.init() == acl.ACL_SUCCESS
    assert acl.rt.set_device(0) == acl.ACL_SUCCESS
    dev, _ = acl.rt.malloc(4096, acl.rt.malloc_type.HUGE_FIRST)
    old = sp.acl_runtime()
    assert acl.rt.reset_device(0) == acl.ACL_SUCCESS
    assert acl.finalize() == acl.ACL_SUCCESS
    # The face starts anew; the view still holds the runtime it was made on.
    assert old.pointer_attributes(dev)["size"] == 4096
    with sp.acl_runtime() as new:
        with pytest.raises(sp.Error):
            new.pointer_attributes(dev)
    old.close()
    assert old.closed
    with pytest.raises(sp.Error):
        old.pointer_attributes(dev)
