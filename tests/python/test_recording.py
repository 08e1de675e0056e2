"""Recording from Python: a runtime's history written by start_recording,
replayed by sp.replay at its recorded settings with every decision compared,
and the policy lab's report of a recorded workload as Python objects."""

import os

import pytest

import streampool as sp
from conftest import TRACES


def record_two_streams(path):
    """A producer frees on its own stream; a consumer waits for its event and
    reuses the bytes (rule 2). Returns the rules the live run saw."""
    rules = []
    with sp.Runtime(capacity=256 << 20) as rt:
        rt.start_recording(path)
        producer, consumer = rt.create_stream(), rt.create_stream(non_blocking=True)
        done = rt.create_event()
        for _ in range(20):
            a = rt.malloc_async(4 << 20, producer)
            rules.append(a.rule)
            rt.launch_kernel(producer, duration_ns=5000, accesses=[a])
            rt.free_async(a, producer)
            done.record(producer)
            consumer.wait_event(done)
            b = rt.malloc_async(4 << 20, consumer)
            rules.append(b.rule)
            rt.launch_kernel(consumer, duration_ns=3000, accesses=[b])
            rt.free_async(b, consumer)
        rt.device_synchronize()
        rt.stop_recording()
    return rules


def test_a_recording_replays_at_its_settings_with_every_decision(tmp_path):
    path = tmp_path / "two_streams.trace"
    rules = record_two_streams(path)
    assert "event_dependency" in rules
    (trace,) = sp.replay(path)["traces"]
    (run,) = trace["runs"]
    assert run["recorded_decisions"] == {"compared": len(rules), "diverged": 0,
                                         "first_divergence": None, "not_reproducible": None}
    assert run["reuse_counts"]["event_dependency"] == rules.count("event_dependency")
    assert run["failed_allocs"] == 0


def test_settings_given_replace_the_recorded_ones(tmp_path):
    path = tmp_path / "two_streams.trace"
    record_two_streams(path)
    (trace,) = sp.replay(path, reuse="none")["traces"]
    (run,) = trace["runs"]
    assert run["reuse_counts"]["event_dependency"] == 0
    # Other settings than the recorded ones take other decisions.
    assert run["recorded_decisions"]["diverged"] > 0


def test_recording_errors(tmp_path):
    with sp.Runtime() as rt:
        with pytest.raises(sp.Error):
            rt.stop_recording()  # not recording
        rt.start_recording(tmp_path / "a.trace")
        with pytest.raises(sp.Error):
            rt.start_recording(tmp_path / "b.trace")  # already recording
        rt.stop_recording()
        with pytest.raises(sp.Error):
            rt.start_recording(tmp_path / "no-such-dir" / "c.trace")
    assert os.path.getsize(tmp_path / "a.trace") > 0


def test_policy_report_of_a_recorded_workload():
    trace = os.path.join(TRACES, "lab", "offload.trace")
    doc = sp.replay(trace, policies="all", threshold=[0, "max"], report="policy")
    assert doc["schema"] == "streampool-policy-report/1"
    (t,) = doc["traces"]
    assert len(t["rows"]) == 16
    best = t["best"]
    assert best is not None
    fitting = [r["min_capacity_bytes"] for r in t["rows"] if r["fits"]]
    assert best["min_capacity_bytes"] == min(fitting)
    assert best["min_capacity_bytes"] >= t["peak_live_bytes"]
    assert t["vs_cuda_defaults"]["saved_bytes"] >= 0
