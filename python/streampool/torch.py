"""PyTorch's CUDA tensors in streampool pools.

    import streampool.torch
    streampool.torch.use(release_threshold="max", growth="expandable")
    import torch
    x = torch.randn(1024, 1024, device="cuda")   # a streampool allocation
    print(streampool.torch.stats()["reserved_high"])

use() makes libstreampool-torch.so PyTorch's CUDA allocator (through
torch.cuda.memory.CUDAPluggableAllocator and change_current_allocator), so it
must run before the process's first CUDA allocation. The library keeps one
streampool runtime over the machine's CUDA devices, made at the first
allocation; PyTorch's streams are adopted into it as they appear
(include/streampool/torch_allocator.h says what the library does).

An unchanged script runs on it with

    python -m streampool.torch script.py args...
    python -m streampool.torch -m package.module args...

taking its settings from STREAMPOOL_TORCH_RELEASE_THRESHOLD,
STREAMPOOL_TORCH_FOLLOW_EVENT_DEPENDENCIES, STREAMPOOL_TORCH_OPPORTUNISTIC,
STREAMPOOL_TORCH_INTERNAL_DEPENDENCIES, STREAMPOOL_TORCH_GROWTH and
STREAMPOOL_TORCH_MAX_SIZE.

stats(), snapshot(), memory_snapshot() and leak_report() read the pools back.
Importing this module does not import torch (use() does), and needs no GPU:
configure() checks settings anywhere. Errors raise streampool.Error.
"""

import ctypes as _ctypes
import json as _json
import os as _os
import sys as _sys

from streampool._errors import Error, OutOfMemoryError

__all__ = [
    "SETTINGS",
    "configure",
    "init",
    "leak_report",
    "library_path",
    "memory_snapshot",
    "snapshot",
    "stats",
    "use",
]

_LIBRARY = "libstreampool-torch.so"
#: The settings use() and configure() take, in the library's order.
SETTINGS = ("release_threshold", "follow_event_dependencies", "opportunistic",
            "internal_dependencies", "growth", "max_size")
_SWITCHES = ("follow_event_dependencies", "opportunistic", "internal_dependencies")
_ENV_PREFIX = "STREAMPOOL_TORCH_"

# The spError_t values the library's functions return (streampool.h).
_ERROR_NAMES = {
    1: "spErrorInvalidValue",
    2: "spErrorMemoryAllocation",
    35: "spErrorInsufficientDriver",
    100: "spErrorNoDevice",
    101: "spErrorInvalidDevice",
    400: "spErrorInvalidResourceHandle",
    600: "spErrorNotReady",
    801: "spErrorNotSupported",
    999: "spErrorUnknown",
}

_lib = None
_allocator = None


def library_path():
    """Where libstreampool-torch.so is: $STREAMPOOL_TORCH_LIBRARY if set, else
    beside this module (the build tree's python/streampool/ and the installed
    package both hold it)."""
    path = _os.environ.get("STREAMPOOL_TORCH_LIBRARY")
    if not path:
        path = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), _LIBRARY)
    if not _os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: no {_LIBRARY} (build the streampool_python_torch target, or set "
            "STREAMPOOL_TORCH_LIBRARY)")
    return path


def _library():
    global _lib
    if _lib is None:
        lib = _ctypes.CDLL(library_path())
        size_p = _ctypes.POINTER(_ctypes.c_size_t)
        lib.streampool_torch_configure.argtypes = [_ctypes.c_char_p]
        lib.streampool_torch_configure.restype = _ctypes.c_int
        lib.streampool_torch_init.argtypes = []
        lib.streampool_torch_init.restype = _ctypes.c_int
        lib.streampool_torch_error_message.argtypes = []
        lib.streampool_torch_error_message.restype = _ctypes.c_char_p
        for name in ("stats", "snapshot", "leak_report"):
            fn = getattr(lib, f"streampool_torch_{name}_json")
            fn.argtypes = [_ctypes.c_int, _ctypes.c_char_p, _ctypes.c_size_t, size_p]
            fn.restype = _ctypes.c_int
        _lib = lib
    return _lib


def _error(code):
    message = _library().streampool_torch_error_message().decode("utf-8", "replace")
    name = _ERROR_NAMES.get(code, f"spError {code}")
    cls = OutOfMemoryError if code == 2 else Error
    return cls(name, message)


def _text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    if "," in text or "=" in text:
        raise Error("spErrorInvalidValue", f"{text!r}: a setting's value has no ',' or '='")
    return text


def _settings_text(settings):
    return ",".join(f"{key}={_text(value)}" for key, value in settings.items())


def _env_settings():
    """The STREAMPOOL_TORCH_* variables that are set, by setting name."""
    out = {}
    for key in SETTINGS:
        value = _os.environ.get(_ENV_PREFIX + key.upper())
        if value is not None:
            out[key] = value.strip()
    return out


def _configure(settings, env=()):
    code = _library().streampool_torch_configure(_settings_text(settings).encode())
    if code:
        err = _error(code)
        # Say which variable a bad value came from.
        for key in env:
            if err.message.startswith(f"{key}="):
                err = type(err)(err.code, f"{err.message} (from {_ENV_PREFIX}{key.upper()})")
                break
        raise err


def _given(release_threshold, follow_event_dependencies, opportunistic, internal_dependencies,
           growth, max_size):
    values = dict(release_threshold=release_threshold,
                  follow_event_dependencies=follow_event_dependencies,
                  opportunistic=opportunistic, internal_dependencies=internal_dependencies,
                  growth=growth, max_size=max_size)
    return {k: v for k, v in values.items() if v is not None}


def configure(release_threshold=None, follow_event_dependencies=None, opportunistic=None,
              internal_dependencies=None, growth=None, max_size=None):
    """Sets the settings of the runtime still to be made, replacing earlier
    ones; a setting left None keeps the library's default (the environment is
    not read). release_threshold and max_size: bytes (an int, or digits with a
    K, M or G suffix), release_threshold also "max"; the three switches:
    bools (or 0 and 1); growth: "expandable" or "chunked". A bad value raises
    Error("spErrorInvalidValue") and changes nothing; once the runtime exists
    (after the first allocation) Error("spErrorNotSupported")."""
    _configure(_given(release_threshold, follow_event_dependencies, opportunistic,
                      internal_dependencies, growth, max_size))


def use(release_threshold=None, follow_event_dependencies=None, opportunistic=None,
        internal_dependencies=None, growth=None, max_size=None):
    """Makes streampool PyTorch's CUDA allocator, with the STREAMPOOL_TORCH_*
    variables' settings and, over them, those given here (as configure()
    takes them; a malformed variable raises as a bad argument does, naming
    it). Call it before the first CUDA allocation of the process: PyTorch
    cannot switch allocators after one (Error("spErrorNotSupported")).
    Calling it again changes nothing but the settings, which it refuses once
    the runtime exists. Returns PyTorch's allocator object."""
    global _allocator
    env = _env_settings()
    settings = dict(env)
    given = _given(release_threshold, follow_event_dependencies, opportunistic,
                   internal_dependencies, growth, max_size)
    settings.update(given)
    if _allocator is not None:
        if given:
            _configure(settings, env=[k for k in env if k not in given])
        return _allocator
    _configure(settings, env=[k for k in env if k not in given])
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError(f"streampool.torch.use() needs PyTorch ({e})") from e
    allocator = torch.cuda.memory.CUDAPluggableAllocator(
        library_path(), "streampool_torch_alloc", "streampool_torch_free")
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise Error("spErrorNotSupported",
                    f"PyTorch has allocated CUDA memory already; call use() before that ({e})"
                    ) from e
    _allocator = allocator
    return allocator


def init():
    """Makes the runtime now (the first allocation would); raises Error with
    the reason it cannot be made: spErrorInsufficientDriver without a CUDA
    driver, spErrorNoDevice without a GPU."""
    code = _library().streampool_torch_init()
    if code:
        raise _error(code)


def _report(name, device):
    fn = getattr(_library(), f"streampool_torch_{name}_json")
    length = _ctypes.c_size_t(0)
    code = fn(device, None, 0, _ctypes.byref(length))
    # The pools may change between sizing and copying: size again until it fits.
    while True:
        if code:
            raise _error(code)
        buf = _ctypes.create_string_buffer(length.value + 1)
        code = fn(device, buf, len(buf), _ctypes.byref(length))
        if not code and length.value < len(buf):
            return _json.loads(buf.value.decode())


def _device_arg(device):
    if device is None:
        return -1
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise Error("spErrorInvalidDevice", f"device {device!r}: an index, or None for all")
    return device


def stats(device=0):
    """The statistics of a device's pool as a dict (the names of
    streampool.Pool.stats(): reserved_bytes, reserved_high, used_bytes,
    used_high, the reuse counts by rule, waits_inserted, ...), plus "device",
    "streams" (PyTorch streams adopted) and "settings" (what the pool runs
    with). device None: a list, one dict per device. Before the first
    allocation: Error("spErrorNotReady")."""
    devices = _report("stats", _device_arg(device))["devices"]
    return devices if device is None else devices[0]


def snapshot(device=None):
    """The pools' segments and blocks, in the layout of
    streampool.Pool.snapshot(): {"devices": [{"device", "pool", "segments":
    [{"address", "size", "mapped_bytes", "expandable", "blocks": [...]}]}]},
    a block's stream being its CUDA stream handle (0: the legacy stream;
    None: no stream). device: one device's entry instead."""
    doc = _report("snapshot", _device_arg(device))
    return doc if device is None else doc["devices"][0]


def memory_snapshot():
    """snapshot() in the layout of torch.cuda.memory._snapshot(), which
    PyTorch's memory viewer opens once pickled (see
    streampool.Runtime.memory_snapshot for what is and is not filled)."""
    from streampool import _torch_segments  # pylint: disable=import-outside-toplevel
    devices = snapshot()["devices"]
    segments = []
    for dev in devices:
        segments.extend(_torch_segments(dev))
    segments.sort(key=lambda s: (s["device"], s["address"]))
    count = max((d["device"] for d in devices), default=-1) + 1
    return {"segments": segments, "device_traces": [[] for _ in range(count)],
            "allocator_settings": {}}


def leak_report(device=None):
    """The allocations handed out and not freed: {"count", "bytes" (what they
    asked for), "allocations": [{"ptr", "size", "block_size", "device",
    "stream", "seq"}]}, on one device or (None) all."""
    return _report("leak_report", _device_arg(device))


def _usage(out):
    print("usage: python -m streampool.torch script.py [args...]\n"
          "       python -m streampool.torch -m module [args...]\n"
          "Runs the script with streampool as PyTorch's CUDA allocator, set from the\n"
          "STREAMPOOL_TORCH_* variables: " +
          ", ".join(_ENV_PREFIX + k.upper() for k in SETTINGS) + ".", file=out)


def _main(argv):
    import runpy  # pylint: disable=import-outside-toplevel
    if not argv or argv[0] in ("-h", "--help"):
        _usage(_sys.stdout if argv else _sys.stderr)
        return 0 if argv else 2
    if argv[0] == "-m" and len(argv) < 2:
        _usage(_sys.stderr)
        return 2
    try:
        use()
    except (Error, ImportError, FileNotFoundError) as e:
        print(f"streampool.torch: {e}", file=_sys.stderr)
        return 2
    if argv[0] == "-m":
        _sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        _sys.argv = list(argv)
        _sys.path[0] = _os.path.dirname(_os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    # This file runs as __main__; the state belongs to the module the script
    # imports as streampool.torch, so that is the one to run.
    from streampool import torch as _module  # pylint: disable=import-self
    _sys.exit(_module._main(_sys.argv[1:]))  # pylint: disable=protected-access
