"""The acl package's contexts and host memory registration (acl.rt.*_context,
acl.rt.host_*), as include/streampool/acl/acl/acl_rt.h describes the C
functions they call. Each test leaves the face finalized, as in
test_pyacl.py."""

import mmap
import threading

import pytest

import acl

PAGE = 4096


def on_new_thread(fn):
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
    assert acl.init() == acl.ACL_SUCCESS
    assert acl.rt.set_device(0) == acl.ACL_SUCCESS
    yield 0
    assert acl.rt.reset_device(0) == acl.ACL_SUCCESS
    assert acl.finalize() == acl.ACL_SUCCESS


@pytest.fixture
def pages():
    """Two pages of host memory, page aligned, and their address."""
    with mmap.mmap(-1, 2 * PAGE) as m:
        yield m, acl.util.bytes_to_ptr(m)


def test_a_context_names_a_device_for_its_thread(device):
    # A thread that never chose a device or context has none.
    assert on_new_thread(acl.rt.get_context) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    ctx, ret = acl.rt.create_context(0)
    assert ret == acl.ACL_SUCCESS and ctx != 0
    assert acl.rt.get_context() == (ctx, acl.ACL_SUCCESS)  # creating makes it current

    def elsewhere():
        got = [acl.rt.set_context(ctx), acl.rt.get_context(), acl.rt.get_device()]
        s, ret = acl.rt.create_stream()  # on the context's device
        got += [ret, acl.rt.destroy_stream(s)]
        return got

    assert on_new_thread(elsewhere) == [acl.ACL_SUCCESS, (ctx, acl.ACL_SUCCESS),
                                        (0, acl.ACL_SUCCESS), acl.ACL_SUCCESS, acl.ACL_SUCCESS]
    other, ret = acl.rt.create_context(0)
    assert ret == acl.ACL_SUCCESS and other not in (0, ctx)
    assert acl.rt.get_context() == (other, acl.ACL_SUCCESS)
    assert acl.rt.set_context(ctx) == acl.ACL_SUCCESS
    assert acl.rt.get_context() == (ctx, acl.ACL_SUCCESS)
    assert acl.rt.destroy_context(other) == acl.ACL_SUCCESS
    assert acl.rt.destroy_context(ctx) == acl.ACL_SUCCESS


def test_context_error_cases(device):
    for bad in (1, -1, 2**40):
        assert acl.rt.create_context(bad) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID), bad
    assert acl.rt.destroy_context(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.set_context(0) == acl.ACL_ERROR_INVALID_PARAM
    ctx, ret = acl.rt.create_context(0)
    assert ret == acl.ACL_SUCCESS
    assert acl.rt.destroy_context(ctx) == acl.ACL_SUCCESS
    assert acl.rt.destroy_context(ctx) == acl.ACL_ERROR_RT_PARAM_INVALID  # destroyed
    assert acl.rt.set_context(ctx) == acl.ACL_ERROR_RT_PARAM_INVALID
    with pytest.raises(TypeError):
        acl.rt.create_context(None)


def test_registered_host_memory_is_device_accessible(device, pages):
    buf, ptr = pages
    buf[:5] = b"hello"
    dev_ptr, ret = acl.rt.host_register(ptr, 2 * PAGE, acl.ACL_HOST_REGISTER_MAPPED)
    assert ret == acl.ACL_SUCCESS
    assert dev_ptr == ptr  # one address space
    assert acl.rt.host_get_device_pointer(ptr + 100, 0) == (dev_ptr + 100, acl.ACL_SUCCESS)
    dev, ret = acl.rt.malloc(PAGE, acl.rt.malloc_type.HUGE_FIRST)
    assert ret == acl.ACL_SUCCESS
    assert acl.rt.memcpy(dev, PAGE, dev_ptr, 5, acl.rt.memcpy_kind.DEVICE_TO_DEVICE) == 0
    assert acl.rt.memcpy(dev_ptr + PAGE, PAGE, dev, 5, acl.rt.memcpy_kind.DEVICE_TO_DEVICE) == 0
    assert bytes(buf[PAGE:PAGE + 5]) == b"hello"
    assert acl.rt.free(dev) == acl.ACL_SUCCESS
    assert acl.rt.host_unregister(ptr) == acl.ACL_SUCCESS
    assert acl.rt.host_get_device_pointer(ptr, 0) == (
        0, acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED)


def test_host_registration_error_cases(device, pages):
    _, ptr = pages
    mapped = acl.ACL_HOST_REGISTER_MAPPED
    assert acl.rt.host_register(0, PAGE, mapped) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.host_register(ptr, 0, mapped) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.host_register(ptr, -1, mapped) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.host_register(ptr, PAGE, acl.ACL_HOST_REGISTER_READONLY) == (
        0, acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
    assert acl.rt.host_register(ptr + 8, PAGE, mapped)[1] == acl.ACL_ERROR_INVALID_PARAM  # not 4 KiB aligned
    assert acl.rt.host_unregister(ptr) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    assert acl.rt.host_get_device_pointer(ptr, 0) == (
        0, acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED)
    dev_ptr, ret = acl.rt.host_register(ptr, PAGE, acl.ACL_HOST_REGISTER_IOMEMORY)
    assert ret == acl.ACL_SUCCESS and dev_ptr != 0
    assert acl.rt.host_register(ptr, PAGE, mapped) == (
        0, acl.ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    assert acl.rt.host_get_device_pointer(ptr, 1)[1] == acl.ACL_ERROR_INVALID_PARAM  # flag must be 0
    assert acl.rt.host_get_device_pointer(ptr, -1) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.host_unregister(ptr + 8) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    assert acl.rt.host_unregister(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.host_unregister(ptr) == acl.ACL_SUCCESS
    assert acl.rt.host_unregister(ptr) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
