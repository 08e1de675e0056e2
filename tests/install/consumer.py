"""`import streampool` from an installed prefix, as a user would: run by
./run.sh test with PYTHONPATH=<prefix>/lib/pythonX.Y/site-packages (the
README's setting) and the site directory as its argument."""

import os
import sys
import tempfile

import streampool as sp

site = os.path.realpath(sys.argv[1])
here = os.path.realpath(sp.__file__)
assert here.startswith(site + os.sep), f"imported {here}, not the package under {site}"

with sp.Runtime(devices=1, capacity=1 << 30) as rt:
    s, t = rt.create_stream(), rt.create_stream(non_blocking=True)
    a = rt.malloc_async(2 << 20, s)
    rt.launch_kernel(s, duration_ns=1000, accesses=[a])
    rt.free_async(a, s)
    e = rt.create_event()
    e.record(s)
    t.wait_event(e)
    b = rt.malloc_async(2 << 20, t)
    assert (b.ptr, b.rule) == (a.ptr, "event_dependency"), b
    rt.free_async(b, t)
    rt.device_synchronize()
    try:
        rt.malloc_async(1 << 40, s)
        raise AssertionError("no OutOfMemoryError")
    except MemoryError as err:
        assert isinstance(err, sp.Error) and err.code == "spErrorMemoryAllocation"

with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "tiny.trace")
    with open(trace, "w", encoding="utf-8") as f:
        f.write("# streampool trace v1\nalloc 1 4096 0\nfree 1 0\nalloc 2 4096 0\nfree 2 0\n")
    (run,) = sp.replay(trace)["traces"][0]["runs"]
    assert run["reuse_counts"]["same_stream"] == 1, run

print(f"import streampool from {os.path.dirname(here)}: ok ({sys.executable})")
