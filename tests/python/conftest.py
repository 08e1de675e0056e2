"""Shared fixtures of the Python tests (run by CTest, see python/CMakeLists.txt).

CTest puts the build tree's package on PYTHONPATH and names the command-line
tools in STREAMPOOL_REPLAY and STREAMPOOL_DEMO; run by hand, point those at a
build (PYTHONPATH=build/release/python python3 -m pytest tests/python).
"""

import os

import pytest

import streampool as sp

MiB = 1 << 20
# A request that fills one 2 MiB chunk (granule) of a device pool exactly, so
# that no remainder of a growth can serve another stream by rule 1.
CHUNK = 2 * MiB

TRACES = os.environ.get(
    "STREAMPOOL_TRACES_DIR",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces"))
INFERENCE_TRACE = os.path.join(TRACES, "torch-medium-512-inference.trace")


def tool(name):
    """The command-line tool CTest names in the environment, or a skip."""
    path = os.environ.get(name)
    if not path:
        pytest.skip(f"{name} not set (CTest sets it)")
    return path


@pytest.fixture
def rt():
    """A simulator runtime with one 64 MiB device."""
    with sp.Runtime(devices=1, capacity=64 * MiB) as runtime:
        yield runtime


def rule_counts(pool):
    """How many allocations each rule has served, as the pool counts them."""
    s = pool.stats()
    return {
        "same_stream": s["reuse_same_stream"],
        "event_dependency": s["reuse_event_dependency"],
        "opportunistic": s["reuse_opportunistic"],
        "after_sync": s["reuse_after_sync"],
        "internal_dependency": s["reuse_internal_dependency"],
        "fresh": s["fresh_allocs"],
    }
