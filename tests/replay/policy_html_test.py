#!/usr/bin/env python3
"""streampool-replay --policy-report --html: the page of the whole lab suite
stays under 5 MB, opens in headless Chromium with no script error, and draws
what it should (counted by the page's own script into <html data-drawn>);
a converted PyTorch snapshot's frames reach the blocks-at-the-peak table.
Skipped, with the reason, where Chromium is not installed (./run.sh deps
installs Debian's chromium)."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import torch_snapshot_to_trace as conv  # noqa: E402
from torch_snapshot_to_trace_test import synthetic_snapshot  # noqa: E402

REPLAY = os.environ.get("STREAMPOOL_REPLAY", "streampool-replay")
LAB = sorted(glob.glob(os.path.join(ROOT, "traces", "lab", "*.trace")))
MAX_BYTES = 5 * 1000 * 1000

# Recorded before the page's own script runs: any uncaught error or
# console.error ends up on <html data-errors>.
TRAP = ("<script>(function(){var e=[];function keep(m){e.push(String(m));"
        "document.documentElement.setAttribute('data-errors',JSON.stringify(e));}"
        "window.addEventListener('error',function(ev){keep(ev.message);});"
        "window.addEventListener('unhandledrejection',function(ev){keep(ev.reason);});"
        "var ce=console.error;console.error=function(){keep([].join.call(arguments,' '));"
        "ce.apply(console,arguments);};})();</script>")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def replay(*args):
    return subprocess.run([REPLAY, *args], capture_output=True, text=True, check=False)


def open_in_chromium(browser, html_path, scratch):
    """The DOM after the page's scripts ran, with the trap injected first,
    and Chromium's stderr (where it logs uncaught errors too)."""
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    trapped = os.path.join(scratch, "trapped.html")
    with open(trapped, "w", encoding="utf-8") as f:
        f.write(page.replace("<head>", "<head>" + TRAP, 1))
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--user-data-dir=" + os.path.join(scratch, "profile"),
                        "--enable-logging=stderr", "--v=0", "--dump-dom",
                        "file://" + os.path.abspath(trapped)],
                       capture_output=True, text=True, timeout=120, check=False)
    return r.stdout, r.stderr


def attribute(dom, name):
    m = re.search(r"<html[^>]*\s" + name + r"=\"([^\"]*)\"", dom)
    if not m:
        return None
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


class PolicyHtmlTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.browser = chromium()

    def tearDown(self):
        self.dir.cleanup()

    def check_opens_clean(self, html):
        if self.browser is None:
            self.skipTest("chromium is not installed (./run.sh deps installs Debian's chromium)")
        dom, log = open_in_chromium(self.browser, html, self.dir.name)
        self.assertIsNone(attribute(dom, "data-errors"), log)
        self.assertNotIn("Uncaught", log)
        drawn = attribute(dom, "data-drawn")
        self.assertIsNotNone(drawn, "the page's script did not finish:\n" + log)
        return drawn

    def test_lab_suite_page_is_small_and_opens_without_error(self):
        html = os.path.join(self.dir.name, "lab.html")
        r = replay("--policy-report", "--allocator=streampool,rmm-pool", "--threads=2",
                   "--html", html, *LAB)
        self.assertEqual(r.returncode, 0, r.stderr)
        size = os.path.getsize(html)
        self.assertLess(size, MAX_BYTES)
        with open(html, encoding="utf-8") as f:
            page = f.read()
        # Self-contained: nothing fetched from anywhere.
        self.assertNotIn("src=", page)
        self.assertIsNone(re.search(r"href=\"(?!#)", page))
        drawn = self.check_opens_clean(html)
        self.assertEqual(drawn["traces"], len(LAB))
        # The reference and ship unconstrained (or one, when they are the
        # same) plus the capped ship's reserved and used, per trace.
        self.assertGreaterEqual(drawn["series"], 3 * len(LAB))
        self.assertEqual(drawn["levels"], 2 * len(LAB))  # peak live and capacity
        # 16 sets, rmm-pool, CUDA's defaults and the recorded setting each.
        self.assertEqual(drawn["points"], 19 * len(LAB))
        self.assertGreaterEqual(drawn["labels"], 2 * len(LAB))
        self.assertLessEqual(drawn["labels"], drawn["points"])
        self.assertEqual(drawn["rows"], 19 * len(LAB))
        self.assertGreater(drawn["blocks"], 0)
        self.assertIn("rmm-pool", page)

    def test_a_broken_page_is_caught(self):
        html = os.path.join(self.dir.name, "broken.html")
        with open(html, "w", encoding="utf-8") as f:
            f.write("<!DOCTYPE html><html><head></head><body><script>nosuch();</script>"
                    "</body></html>")
        if self.browser is None:
            self.skipTest("chromium is not installed (./run.sh deps installs Debian's chromium)")
        dom, _ = open_in_chromium(self.browser, html, self.dir.name)
        errors = attribute(dom, "data-errors")
        self.assertTrue(errors and "nosuch" in errors[0], dom)

    def test_snapshot_frames_reach_the_blocks_at_the_peak(self):
        trace = os.path.join(self.dir.name, "snap.trace")
        with open(trace, "w", encoding="utf-8") as f:
            f.write(conv.convert(synthetic_snapshot(), source="synthetic"))
        html = os.path.join(self.dir.name, "snap.html")
        r = replay("--policy-report", "--threshold=0", "--html", html, trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(html, encoding="utf-8") as f:
            self.assertIn('<span class="frame">f (x.py:1)</span>', f.read())
        drawn = self.check_opens_clean(html)
        self.assertEqual(drawn["frames"], 1)


if __name__ == "__main__":
    unittest.main()
