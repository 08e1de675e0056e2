#!/usr/bin/env python3
"""Runs the commands and snippets of README.md and docs/*.md as written.

    docs_test.py --source DIR --build DIR --python PY

Every fenced block is one of:

  sh      run as one bash script (set -e) in a scratch directory that links
          the checkout's traces/, examples/ and tools/ and holds build/release
          (this build), with this build's tools on PATH;
  python  run by PY with PYTHONPATH set to this build's python/ and pyacl/;
  c, c++  compiled against this build (the public headers and the library,
          with Abseil from pkg-config) and run under the fatal stream-order
          checker; a snippet without main() becomes main's body;
  others  (cmake fragments, program output, diagrams) are shown, not run.

A block the line before marks `<!-- not run by tests/docs: REASON -->` is
listed with its reason and not run. The README's Quick start is also held to
what the demo does: its parts and the files it writes. Exit status 1 if a
block fails, with the block, its place and its output.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

NOT_RUN = re.compile(r"^<!-- not run by tests/docs: (.*) -->$")
FENCE = re.compile(r"^( *)```([A-Za-z+]*)\s*$")
TIMEOUT_S = 120

C_PRELUDE = "#include <stdio.h>\n#include <stdlib.h>\n#include \"streampool/streampool.h\"\n"
CXX_PRELUDE = ("#include <memory_resource>\n#include <vector>\n"
               "#include \"streampool/pool_resource.h\"\n#include \"streampool/raii.h\"\n"
               "#include \"streampool/runtime.h\"\n")


def blocks(path):
    """(line, language, code, reason it is not run or None) per fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        before = next((l.strip() for l in reversed(lines[:i]) if l.strip()), "")
        marked = NOT_RUN.match(before)
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        yield start + 1, lang, "\n".join(body) + "\n", marked.group(1) if marked else None


def scratch(source, build):
    work = tempfile.mkdtemp(prefix="streampool-docs-")
    for name in ("traces", "examples", "tools"):
        os.symlink(os.path.join(source, name), os.path.join(work, name))
    os.makedirs(os.path.join(work, "build"))
    os.symlink(build, os.path.join(work, "build", "release"))
    return work


def run(cmd, work, env, stdin=None):
    try:
        r = subprocess.run(cmd, cwd=work, env=env, input=stdin, capture_output=True, text=True,
                           timeout=TIMEOUT_S, check=False)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {TIMEOUT_S} s"


def build_flags(source, build):
    """Compile and link flags against this build, from its streampool.pc."""
    env = dict(os.environ, PKG_CONFIG_PATH=build)
    out = subprocess.run(["pkg-config", f"--define-variable=libdir={build}",
                          f"--define-variable=includedir={source}/include", "--cflags", "--libs",
                          "--static", "streampool"], env=env, check=True, capture_output=True,
                         text=True).stdout
    return out.split()


def compile_and_run(lang, code, n, work, flags, env):
    ext, compiler, std, prelude = (("c", "cc", "-std=c11", C_PRELUDE) if lang == "c" else
                                   ("cc", "c++", "-std=c++20", CXX_PRELUDE))
    if "main(" not in code:
        body = "".join("  " + l + "\n" for l in code.rstrip("\n").split("\n"))
        code = prelude + ("int main(void) {\n" if lang == "c" else "int main() {\n") + body + \
            "  return 0;\n}\n"
    src = os.path.join(work, f"snippet{n}.{ext}")
    obj, exe = src + ".o", os.path.join(work, f"snippet{n}")
    open(src, "w", encoding="utf-8").write(code)
    cflags = [f for f in flags if f.startswith(("-I", "-D"))]
    rc, out = run([compiler, std, "-Wall", *cflags, "-c", src, "-o", obj], work, env)
    if rc == 0:  # streampool is C++: a C program links with the C++ driver
        rc, out = run(["c++", obj, *flags, "-o", exe], work, env)
    if rc == 0:
        rc, out = run([exe], work, env)
    return rc, out, code


def quick_start(source, build, env, work):
    """The README's Quick start names the demo's parts and files: the demo agrees."""
    readme = open(os.path.join(source, "README.md"), encoding="utf-8").read()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    parts = re.findall(r"^- \((\w)\) ", section, flags=re.M)
    files = re.findall(r"`([a-z_]+\.(?:json|svg))`", section)
    out_dir = os.path.join(work, "demo")
    rc, out = run([os.path.join(build, "tools", "streampool-demo"), f"--output_dir={out_dir}"],
                  work, env)
    problems = [] if rc == 0 else [f"the demo exited {rc}"]
    printed = re.findall(r"^== \((\w)\) ", out, flags=re.M)
    if parts != printed:
        problems.append(f"the README lists parts {parts}, the demo prints {printed}")
    written = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    if sorted(files) != written:
        problems.append(f"the README names files {sorted(files)}, the demo writes {written}")
    return problems, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--python", required=True)
    args = ap.parse_args()
    source, build = os.path.abspath(args.source), os.path.abspath(args.build)
    work = scratch(source, build)
    env = dict(os.environ, STREAMPOOL_CHECK_STREAM_ORDER="fatal",
               PATH=os.path.join(build, "tools") + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.pathsep.join([os.path.join(build, "python"),
                                           os.path.join(build, "pyacl")]))
    flags = None
    ran, not_run, failed = 0, [], []
    files = [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs",
                                                                               "*.md")))
    for path in files:
        name = os.path.relpath(path, source)
        for line, lang, code, reason in blocks(path):
            where = f"{name}:{line}"
            if reason is None and lang not in ("sh", "python", "c", "c++"):
                reason = f"a {lang or 'plain'} block: shown, not run"
            if reason is not None:
                not_run.append((where, lang, reason))
                continue
            if lang == "sh":
                rc, out = run(["bash", "-e", "-o", "pipefail", "-s"], work, env, stdin=code)
            elif lang == "python":
                rc, out = run([args.python, "-"], work, env, stdin=code)
            else:
                flags = flags or build_flags(source, build)
                rc, out, code = compile_and_run(lang, code, ran, work, flags, env)
            ran += 1
            status = "ok" if rc == 0 else f"FAILED (exit {rc})"
            print(f"{where} ({lang}): {status}")
            if rc != 0:
                failed.append((where, lang, code, out))
    problems, demo_out = quick_start(source, build, env, work)
    print(f"README.md Quick start against the demo: {'ok' if not problems else 'FAILED'}")
    if problems:
        failed.append(("README.md, Quick start", "demo", "; ".join(problems), demo_out[-2000:]))
    print(f"\n{ran} blocks run, {len(not_run)} not run:")
    for where, lang, reason in not_run:
        print(f"  {where} ({lang or 'plain'}): {reason}")
    for where, lang, code, out in failed:
        print(f"\n=== {where} ({lang}) failed:\n{code}\n--- output:\n{out[-4000:]}")
    if failed:
        print(f"\n(scratch directory kept: {work})")
        return 1
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
