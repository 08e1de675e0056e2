"""examples/pyacl_dvpp.py must keep running as a script (CTest puts the build
tree's streampool and acl packages on PYTHONPATH)."""

import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyacl_dvpp.py")


def test_pyacl_dvpp_example_runs():
    out = subprocess.run([sys.executable, EXAMPLE], check=True, capture_output=True,
                         text=True).stdout
    assert "1920x1080" in out
    assert "read back" in out and ": ok" in out
    assert "as before: True" in out
