"""sp.replay(..., executor=E): a sweep spread over a concurrent.futures
executor (a process pool, a local Dask cluster) gives the serial document
exactly, but for the host cost, which is the wall-clock time of each call and
differs on every run, serial or not."""

import concurrent.futures
import glob
import os
import pickle
import time

import pytest

import streampool as sp
from conftest import INFERENCE_TRACE, TRACES

# The lab suite and the bundled PyTorch traces.
SUITE = (sorted(glob.glob(os.path.join(TRACES, "lab", "*.trace")))
         + sorted(glob.glob(os.path.join(TRACES, "*.trace"))))


def without_host_cost(doc):
    for trace in doc["traces"]:
        for run in trace.get("runs", []):
            cost = run.pop("host_cost")
            run["calls"] = (cost["alloc"]["calls"], cost["free"]["calls"])
    return doc


def test_the_suite_is_there():
    assert len(SUITE) >= 10, SUITE


def test_a_process_pool_gives_the_serial_sweep():
    serial = sp.replay(SUITE, policies="all")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        spread = sp.replay(SUITE, policies="all", executor=pool)
    assert without_host_cost(spread) == without_host_cost(serial)
    assert sum(len(t["runs"]) for t in spread["traces"]) == 8 * len(SUITE)


def test_rows_keep_the_labels_of_the_whole_sweep():
    # With two growths swept every row names its growth; a row replayed on
    # its own must still say it.
    args = dict(threshold=[0, "max"], growth=["chunked", "expandable"],
                allocator=["streampool", "pytorch", "rmm-pool"])
    serial = sp.replay(INFERENCE_TRACE, **args)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        spread = sp.replay(INFERENCE_TRACE, executor=pool, **args)
    assert without_host_cost(spread) == without_host_cost(serial)
    assert len(spread["traces"][0]["runs"]) == 4 + 2


def test_a_recording_replays_at_its_settings_on_an_executor(tmp_path):
    path = tmp_path / "rec.trace"
    with sp.Runtime(capacity=64 << 20) as rt:
        rt.start_recording(path)
        s = rt.create_stream()
        a = rt.malloc_async(1 << 20, s)
        rt.free_async(a, s)
        rt.malloc_async(1 << 20, s)
        rt.stop_recording()
    serial = sp.replay(path)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        spread = sp.replay(path, executor=pool)
    assert without_host_cost(spread) == without_host_cost(serial)
    assert spread["traces"][0]["runs"][0]["recorded_decisions"]["diverged"] == 0
    assert spread["traces"][0]["runs"][0]["recorded_decisions"]["compared"] == 2


def test_results_and_errors_pickle():
    doc = sp.replay(INFERENCE_TRACE, policies="all")
    assert pickle.loads(pickle.dumps(doc)) == doc
    for err in (sp.Error("spErrorInvalidValue", "bad"),
                sp.OutOfMemoryError("spErrorMemoryAllocation", "full")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert (back.code, back.message) == (err.code, err.message)


def test_failures_on_workers_are_the_serial_ones(tmp_path):
    bad = tmp_path / "bad.trace"
    bad.write_text("alloc 1 100 0\nfree 2 0\n")
    missing = tmp_path / "missing.trace"
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        with pytest.raises(sp.Error) as spread:
            sp.replay([INFERENCE_TRACE, bad], executor=pool)
        with pytest.raises(sp.Error) as serial:
            sp.replay([INFERENCE_TRACE, bad])
        assert spread.value.message == serial.value.message
        # A trace that cannot be opened comes first, as a serial replay reads
        # every trace before it replays any.
        with pytest.raises(FileNotFoundError) as err:
            sp.replay([bad, missing], executor=pool)
        assert err.value.filename == str(missing)
        with pytest.raises(sp.Error, match="timeline"):
            sp.replay(INFERENCE_TRACE, timeline=tmp_path / "t.json", executor=pool)
    with pytest.raises(sp.Error, match="submit"):
        sp.replay(INFERENCE_TRACE, executor=object())


def test_a_local_dask_cluster_gives_the_serial_sweep_and_policy_report():
    distributed = pytest.importorskip(
        "distributed", reason="Dask distributed is not installed (Debian: python3-distributed)")
    started = time.perf_counter()
    serial_runs = sp.replay(SUITE, policies="all")
    serial_runs_s = time.perf_counter() - started
    started = time.perf_counter()
    serial_policy = sp.replay(SUITE, policies="all", report="policy")
    serial_policy_s = time.perf_counter() - started
    # Two worker processes on the loopback interface, no dashboard: nothing
    # listens beyond this machine.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        started = time.perf_counter()
        spread_runs = sp.replay(SUITE, policies="all", executor=client)
        spread_runs_s = time.perf_counter() - started
        started = time.perf_counter()
        spread_policy = sp.replay(SUITE, policies="all", report="policy", executor=client)
        spread_policy_s = time.perf_counter() - started
    assert without_host_cost(spread_runs) == without_host_cost(serial_runs)
    assert spread_policy == serial_policy
    print(f"8 policy sets x {len(SUITE)} traces: runs {serial_runs_s:.2f} s serial, "
          f"{spread_runs_s:.2f} s on 2 Dask workers; policy report {serial_policy_s:.2f} s "
          f"serial, {spread_policy_s:.2f} s on 2 Dask workers")
