"""streampool-demo as a user runs it: its flags, where its files go, and
output that says what each figure means in words a reader knows."""

import re
import subprocess

from conftest import tool


def demo(*args, cwd=None):
    return subprocess.run([tool("STREAMPOOL_DEMO"), *args], capture_output=True, text=True,
                          check=False, cwd=cwd)


def test_files_go_to_one_directory_which_the_demo_names(tmp_path):
    r = demo(f"--traces_dir={tool('STREAMPOOL_TRACES_DIR')}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # Nothing but the default directory lands in the working directory.
    assert [p.name for p in tmp_path.iterdir()] == ["streampool-demo"]
    assert sorted(p.name for p in (tmp_path / "streampool-demo").iterdir()) == [
        "policy_lab.svg", "timeline.json", "traces.svg"]
    assert "Written to streampool-demo/:" in r.stdout

    out = tmp_path / "elsewhere" / "nested"
    r = demo(f"--traces_dir={tool('STREAMPOOL_TRACES_DIR')}", f"--output_dir={out}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["policy_lab.svg", "timeline.json",
                                                      "traces.svg"]
    assert f"Written to {out}/:" in r.stdout


def test_tables_use_whole_words(tmp_path):
    r = demo(f"--traces_dir={tool('STREAMPOOL_TRACES_DIR')}", f"--output_dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    words = set(re.findall(r"[A-Za-z]+", r.stdout))
    for cut in ("tunist", "oppor", "aftsyn", "strm", "deps", "util", "enq", "pos", "THP", "norm"):
        assert cut not in words, cut
    for process in ("goal", "Goal", "MISSED", "issue", "judged"):
        assert process not in r.stdout, process
    # The policy table: a header row of whole words, a row per setting.
    assert re.search(r"reuse rules on +same +event +opportunistic +internal +after", r.stdout)


def test_plot_titles_are_file_names(tmp_path):
    r = demo(f"--traces_dir={tool('STREAMPOOL_TRACES_DIR')}", f"--output_dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "traces.svg").read_text()
    titles = re.findall(r'font-weight="bold">([^<]*)</text>', svg)
    assert titles and all("/" not in t and t.endswith(".trace") for t in titles), titles


def test_help_and_bad_command_lines():
    r = demo("--help")
    assert r.returncode == 0
    assert "usage: streampool-demo" in r.stdout and "--output_dir" in r.stdout
    assert demo("-h").returncode == 0
    for args in (["traces"], ["--output"], ["--frobnicate"]):
        r = demo(*args)
        assert r.returncode == 2, args
        assert "usage: streampool-demo" in r.stderr
