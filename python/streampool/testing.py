"""Tests that pin what a pool decides: a trace and its decisions file (the
replay tool's ``--save-decisions``, or streampool.save_decisions) become a
test that fails, with the op, both decisions, the rule behind each and the
blocks around them, the first time a change decides one allocation
otherwise.

In a pytest file, three lines::

    from streampool.testing import decisions_test

    test_server = decisions_test("server.trace", "server.decisions")

or, inside a test of one's own, ``assert_decisions(trace, decisions_file)``.
Relative paths given to decisions_test are the calling file's directory's.
With STREAMPOOL_UPDATE_DECISIONS=1 in the environment, either writes the
file from the replay instead of checking it: run once so after a change
that means to move decisions, and review the file's diff.
"""

import inspect
import os

import streampool

#: The environment variable that makes the helpers write files, not check them.
UPDATE_VARIABLE = "STREAMPOOL_UPDATE_DECISIONS"


def assert_decisions(trace, decisions_file, **setting):
    """Raises AssertionError with check_decisions()' report unless replaying
    trace under the setting (decisions()' arguments) decides every
    allocation as decisions_file says. Returns the DecisionCheck."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    if os.environ.get(UPDATE_VARIABLE) == "1":
        streampool.save_decisions(trace, decisions_file, **setting)
    check = streampool.check_decisions(trace, decisions_file, **setting)
    if not check.ok:
        raise AssertionError(check.message)
    return check


def decisions_test(trace, decisions_file, **setting):
    """A test function for pytest to collect (assign it to a ``test_*``
    name): assert_decisions(trace, decisions_file, **setting), with relative
    paths taken from the directory of the file that calls decisions_test."""
    base = os.path.dirname(os.path.abspath(inspect.stack()[1].filename))
    trace_path = os.path.join(base, os.fspath(trace))
    file_path = os.path.join(base, os.fspath(decisions_file))

    def test():
        __tracebackhide__ = True
        assert_decisions(trace_path, file_path, **setting)

    test.__name__ = "test_decisions_" + os.path.basename(file_path).replace(".", "_")
    test.__doc__ = f"{trace_path} decides as {file_path} says."
    return test
