"""Decisions as data from Python: streampool.decisions() returns Decision
objects, save_decisions() and check_decisions() round-trip through the replay
tool's file, a flipped setting is reported at the op where the decisions
part, diff_decisions() counts differences by rule and bytes, and the
streampool.testing helpers turn a trace and its file into a test.
"""

import os

import pytest

import streampool as sp
from streampool import testing

# A loader stream hands a batch to compute through an event; compute frees it
# and the loader, after an event from compute, asks for the next one: rule 2
# can serve it with compute's block, no reuse cannot.
HANDOFF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "decisions", "handoff.trace")


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "handoff.trace"
    with open(HANDOFF, encoding="utf-8") as f:
        path.write_text(f.read())
    return path


def first_difference(a, b):
    return next((x.op for x, y in zip(a, b) if x != y), None)


def test_decisions_are_objects(trace):
    ds = sp.decisions(trace)
    assert [d.op for d in ds] == [1, 9, 15]
    assert [(d.line, d.stream, d.size) for d in ds] == [(6, 1, 4194304), (14, 1, 4194304),
                                                        (20, 2, 1048576)]
    first = ds[0]
    assert isinstance(first, sp.Decision)
    assert (first.rule, first.pool, first.chunk, first.offset) == ("fresh", None, 1, 0)
    assert first.waits == () and not first.failed and first.address is None


def test_waits_and_failures(tmp_path):
    # Stream 2 needs the whole device, which stream 1 freed behind a kernel:
    # rule 5 serves it after a wait on that free; without rule 5 it fails.
    path = tmp_path / "wait.trace"
    path.write_text("alloc 1 2097152 1\nkernel 1 5000000\nfree 1 1\nalloc 2 2097152 2\n"
                    "free 2 2\n")
    served = sp.decisions(path, capacity=2 << 20)[1]
    assert served.rule == "internal_dependency"
    assert len(served.waits) == 1 and served.waits[0][0] == 1
    failed = sp.decisions(path, capacity=2 << 20, reuse={"event", "opportunistic"})[1]
    assert failed.failed and failed.rule == "failed" and failed.chunk is None


def test_save_then_check_agrees(trace, tmp_path):
    out = tmp_path / "d"
    assert sp.save_decisions(trace, out) == 3
    assert out.read_text().startswith("streampool-decisions/1\ntrace handoff.trace\n")
    check = sp.check_decisions(trace, out)
    assert check.ok and check and check.agreed == 3 and check.op is None


def test_a_flipped_setting_is_reported_at_its_op(trace, tmp_path):
    out = tmp_path / "d"
    sp.save_decisions(trace, out, reuse="all")
    op = first_difference(sp.decisions(trace, reuse="all"), sp.decisions(trace, reuse="none"))
    assert op is not None, "all and no reuse decide alike: the trace tests nothing"
    check = sp.check_decisions(trace, out, reuse="none")
    assert not check.ok
    assert check.op == op
    assert check.saved_decision.op == check.replayed_decision.op == op
    assert check.saved_decision != check.replayed_decision
    assert f"the decision at op {op} differs" in check.message
    assert "blocks around the replayed place" in check.message


def test_diff_counts_by_rule_and_bytes(trace):
    diff = sp.diff_decisions(trace, {"reuse": "all"}, {"reuse": "none"})
    a, b = sp.decisions(trace, reuse="all"), sp.decisions(trace, reuse="none")
    differing = [x for x, y in zip(a, b) if x != y]
    assert diff.differing == len(differing) > 0
    assert diff.differing_bytes == sum(x.size for x in differing)
    assert sum(r["decisions"] for r in diff.by_rule) == diff.differing
    assert diff.op == differing[0].op and diff.a == differing[0]
    assert sp.diff_decisions(trace).differing == 0


def test_bad_settings_and_files(trace, tmp_path):
    with pytest.raises(sp.Error, match="unknown setting colour"):
        sp.decisions(trace, colour="blue")
    with pytest.raises(sp.Error):
        sp.decisions(trace, allocator="all")
    with pytest.raises(FileNotFoundError):
        sp.check_decisions(trace, tmp_path / "missing")
    bad = tmp_path / "bad"
    bad.write_text("streampool-decisions/1\n1 1 9 4096 fresh own 1+0 -\n")
    with pytest.raises(sp.Error, match="stream '9' is not a stream"):
        sp.check_decisions(trace, bad)


def test_the_testing_helpers(trace, tmp_path, monkeypatch):
    out = tmp_path / "d"
    monkeypatch.setenv(testing.UPDATE_VARIABLE, "1")
    testing.assert_decisions(trace, out, reuse="all")  # writes the file
    monkeypatch.delenv(testing.UPDATE_VARIABLE)
    assert testing.assert_decisions(trace, out, reuse="all").ok
    op = first_difference(sp.decisions(trace, reuse="all"), sp.decisions(trace, reuse="none"))
    with pytest.raises(AssertionError, match=f"the decision at op {op} differs"):
        testing.assert_decisions(trace, out, reuse="none")
    # decisions_test resolves relative paths against the calling file's directory.
    rel = os.path.relpath(trace, os.path.dirname(os.path.abspath(__file__)))
    test = testing.decisions_test(rel, os.path.relpath(out, os.path.dirname(__file__)),
                                  reuse="all")
    assert test.__name__.startswith("test_")
    test()
