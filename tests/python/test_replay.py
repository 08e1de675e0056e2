"""sp.replay against the command-line tool: the same trace under the same
settings gives the same JSON document, but for the host cost (wall-clock
time of each call, different on every run)."""

import json
import os
import subprocess

import pytest

import streampool as sp
from conftest import INFERENCE_TRACE, tool


def without_host_cost(doc):
    for trace in doc["traces"]:
        for run in trace["runs"]:
            cost = run.pop("host_cost")
            # What is left of it is the same: the number of calls.
            run["calls"] = (cost["alloc"]["calls"], cost["free"]["calls"])
    return doc


def cli_json(*args):
    r = subprocess.run([tool("STREAMPOOL_REPLAY"), "--json", *args], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_replay_matches_the_command_line_tool():
    ours = sp.replay([INFERENCE_TRACE], reuse={"event", "opportunistic"}, threshold=[0, "max"])
    theirs = cli_json("--reuse=event,opportunistic", "--threshold=0,max", INFERENCE_TRACE)
    assert without_host_cost(ours) == without_host_cost(theirs)
    runs = ours["traces"][0]["runs"]
    assert [r["release_threshold"] for r in runs] == [0, "max"]
    assert all(r["reuse"] == {"event": True, "opportunistic": True, "internal": False}
               for r in runs)


def test_policy_and_growth_sweep_matches_the_command_line_tool():
    ours = sp.replay(INFERENCE_TRACE, policies="all", growth=["chunked", "expandable"],
                     backing="host", capacity=4 << 30)
    theirs = cli_json("--policies=all", "--growth=chunked,expandable", "--backing=host",
                      "--capacity=4GiB", INFERENCE_TRACE)
    assert without_host_cost(ours) == without_host_cost(theirs)
    assert len(ours["traces"][0]["runs"]) == 16


def test_replay_reports_pytorchs_figures_and_ours():
    (trace,) = sp.replay(INFERENCE_TRACE)["traces"]
    (run,) = trace["runs"]
    assert trace["torch"]["peak_reserved_bytes"] > 0
    assert run["failed_allocs"] == 0 and run["checker_reports"] == 0
    assert sum(run["reuse_counts"].values()) == run["alloc_count"] == trace["allocs"]
    assert run["peak_used_bytes"] <= run["peak_reserved_bytes"]


def test_bad_arguments_and_bad_traces_raise(tmp_path):
    with pytest.raises(sp.Error, match="reuse"):
        sp.replay(INFERENCE_TRACE, reuse={"eventual"})
    with pytest.raises(sp.Error, match="threshold"):
        sp.replay(INFERENCE_TRACE, threshold=-1)
    with pytest.raises(sp.Error, match="growth"):
        sp.replay(INFERENCE_TRACE, growth="sideways")
    bad = tmp_path / "bad.trace"
    bad.write_text("alloc 1 100 0\nfree 2 0\n")
    with pytest.raises(sp.Error) as err:
        sp.replay(bad)
    assert "bad.trace:2" in err.value.message


def test_unreadable_traces_raise_what_open_raises(tmp_path):
    missing = tmp_path / "missing.trace"
    with pytest.raises(FileNotFoundError) as err:
        sp.replay([INFERENCE_TRACE, missing])
    assert err.value.filename == str(missing)
    with pytest.raises(IsADirectoryError):
        sp.replay(tmp_path)


def test_a_binary_file_is_refused_without_echoing_its_bytes(tmp_path):
    binary = tmp_path / "a.out"
    binary.write_bytes(b"\x7fELF\x02\x01\x1b[2J" + bytes(range(256)) * 8)
    with pytest.raises(sp.Error) as err:
        sp.replay(binary)
    assert err.value.message.isprintable(), err.value.message
    assert "\x1b" not in err.value.message and len(err.value.message) < len(str(binary)) + 200


def test_reuse_rules_are_the_replay_tools():
    assert sp.REUSE_RULES == ("event", "opportunistic", "internal")
    (trace,) = sp.replay(INFERENCE_TRACE, reuse="none", pool="pinned", backing="address")["traces"]
    (run,) = trace["runs"]
    assert run["reuse"] == {"event": False, "opportunistic": False, "internal": False}
    assert (run["pool"], run["backing"]) == ("pinned_host", "address_only")


def test_allocators_side_by_side_match_the_command_line_tool():
    doc = sp.replay(INFERENCE_TRACE, allocator="all", check=False)
    runs = doc["traces"][0]["runs"]
    assert [r["allocator"] for r in runs] == ["streampool", "pytorch", "rmm-pool", "cuda"]
    cli = cli_json("--allocator=all", "--no-check", INFERENCE_TRACE)
    assert without_host_cost(doc) == without_host_cost(cli)
    by = {r["allocator"]: r for r in runs}
    # The pytorch model holds what PyTorch held on this trace, to the byte;
    # RMM's pool grows by doubling and holds more.
    torch = doc["traces"][0]["torch"]["peak_reserved_bytes"]
    assert by["pytorch"]["peak_reserved_bytes"] == torch
    assert by["rmm-pool"]["peak_reserved_bytes"] > torch
    assert by["rmm-pool"]["allocator_counts"]["segments_made"] > 0
    assert by["streampool"]["peak_reserved_bytes"] <= by["pytorch"]["peak_reserved_bytes"]


def test_allocator_options_and_their_errors():
    doc = sp.replay(INFERENCE_TRACE, allocator=["pytorch"], torch_conf="max_split_size_mb:64")
    assert doc["traces"][0]["runs"][0]["allocator"] == "pytorch max_split_size_mb:64"
    doc = sp.replay(INFERENCE_TRACE, allocator="rmm-pool", rmm_initial=4 << 30)
    assert doc["traces"][0]["runs"][0]["peak_reserved_bytes"] == 4 << 30
    with pytest.raises(sp.Error, match="unknown allocator"):
        sp.replay(INFERENCE_TRACE, allocator="tcmalloc")
    with pytest.raises(sp.Error, match="PYTORCH_CUDA_ALLOC_CONF"):
        sp.replay(INFERENCE_TRACE, allocator="pytorch", torch_conf="max_split_size_mb:1")
    with pytest.raises(sp.Error, match="multiples of 256"):
        sp.replay(INFERENCE_TRACE, allocator="rmm-pool", rmm_initial=100)


def test_torch_validation_report():
    doc = sp.replay(INFERENCE_TRACE, report="torch_validation")
    assert doc["schema"] == "streampool-torch-validation/1"
    v = doc["traces"][0]
    assert v["start"] == "warm"
    assert abs(v["peak_error"]) <= 0.02
    assert v["torch"]["segment_allocs"] == v["model"]["segment_allocs"]
    assert v == cli_json("--validate-torch", INFERENCE_TRACE)["traces"][0]


def test_the_policy_report_is_the_tools(tmp_path):
    # The same rows, what to ship and the reference, for a recording (its
    # own settings are the reference) and the data-parallel workload.
    lab = os.path.join(os.path.dirname(INFERENCE_TRACE), "lab")
    traces = [os.path.join(lab, "offload.trace"), os.path.join(lab, "dataparallel.trace")]
    r = subprocess.run([tool("STREAMPOOL_REPLAY"), "--policy-report", "--json", *traces],
                       capture_output=True, text=True, check=True)
    from_tool = json.loads(r.stdout)
    from_python = sp.replay(traces, report="policy")
    assert len(from_python["traces"]) == len(from_tool["traces"]) == 2
    for py, cli in zip(from_python["traces"], from_tool["traces"]):
        assert [row["setting"] for row in py["rows"]] == [row["setting"] for row in cli["rows"]]
        assert py["rows"] == cli["rows"]
        assert py["ship"] == cli["ship"]
        assert py["reference"] == cli["reference"]
        # The recording's reference names the order it decided in.
        assert "(grow first)" in py["reference"]["setting"]
