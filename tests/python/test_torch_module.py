"""streampool.torch, the module that makes libstreampool-torch.so PyTorch's
CUDA allocator: importing it leaves torch alone, settings are checked before
PyTorch is touched (a bad one raises sp.Error with the C code), and the
runner `python -m streampool.torch` stops on a bad STREAMPOOL_TORCH_*
variable. The parts that need PyTorch skip without it; those that need a GPU
skip without one.

The library's state is the process's: tests that need it fresh run in a
subprocess, and what configure answers here depends on whether an earlier
test made the runtime (only possible with a GPU)."""

import os
import subprocess
import sys
import textwrap

import pytest

import streampool as sp
import streampool.torch as spt

NO_CUDA = ("spErrorInsufficientDriver", "spErrorNoDevice")


def run_python(code, *args, env=None):
    """Runs `code` (or, with args, the interpreter with those arguments) in a
    fresh interpreter with this one's path."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    full_env.update(env or {})
    command = [sys.executable] + (list(args) if args else ["-c", textwrap.dedent(code)])
    return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=120)


def runtime_exists():
    try:
        spt.stats()
        return True
    except sp.Error:
        return False


def accepted():
    """What configure() does with good settings now: nothing (None), or
    refuse them because the runtime exists."""
    return "spErrorNotSupported" if runtime_exists() else None


def configure_code(**settings):
    try:
        spt.configure(**settings)
        return None
    except sp.Error as e:
        return e.code


def test_import_does_not_import_torch():
    r = run_python("""
        import sys
        import streampool.torch as spt
        assert "torch" not in sys.modules, "importing streampool.torch imported torch"
        # Nor does checking settings.
        try:
            spt.use(growth="huge")
        except Exception as e:
            print(type(e).__name__, e.code)
        assert "torch" not in sys.modules, "a refused use() imported torch"
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Error spErrorInvalidValue"


def test_the_library_is_beside_the_module():
    path = spt.library_path()
    assert os.path.basename(path) == "libstreampool-torch.so"
    assert os.path.isfile(path)


def test_a_missing_library_is_named(monkeypatch):
    monkeypatch.setenv("STREAMPOOL_TORCH_LIBRARY", "/nonexistent/libstreampool-torch.so")
    with pytest.raises(FileNotFoundError, match="/nonexistent/libstreampool-torch.so"):
        spt.library_path()


@pytest.mark.parametrize("settings, says", [
    (dict(growth="huge"), "expandable or chunked"),
    (dict(growth="default"), "expandable or chunked"),
    (dict(opportunistic=2), "0 or 1"),
    (dict(follow_event_dependencies="yes"), "0 or 1"),
    (dict(internal_dependencies="true"), "0 or 1"),
    (dict(release_threshold=-1), "release_threshold=-1"),
    (dict(release_threshold="12X"), "release_threshold=12X"),
    (dict(release_threshold=1 << 64), "release_threshold="),
    (dict(max_size="max"), "max_size=max"),
    (dict(release_threshold="1,growth=chunked"), "no ',' or '='"),
    (dict(growth="chunked=1"), "no ',' or '='"),
])
def test_bad_settings_raise_invalid_value(settings, says):
    with pytest.raises(sp.Error) as err:
        spt.configure(**settings)
    assert err.value.code == "spErrorInvalidValue"
    assert says in err.value.message


def test_good_settings_are_taken_before_the_runtime_exists():
    expected = accepted()
    assert configure_code(release_threshold="max") == expected
    assert configure_code(release_threshold=64 << 20, growth="chunked", max_size="8G") == expected
    assert configure_code(follow_event_dependencies=False, opportunistic=True,
                          internal_dependencies=0) == expected
    assert configure_code(growth="expandable") == expected
    assert configure_code() == expected


def test_reports_before_the_first_allocation_say_so():
    r = run_python("""
        import streampool, streampool.torch as spt
        for report in (spt.stats, spt.snapshot, spt.leak_report):
            try:
                report()
            except streampool.Error as e:
                print(e.code)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["spErrorNotReady"] * 3


def test_without_a_gpu_init_says_why():
    r = run_python("""
        import streampool, streampool.torch as spt
        try:
            spt.init()
            print("made")
        except streampool.Error as e:
            print(e.code)
            # Remembered: the reports give the same reason.
            try:
                spt.stats()
            except streampool.Error as again:
                print(again.code)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    if lines == ["made"]:
        pytest.skip("a CUDA device is present")
    assert lines[0] in NO_CUDA and lines == [lines[0]] * 2


def test_bad_devices_are_refused_before_the_library_is_asked():
    for device in (-2, True, "0"):
        with pytest.raises(sp.Error) as err:
            spt.stats(device)
        assert err.value.code == "spErrorInvalidDevice"


def test_runner_stops_on_a_bad_variable(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("print('ran')\n")
    r = run_python(None, "-m", "streampool.torch", str(script),
                   env={"STREAMPOOL_TORCH_GROWTH": "huge"})
    assert r.returncode == 2
    assert "ran" not in r.stdout
    assert "STREAMPOOL_TORCH_GROWTH" in r.stderr and "expandable or chunked" in r.stderr


def test_runner_usage():
    r = run_python(None, "-m", "streampool.torch")
    assert r.returncode == 2 and "usage" in r.stderr
    r = run_python(None, "-m", "streampool.torch", "--help")
    assert r.returncode == 0 and "STREAMPOOL_TORCH_RELEASE_THRESHOLD" in r.stdout


def test_runner_without_torch_says_so(tmp_path):
    if run_python("import torch").returncode == 0:
        pytest.skip("PyTorch is installed")
    script = tmp_path / "script.py"
    script.write_text("print('ran')\n")
    r = run_python(None, "-m", "streampool.torch", str(script))
    assert r.returncode == 2
    assert "needs PyTorch" in r.stderr


# A stand-in for PyTorch's two calls, which checks what real PyTorch does with
# the names: loads the library by path and looks the functions up in it.
FAKE_TORCH_MEMORY = """
import ctypes
calls = []
class CUDAPluggableAllocator:
    def __init__(self, path, alloc_fn_name, free_fn_name):
        lib = ctypes.CDLL(path)
        getattr(lib, alloc_fn_name), getattr(lib, free_fn_name)
        calls.append(("allocator", path, alloc_fn_name, free_fn_name))
def change_current_allocator(allocator):
    if any(c[0] == "changed" for c in calls):
        raise RuntimeError("Can't swap an already initialized allocator")
    calls.append(("changed",))
    global alloc, free
    _, path, alloc_name, free_name = calls[0]
    lib = ctypes.CDLL(path)
    # PyTorch calls the two functions through their addresses, with these types.
    alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)(
        ctypes.cast(getattr(lib, alloc_name), ctypes.c_void_p).value)
    free = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                            ctypes.c_void_p)(
        ctypes.cast(getattr(lib, free_name), ctypes.c_void_p).value)
"""


def fake_torch(tmp_path):
    package = tmp_path / "fake" / "torch"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text("from torch import cuda\n")
    (package / "cuda" / "__init__.py").write_text("from torch.cuda import memory\n")
    (package / "cuda" / "memory.py").write_text(FAKE_TORCH_MEMORY)
    return str(tmp_path / "fake")


def test_use_hands_pytorch_the_library(tmp_path):
    r = run_python(f"""
        import sys
        sys.path.insert(0, {fake_torch(tmp_path)!r})
        import streampool.torch as spt
        spt.use(release_threshold="max", opportunistic=False)
        spt.use()  # again: nothing more
        import torch
        print(torch.cuda.memory.calls)
        print(torch.cuda.memory.calls[0][1] == spt.library_path())
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "'streampool_torch_alloc', 'streampool_torch_free'), ('changed',)]" in lines[0]
    assert lines[1] == "True"


def test_runner_runs_a_script_on_the_allocator(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        print(__name__, sys.argv[1:], [c[0] for c in torch.cuda.memory.calls])
    """))
    r = run_python(None, "-m", "streampool.torch", str(script), "a", "--b",
                   env={"PYTHONPATH": os.pathsep.join([fake_torch(tmp_path)] +
                                                      [p for p in sys.path if p])})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ ['a', '--b'] ['allocator', 'changed']"


def test_allocations_through_the_function_pointers(tmp_path):
    """PyTorch's calls as PyTorch makes them, on whatever CUDA driver there is
    (CTest also runs this file on the scripted one of tests/fakecuda/)."""
    r = run_python(f"""
        import sys
        sys.path.insert(0, {fake_torch(tmp_path)!r})
        import streampool, streampool.torch as spt
        spt.use(growth="expandable", opportunistic=False)
        try:
            spt.init()
        except streampool.Error as e:
            print("no cuda", e.code)
            sys.exit(0)
        from torch.cuda import memory
        assert memory.alloc(0, 0, None) is None
        p = memory.alloc(3 << 20, 0, None)
        assert p, spt.stats()
        s = spt.stats()
        assert s["used_bytes"] >= 3 << 20 and s["alloc_count"] == 1, s
        assert s["settings"]["opportunistic"] == 0, s
        assert spt.leak_report()["allocations"][0]["ptr"] == p
        assert any(b["state"] == "live" for seg in spt.snapshot(0)["segments"]
                   for b in seg["blocks"])
        memory.free(p, 3 << 20, 0, None)
        memory.free(None, 0, 0, None)
        q = memory.alloc(3 << 20, 0, None)
        s = spt.stats()
        assert s["reuse_same_stream"] == 1 and s["streams"] == 1, s
        memory.free(q, 3 << 20, 0, None)
        assert spt.leak_report()["count"] == 0
        assert spt.memory_snapshot()["segments"], spt.snapshot()
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    if r.stdout.startswith("no cuda"):
        pytest.skip(f"no CUDA runtime here: {r.stdout.split()[-1]}")
    assert r.stdout.strip() == "ok"


def test_runner_runs_an_unchanged_script(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        import streampool.torch as spt
        print("argv", sys.argv[1:])
        if not torch.cuda.is_available():
            print("no gpu")
            sys.exit(0)
        x = torch.ones(1 << 20, device="cuda")
        y = (x * 2).sum()
        torch.cuda.synchronize()
        assert y.item() == 2 << 20
        s = spt.stats()
        assert s["used_bytes"] >= 4 << 20 and s["settings"]["growth"] == "chunked", s
        del x
        print("leaks", spt.leak_report()["count"] >= 0)
    """))
    r = run_python(None, "-m", "streampool.torch", str(script), "a", "b",
                   env={"STREAMPOOL_TORCH_GROWTH": "chunked"})
    assert r.returncode == 0, r.stderr
    assert "argv ['a', 'b']" in r.stdout


def test_with_a_gpu_settings_are_refused_once_the_runtime_exists():
    try:
        spt.init()
    except sp.Error as e:
        if e.code in NO_CUDA:
            pytest.skip(f"no CUDA runtime here: {e.code}")
        raise
    assert configure_code(release_threshold=0) == "spErrorNotSupported"
    assert configure_code(growth="huge") == "spErrorInvalidValue"
    s = spt.stats(0)
    assert s["device"] == 0 and s["settings"]["release_threshold"] == sp.MAX
    assert spt.leak_report(0)["count"] == 0
    assert spt.snapshot(0)["device"] == 0
