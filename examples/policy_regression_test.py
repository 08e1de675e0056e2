"""How a user pins an allocator decision in their own test suite (pytest).

Our (imaginary) pipeline double-buffers nothing: a loader stream fills a
64 MiB batch, hands it to the compute stream through an event, compute frees
it in stream order and hands the loader back through another event. We rely on
the pool reusing the freed batch through that handshake (the CUDA guide's
"follow event dependencies", rule 2), so the pipeline holds one batch of memory
however many steps it runs. If a policy change broke that, memory would grow
with every step; these tests fail first.

Run: PYTHONPATH=<prefix or build>/... python3 -m pytest examples/policy_regression_test.py
"""

import os

import streampool as sp

MiB = 1 << 20
BATCH = 64 * MiB
STEPS = 4
TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces",
                     "torch-medium-512-inference.trace")


def run_pipeline(**pool_settings):
    """The pipeline's stream program; returns each batch's rule and the pool's
    peak reserved bytes."""
    with sp.Runtime(capacity=1 << 30) as rt:
        pool = rt.create_pool(**pool_settings)
        loader, compute = rt.create_stream(), rt.create_stream()
        rules = []
        for _ in range(STEPS):
            batch = rt.malloc_async(BATCH, loader, pool=pool)
            rules.append(batch.rule)
            rt.launch_kernel(loader, duration_ns=200_000, accesses=[batch])  # load
            ready = rt.create_event()
            ready.record(loader)
            compute.wait_event(ready)
            rt.launch_kernel(compute, duration_ns=1_000_000, accesses=[batch])  # compute
            rt.free_async(batch, compute)
            done = rt.create_event()
            done.record(compute)
            loader.wait_event(done)
        rt.device_synchronize()
        pool.check_invariants()
        return rules, pool.reserved_high


def test_each_batch_reuses_the_last_through_the_event_handshake():
    rules, peak = run_pipeline()
    assert rules == ["fresh"] + ["event_dependency"] * (STEPS - 1)
    assert peak == BATCH


def test_without_the_rule_a_wait_that_costs_nothing_still_saves_memory():
    # With rule 2 off the pool still sees that compute's free completes before
    # the loader gets to the allocation (the loader waits for compute anyway),
    # so it inserts that wait rather than grow: an internal dependency.
    rules, peak = run_pipeline(reuse_follow_event_dependencies=False)
    assert rules == ["fresh"] + ["internal_dependency"] * (STEPS - 1)
    assert peak == BATCH


def test_in_cudas_order_the_handshake_alone_is_what_saves_memory():
    # Opportunistic reuse cannot stand in for it: the host never waits, so no
    # free is ever observed complete before the next batch is allocated; and
    # in CUDA's order the pool grows before it would wait.
    rules, peak = run_pipeline(reuse_follow_event_dependencies=False, wait_before_growth=False)
    assert rules == ["fresh"] * STEPS
    assert peak == STEPS * BATCH


def test_our_inference_trace_fits_in_what_pytorch_reserved():
    (trace,) = sp.replay(TRACE)["traces"]
    (run,) = trace["runs"]
    assert run["failed_allocs"] == 0
    assert run["peak_reserved_bytes"] <= trace["torch"]["peak_reserved_bytes"]
