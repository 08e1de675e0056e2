"""Decisions as data: every allocation's decision in a replay of a trace, as
objects, saved to a file (the replay tool's ``--save-decisions`` format,
``streampool-decisions/1``), checked against such a file, or compared between
two settings. streampool.testing turns a trace and its file into a test."""

from typing import NamedTuple, Optional, Tuple

from streampool import _core


class Decision(NamedTuple):
    """One allocation's decision, as a line of a decisions file says it.

    op: the alloc op's index in the trace, from 1; line: its line in the
    trace file; stream: the allocating stream, as the trace numbers it;
    size: the bytes asked for; rule: the reuse rule that served it
    ("fresh", "same_stream", "event_dependency", "opportunistic",
    "after_sync", "internal_dependency"), "failed" when it ran out of
    memory, or "model" for an allocator model's; pool: the trace's pool
    number (None: the replay's own pool, or a model); chunk and offset:
    where the block lies in its pool (the chunk's creation number, from 1,
    and the offset in it; None when there is no block); waits: the
    (stream, position) of each free the decision made its stream wait for;
    failed: out of memory; address: a model's placement in its own address
    space (None otherwise)."""

    op: int
    line: int
    stream: int
    size: int
    rule: str
    pool: Optional[int]
    chunk: Optional[int]
    offset: Optional[int]
    waits: Tuple[Tuple[int, int], ...]
    failed: bool
    address: Optional[int]


def _decision(t):
    return Decision(*t) if t is not None else None


class DecisionCheck:
    """What check_decisions() found.

    ok: every decision agreed. saved: decisions in the file; agreed:
    decisions equal before the first difference (all of them when ok).
    op, line: where the first difference is (None when ok); saved_decision,
    replayed_decision: the two Decisions there (either None where that side
    has no allocation at that op). message: the replay tool's report: the
    op, both decisions, the rule behind each and the blocks around them."""

    def __init__(self, d):
        diff = d["difference"]
        self.ok = diff is None
        self.saved = d["saved"]
        self.agreed = d["agreed"]
        self.saved_setting = d["saved_setting"]
        self.replayed_setting = d["replayed_setting"]
        self.op = diff["op"] if diff else None
        self.line = diff["line"] if diff else None
        self.saved_decision = _decision(diff["a"]) if diff else None
        self.replayed_decision = _decision(diff["b"]) if diff else None
        self.message = d["message"]

    def __bool__(self):
        return self.ok

    def __repr__(self):
        if self.ok:
            return f"<DecisionCheck ok: {self.agreed} decisions agree>"
        return f"<DecisionCheck differs at op {self.op} after {self.agreed} agreed>"


class DecisionDiff:
    """What diff_decisions() found between settings a and b.

    compared: ops either side decided; differing, differing_bytes: how many
    decisions differ and the bytes they asked for; same_rule_elsewhere (the
    same rule, another place or other waits) + other_rule == differing;
    failed_a_only, failed_b_only: out of memory under one side only.
    by_rule: one dict per (a rule, b rule) pair that differs, most bytes
    first: {"a_rule", "b_rule", "decisions", "bytes"}. op, line, a, b: the
    first difference and its two Decisions (None when there is none).
    message: the replay tool's --diff report."""

    def __init__(self, d):
        first = d["first"]
        for key in ("a_setting", "b_setting", "compared", "differing", "differing_bytes",
                    "same_rule_elsewhere", "other_rule", "failed_a_only", "failed_b_only",
                    "by_rule", "message"):
            setattr(self, key, d[key])
        self.op = first["op"] if first else None
        self.line = first["line"] if first else None
        self.a = _decision(first["a"]) if first else None
        self.b = _decision(first["b"]) if first else None

    def __repr__(self):
        return f"<DecisionDiff {self.differing} of {self.compared} differ>"


_NOT_GIVEN = object()
# decisions()' setting arguments and their defaults: replay()'s, one of each.
_DEFAULTS = dict(reuse=_NOT_GIVEN, threshold=_NOT_GIVEN, growth=_NOT_GIVEN, pool="device",
                 backing="address_only", capacity=80 << 30, check=True, allocator="streampool",
                 torch_conf="", rmm_initial=0, rmm_max=0)

_SETTING_DOC = """
    The setting arguments are replay()'s, one value of each: reuse ("all",
    "none" or a set of "event", "opportunistic", "internal"), threshold
    (bytes or "max"), growth, pool, backing, capacity, check, allocator (one
    of "streampool", "pytorch", "rmm-pool", "cuda"), torch_conf,
    rmm_initial, rmm_max. With none of reuse, threshold and growth given, a
    recording replays at its own settings. A trace or file that cannot be
    read raises what open() raises; a malformed one raises Error naming its
    file and line.
    """


def _setting(setting):
    # Imported here: streampool imports this module while it is being made.
    from streampool import Error, _reuse_list, _threshold
    unknown = sorted(set(setting) - set(_DEFAULTS))
    if unknown:
        raise Error("spErrorInvalidValue",
                    f"unknown setting {', '.join(unknown)} (one of {', '.join(_DEFAULTS)})")
    s = {**_DEFAULTS, **setting}
    recorded = all(s[k] is _NOT_GIVEN for k in ("reuse", "threshold", "growth"))

    def pick(key, default):
        return default if s[key] is _NOT_GIVEN else s[key]

    return _core._decision_setting(
        reuse=_reuse_list(pick("reuse", "all")), threshold=_threshold(pick("threshold", 0)),
        growth=str(pick("growth", "default")), pool=s["pool"], backing=s["backing"],
        capacity=s["capacity"], check=s["check"], recorded=recorded,
        allocator=str(s["allocator"]), torch_conf=str(s["torch_conf"]),
        rmm_initial=int(s["rmm_initial"]), rmm_max=int(s["rmm_max"]))


def decisions(trace, **setting):
    """Replays the trace and returns every allocation's Decision, in trace
    order: ``sp.decisions("t.trace", reuse="none")[0].rule``."""
    import os
    return [Decision(*t) for t in _core._decisions(os.fspath(trace), _setting(setting))]


def save_decisions(trace, path, **setting):
    """Replays the trace and writes every allocation's decision to path
    (``streampool-replay --save-decisions``); returns how many it wrote."""
    import os
    return _core._save_decisions(os.fspath(trace), os.fspath(path), _setting(setting))


def check_decisions(trace, path, **setting):
    """Replays the trace and compares each decision with path's (a file
    save_decisions() or ``--save-decisions`` wrote), stopping at the first
    that differs (``streampool-replay --check-decisions``); returns a
    DecisionCheck, true when all agree."""
    import os
    return DecisionCheck(
        _core._check_decisions(os.fspath(trace), os.fspath(path), _setting(setting)))


def diff_decisions(trace, a=None, b=None):
    """Compares the decisions of two settings (or allocators) on one trace,
    every allocation (``streampool-replay --diff``): a and b are dicts of
    decisions()' setting arguments (None: the defaults), e.g.
    ``sp.diff_decisions(t, {"reuse": "all"}, {"reuse": "none"})``. Returns a
    DecisionDiff."""
    import os
    return DecisionDiff(
        _core._diff_decisions(os.fspath(trace), _setting(a or {}), _setting(b or {})))


for _f in (decisions, save_decisions, check_decisions, diff_decisions):
    _f.__doc__ += _SETTING_DOC
