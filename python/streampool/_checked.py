"""Bad arguments as streampool.Error, and signatures help() can show.

A value the binding cannot convert (a negative size, a str where a stream
goes) fails inside pybind11 before any streampool code runs, as a TypeError
("incompatible function arguments"), or as a RuntimeError ("Unable to cast")
when the binding converts it itself. Such a failure is the caller's bad
value, which the C API answers with spErrorInvalidValue; check() makes every
public function and property of the compiled classes answer so, with the
original exception as the cause. Errors the library raises pass unchanged.

pybind11 writes a function's signature as the first line of its docstring,
which inspect cannot read; check() also gives each wrapper a
``__signature__`` parsed from that line, with the classes named as this
package exports them (streampool.Stream, not streampool._core.Stream).
"""

import functools
import inspect
import re

from streampool._errors import Error

# What a conversion of an argument raises.
_ARGUMENT_ERRORS = (TypeError, ValueError, OverflowError, RuntimeError)


def _signature(doc):
    """The signature on the first line of a pybind11 docstring, or None."""
    first = (doc or "").lstrip().split("\n", 1)[0]
    m = re.match(r"^\w*(\(.*\))(?: -> (.*))?$", first)
    if m is None:
        return None
    params, ret = m.group(1), m.group(2)
    source = "from __future__ import annotations\ndef f" + params
    source += (" -> " + ret if ret else "") + ": pass\n"
    scope = {}
    try:
        exec(source, scope)  # noqa: S102 -- text of our own extension
        return inspect.signature(scope["f"])
    except (SyntaxError, NameError, ValueError):
        return None


def public_name(text):
    """Type names as the package exports them."""
    return text.replace("streampool._core.", "streampool.")


def _message(e):
    text = public_name(str(e))
    # pybind11's words for a value its own conversion refused, which name C++.
    if text.startswith("Unable to cast"):
        return "an argument is not of the type or range it takes"
    return text


def _wrap(fn, where):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _ARGUMENT_ERRORS as e:
            raise Error("spErrorInvalidValue", f"{where}: {_message(e)}") from e

    sig = _signature(getattr(fn, "__doc__", None))
    if sig is not None:
        call.__signature__ = sig.replace(
            parameters=[p.replace(annotation=public_name(p.annotation))
                        if isinstance(p.annotation, str) else p
                        for p in sig.parameters.values()],
            return_annotation=(public_name(sig.return_annotation)
                               if isinstance(sig.return_annotation, str)
                               else sig.return_annotation))
        # functools.wraps points inspect at the builtin, whose signature it
        # cannot read; the parsed one stands instead.
        del call.__wrapped__
    if call.__doc__:
        call.__doc__ = public_name(call.__doc__)
    return call


def function(fn, where=None):
    """fn with argument failures as Error."""
    return _wrap(fn, where or fn.__name__)


def check(cls):
    """Every public method, property and the constructor of a compiled class
    raise Error for a bad argument."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        where = f"{cls.__name__}.{name}"
        if isinstance(member, property):
            setattr(cls, name, property(
                _wrap(member.fget, where) if member.fget else None,
                _wrap(member.fset, where) if member.fset else None,
                member.fdel, member.__doc__))
        elif callable(member) and not isinstance(member, type):
            setattr(cls, name, _wrap(getattr(cls, name), where))
    return cls
