"""replay() over a concurrent.futures.Executor: a sweep cut into tasks that
any executor can run (a process pool, a Dask distributed client), put back
together in the order a serial replay() gives.

A runs report is cut into one task per trace and sweep row, since every row
is a replay of its own. A policy or torch-validation report is cut per trace:
a policy row's capacity search is independent, but the trace's summary (its
best row and what it saves) is taken over all of its rows, so a trace's
searches stay in one task, which spreads them over its worker's cores.

Every task reads its trace by path, so each worker must see the trace files
at the same paths as the caller. What a task sends back is plain Python data
(dicts, lists, numbers, strings) and what it raises is an exception that
pickles (Error keeps its code and message), so both cross processes.
"""

from streampool import _core
from streampool._errors import Error


def _replay_task(files, kwargs):
    """One task: _core.replay on some traces (and rows). Module level, so
    that an executor pickles it by name."""
    return _core.replay(files, **kwargs)


def _submit(executor, files, kwargs):
    # Everything in positional arguments: Dask's Client.submit reserves
    # keyword names of its own (key, pure, workers, ...).
    try:
        return executor.submit(_replay_task, files, kwargs)
    except AttributeError as e:
        raise Error("spErrorInvalidValue",
                    f"executor {executor!r} has no submit(fn, *args)") from e


def _gather(futures):
    """Every task's result, in order. Where tasks failed, what a serial
    replay would have raised: a trace it cannot open first (a serial replay
    reads every trace before it replays any), else the first failure."""
    results, errors = [], []
    for f in futures:
        try:
            results.append(f.result())
        except Exception as e:  # noqa: BLE001 -- re-raised below, in order
            errors.append(e)
            results.append(None)
    if errors:
        for e in errors:
            if isinstance(e, OSError):
                raise e
        raise errors[0]
    return results


def replay(executor, files, kwargs):
    """_core.replay(files, **kwargs), its work spread over executor."""
    if kwargs.get("timeline_path"):
        raise Error("spErrorInvalidValue",
                    "timeline is written by a serial replay only (executor=None)")
    report = kwargs.get("report", "runs")
    if report != "runs":
        docs = _gather([_submit(executor, [f], kwargs) for f in files])
        merged = dict(docs[0])
        merged["traces"] = [t for d in docs for t in d["traces"]]
        return merged
    size_args = {k: kwargs[k] for k in (
        "reuse", "all_policies", "thresholds", "growths", "pool", "backing", "capacity", "check",
        "recorded", "allocators", "torch_conf", "rmm_initial", "rmm_max")}
    rows = _core._sweep_size(**size_args)
    if rows == 0:
        # Nothing to replay, but each trace is still read and described.
        docs = _gather([_submit(executor, [f], kwargs) for f in files])
        return {"traces": [d["traces"][0] for d in docs]}
    futures = [_submit(executor, [f], dict(kwargs, rows=[r])) for f in files for r in range(rows)]
    docs = _gather(futures)
    traces = []
    for i in range(len(files)):
        mine = docs[i * rows:(i + 1) * rows]
        trace = dict(mine[0]["traces"][0])
        trace["runs"] = [d["traces"][0]["runs"][0] for d in mine]
        traces.append(trace)
    return {"traces": traces}
