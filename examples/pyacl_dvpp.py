#!/usr/bin/env python3
"""DVPP memory from a pyACL program, on streampool's simulated Ascend device.

Media buffers (decoded frames, resized images) live in DVPP memory, which
acl.media.dvpp_malloc (acldvppMalloc) and acl.himpi.dvpp_malloc
(hi_mpi_dvpp_malloc) hand out: each buffer starts 128-byte aligned and takes
ALIGN_UP(ALIGN_UP(len, 32) + 32, 128) bytes, so a frame's stride can be
padded without overrunning its neighbour. This program allocates a few
frames, shows where they land and what they cost, fills them on a stream,
copies one back and frees everything.

    PYTHONPATH=<build>/python:<build>/pyacl python3 examples/pyacl_dvpp.py
    PYTHONPATH=<prefix>/lib/streampool/pyacl python3 examples/pyacl_dvpp.py

The acl calls are pyACL's; streampool.acl_runtime() (the same process's
runtime seen from streampool) only reports the block sizes.
"""

import sys

import acl
import streampool

DEVICE_ID = 0
# (width, height) of YUV420SP frames: width * height * 3 / 2 bytes each.
FRAMES = [(1920, 1080), (1280, 720), (224, 224), (7, 3)]
FILL = 0x80


def align_up(n, a):
    return (n + a - 1) // a * a


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise SystemExit(f"{what} failed: ret {ret}")


def main():
    check(acl.init(), "acl.init")
    check(acl.rt.set_device(DEVICE_ID), "acl.rt.set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "acl.rt.create_stream")
    free_before, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    check(ret, "acl.rt.get_mem_info")

    buffers = []  # (dev_ptr, size, allocator)
    for i, (w, h) in enumerate(FRAMES):
        size = w * h * 3 // 2
        # Both names reach the same DVPP pool; hi_mpi's takes a device id.
        if i % 2 == 0:
            dev_ptr, ret = acl.media.dvpp_malloc(size)
            name = "acl.media.dvpp_malloc"
        else:
            dev_ptr, ret = acl.himpi.dvpp_malloc(DEVICE_ID, size)
            name = "acl.himpi.dvpp_malloc"
        check(ret, name)
        if dev_ptr % 128 != 0:
            raise SystemExit(f"{name}({size}) = {dev_ptr:#x}: not 128-byte aligned")
        buffers.append((dev_ptr, size, name))

    free_after, _, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    with streampool.acl_runtime() as rt:
        blocks = {a["ptr"]: a["block_size"] for a in rt.live_allocations()}
    first = buffers[0][0]
    print(f"{'frame':>10} {'bytes':>9} {'block':>9} {'offset':>9}  from")
    for (w, h), (dev_ptr, size, name) in zip(FRAMES, buffers):
        expected = align_up(align_up(size, 32) + 32, 128)
        if blocks[dev_ptr] != expected:
            raise SystemExit(f"{size} bytes took a block of {blocks[dev_ptr]}, not {expected}")
        print(f"{w:>5}x{h:<4} {size:>9} {blocks[dev_ptr]:>9} {dev_ptr - first:>9}  {name}")
    # Consecutive fresh buffers sit back to back: the next starts where the
    # padded block of the one before ends.
    for (a, size, _), (b, _, _) in zip(buffers, buffers[1:]):
        if b - a != align_up(align_up(size, 32) + 32, 128):
            raise SystemExit(f"buffers at {a:#x} and {b:#x} are not back to back")
    used = sum(blocks[p] for p, _, _ in buffers)
    print(f"blocks: {used} bytes for {sum(s for _, s, _ in buffers)} requested; "
          f"the device reserved {free_before - free_after} bytes for them "
          f"(of {total})")

    # Fill every frame on the stream, then read the smallest one back.
    for dev_ptr, size, _ in buffers:
        check(acl.rt.memset_async(dev_ptr, size, FILL, size, stream), "acl.rt.memset_async")
    check(acl.rt.synchronize_stream(stream), "acl.rt.synchronize_stream")
    dev_ptr, size, _ = buffers[-1]
    host = bytearray(size)
    check(acl.rt.memcpy(acl.util.bytes_to_ptr(host), size, dev_ptr, size,
                        acl.rt.memcpy_kind.DEVICE_TO_HOST), "acl.rt.memcpy")
    if host != bytes([FILL]) * size:
        raise SystemExit("the frame read back is not the fill")
    print(f"filled {len(buffers)} frames with {FILL:#x}; read back {size} bytes: ok")

    for i, (dev_ptr, _, _) in enumerate(buffers):
        free = acl.media.dvpp_free if i % 2 == 0 else acl.himpi.dvpp_free
        check(free(dev_ptr), "dvpp_free")
    free_end, _, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    print(f"after dvpp_free: {free_end} bytes free (as before: {free_end == free_before})")
    check(acl.rt.destroy_stream(stream), "acl.rt.destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "acl.rt.reset_device")
    check(acl.finalize(), "acl.finalize")
    if free_end != free_before:
        raise SystemExit("dvpp_free did not give the memory back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
