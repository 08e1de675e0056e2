"""How a test suite pins every decision a pool makes on a trace (pytest).

decisions/handoff.trace is a small loader/compute program; decisions/
handoff.decisions is what the pool decided for each of its allocations
(``streampool-replay --reuse=event --save-decisions=handoff.decisions
handoff.trace``, or streampool.save_decisions). The test below replays the
trace and fails, naming the op, both decisions, the rule behind each and the
blocks around them, the first time a change decides one of them otherwise.
After a change meant to move decisions, STREAMPOOL_UPDATE_DECISIONS=1 rewrites
the file; review its diff like code.

Run: PYTHONPATH=<build>/python python3 -m pytest examples/decisions_test.py
"""

from streampool.testing import decisions_test

test_handoff = decisions_test("decisions/handoff.trace", "decisions/handoff.decisions",
                              reuse="event")
