"""The package's surface as a test writer meets it: every public function and
property says what it does, every signature names Python types, and a bad
argument to anything public is an sp.Error (spErrorInvalidValue), never a
pybind11 TypeError or RuntimeError."""

import inspect
import re

import pytest

import streampool as sp
from conftest import INFERENCE_TRACE

CLASSES = [getattr(sp, n) for n in sp.__all__ if inspect.isclass(getattr(sp, n))]
FUNCTIONS = [getattr(sp, n) for n in sp.__all__
             if callable(getattr(sp, n)) and not inspect.isclass(getattr(sp, n))]
# What a C++ type looks like when pybind11 cannot name it in Python.
CXX_NAME = re.compile(r"::|std::|absl::|unsigned long|basic_string|_core\.")


def public_members():
    for cls in CLASSES:
        for name, member in vars(cls).items():
            # A NamedTuple's fields are plain values, documented by the class.
            if not callable(member) and not isinstance(member, property):
                continue
            if not name.startswith("_") or name == "__init__":
                yield f"{cls.__name__}.{name}", member


def doc_text(member):
    """The docstring less pybind11's signature line."""
    doc = inspect.getdoc(member) or ""
    lines = doc.splitlines()
    if lines and re.match(r"^\w*\(.*\)( -> .*)?$", lines[0]):
        lines = lines[1:]
    return "\n".join(lines).strip()


@pytest.mark.parametrize("name,member", list(public_members()), ids=lambda x: str(x))
def test_every_public_method_and_property_has_a_docstring(name, member):
    assert doc_text(member), f"{name} has no docstring"


@pytest.mark.parametrize("fn", FUNCTIONS + CLASSES, ids=lambda f: f.__name__)
def test_every_public_function_and_class_has_a_docstring(fn):
    assert doc_text(fn), fn.__name__


@pytest.mark.parametrize("name,member", list(public_members()), ids=lambda x: str(x))
def test_no_cxx_type_name_in_a_signature(name, member):
    fns = [member.fget, member.fset] if isinstance(member, property) else [member]
    for fn in fns:
        if fn is None:
            continue
        try:
            sig = str(inspect.signature(fn))
        except (TypeError, ValueError):
            pytest.fail(f"{name}: inspect cannot read its signature")
        assert not CXX_NAME.search(sig), f"{name}{sig}"
        first = (inspect.getdoc(fn) or "").split("\n", 1)[0]
        assert not CXX_NAME.search(first), f"{name}: {first}"


@pytest.fixture
def world():
    with sp.Runtime(capacity=64 << 20) as rt:
        s = rt.create_stream()
        yield rt, s, rt.create_event(), rt.default_pool()


# Bad values and types for every kind of parameter the binding converts.
BAD_CALLS = {
    "Runtime(devices='x')": lambda w: sp.Runtime(devices="x"),
    "Runtime(capacity=-1)": lambda w: sp.Runtime(capacity=-1),
    "Runtime(backing=3)": lambda w: sp.Runtime(backing=3),
    "Runtime(leak_check='maybe')": lambda w: sp.Runtime(leak_check="maybe"),
    "create_stream(device='x')": lambda w: w[0].create_stream(device="x"),
    "create_stream(device=7)": lambda w: w[0].create_stream(device=7),
    "malloc_async(-1)": lambda w: w[0].malloc_async(-1, w[1]),
    "malloc_async(2**70)": lambda w: w[0].malloc_async(1 << 70, w[1]),
    "malloc_async(stream='s')": lambda w: w[0].malloc_async(1, "s"),
    "malloc_async(pool=5)": lambda w: w[0].malloc_async(1, w[1], pool=5),
    "free_async('x')": lambda w: w[0].free_async("x", w[1]),
    "free_async(-1)": lambda w: w[0].free_async(-1, w[1]),
    "launch_kernel(duration_ns=-1)": lambda w: w[0].launch_kernel(w[1], duration_ns=-1),
    "launch_kernel(accesses=[(1, 'a', True)])":
        lambda w: w[0].launch_kernel(w[1], accesses=[(1, "a", True)]),
    "launch_kernel(accesses=[5])": lambda w: w[0].launch_kernel(w[1], accesses=[5]),
    "memcpy_async(nbytes=-1)": lambda w: w[0].memcpy_async(0, 0, -1, w[1]),
    "memset_async(value='x')": lambda w: w[0].memset_async(0, "x", 1, w[1]),
    "host_advance(-5)": lambda w: w[0].host_advance(-5),
    "device_synchronize(device='x')": lambda w: w[0].device_synchronize(device="x"),
    "create_pool(kind=3)": lambda w: w[0].create_pool(kind=3),
    "create_pool(max_size=-1)": lambda w: w[0].create_pool(max_size=-1),
    "create_pool(release_threshold=-1)": lambda w: w[0].create_pool(release_threshold=-1),
    "set_current_pool(5)": lambda w: w[0].set_current_pool(5),
    "malloc(-1)": lambda w: w[0].malloc(-1),
    "free('x')": lambda w: w[0].free("x"),
    "mem_get_info(device=None)": lambda w: w[0].mem_get_info(device=None),
    "pointer_attributes(None)": lambda w: w[0].pointer_attributes(None),
    "set_oom_handler(5)": lambda w: w[0].set_oom_handler(5),
    "start_recording(5)": lambda w: w[0].start_recording(5),
    "record_use('x')": lambda w: w[0].record_use("x", w[1]),
    "Event.record('s')": lambda w: w[2].record("s"),
    "Stream.wait_event(5)": lambda w: w[1].wait_event(5),
    "Event.elapsed_ms(5)": lambda w: w[2].elapsed_ms(5),
    "Pool.trim_to(-1)": lambda w: w[3].trim_to(-1),
    "Pool.release_threshold = -1": lambda w: setattr(w[3], "release_threshold", -1),
    "Pool.release_threshold = 'min'": lambda w: setattr(w[3], "release_threshold", "min"),
    "Pool.front_cache = 'x'": lambda w: setattr(w[3], "front_cache", "x"),
    "replay(5)": lambda w: sp.replay(5),
    "replay(capacity=-1)": lambda w: sp.replay(INFERENCE_TRACE, capacity=-1),
    "replay(capacity='big')": lambda w: sp.replay(INFERENCE_TRACE, capacity="big"),
    "replay(rmm_max=-256)": lambda w: sp.replay(INFERENCE_TRACE, rmm_max=-256),
    "replay(pool=5)": lambda w: sp.replay(INFERENCE_TRACE, pool=5),
}


@pytest.mark.parametrize("call", list(BAD_CALLS), ids=str)
def test_a_bad_argument_is_an_error_value(world, call):
    rt = world[0]
    before = rt.default_pool().stats()
    with pytest.raises(sp.Error) as err:
        BAD_CALLS[call](world)
    assert not isinstance(err.value, (TypeError, RuntimeError)), type(err.value).__mro__
    assert err.value.code.startswith("sp"), err.value.code
    # Nothing the runtime knows mentions C++.
    assert "C++" not in err.value.message, err.value.message
    assert rt.default_pool().stats() == before


@pytest.mark.parametrize("name,member", [(n, m) for n, m in public_members()
                                         if n.startswith("Runtime.") and n != "Runtime.__init__"
                                         and not isinstance(m, property)],
                         ids=lambda x: str(x))
def test_any_runtime_method_refuses_a_foreign_object_as_an_error(world, name, member):
    rt = world[0]
    fn = getattr(rt, name.split(".", 1)[1])
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
              and p.default is p.empty]
    if not params:
        pytest.skip("takes no positional argument")
    with pytest.raises(sp.Error):
        fn(*[object()] * len(params))


def test_a_closed_runtime_refuses_with_an_error():
    rt = sp.Runtime()
    rt.close()
    with pytest.raises(sp.Error) as err:
        rt.create_stream()
    assert err.value.code == "spErrorInvalidResourceHandle"


def test_the_argument_failure_keeps_pybinds_as_its_cause(world):
    rt, s = world[0], world[1]
    with pytest.raises(sp.Error) as err:
        rt.malloc_async("x", s)
    assert isinstance(err.value.__cause__, TypeError)
    assert "Runtime.malloc_async" in err.value.message
