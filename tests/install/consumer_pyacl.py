"""A pyACL program as its users write them, importing acl only: run by
./run.sh test from an installed and moved prefix with
PYTHONPATH=<prefix>/lib/streampool/pyacl (docs/acl.md's setting), the prefix
as its argument. No numpy: any python3 of the extension's version runs it."""

import os
import sys

import acl

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
DEVICE_ID = 0


def check(ret, what):
    if ret != 0:
        raise SystemExit(f"{what} failed, ret {ret}")


if len(sys.argv) > 1:
    prefix = os.path.realpath(sys.argv[1])
    here = os.path.realpath(acl.__file__)
    assert here.startswith(prefix + os.sep), f"imported {here}, not the acl under {prefix}"

check(acl.init(), "acl.init")
check(acl.rt.set_device(DEVICE_ID), "acl.rt.set_device")
stream, ret = acl.rt.create_stream()
check(ret, "acl.rt.create_stream")

data = bytes(range(256)) * 64
size = len(data)
dev_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
check(ret, "acl.rt.malloc")
check(acl.rt.memcpy(dev_ptr, size, acl.util.bytes_to_ptr(data), size, ACL_MEMCPY_HOST_TO_DEVICE),
      "acl.rt.memcpy")
check(acl.rt.memset_async(dev_ptr, size, 0xFF, 16, stream), "acl.rt.memset_async")
check(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
out = bytes(size)
check(acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, dev_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST),
      "acl.rt.memcpy")
assert out == b"\xff" * 16 + data[16:], "the copy back differs"

# A value the C function refuses comes back as ret, not as an exception.
bad, ret = acl.rt.malloc(0, ACL_MEM_MALLOC_HUGE_FIRST)
assert (bad, ret) == (0, acl.ACL_ERROR_INVALID_PARAM), (bad, ret)

check(acl.rt.free(dev_ptr), "acl.rt.free")
check(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream")
check(acl.rt.reset_device(DEVICE_ID), "acl.rt.reset_device")
check(acl.finalize(), "acl.finalize")
print(f"pyACL program from {os.path.dirname(os.path.dirname(acl.__file__))}: ok "
      f"({sys.executable})")
