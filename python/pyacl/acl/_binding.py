"""Finds streampool's extension for the acl package.

The acl package calls streampool._core.pyacl, the AscendCL face compiled into
the streampool extension. If streampool is not importable already (only the
acl package's directory is on PYTHONPATH), the directory _location.py names
goes on sys.path first: the build tree's python/ or, installed, the
site-packages directory of the same prefix.
"""

import importlib.util
import os
import sys

if importlib.util.find_spec("streampool") is None:
    from acl import _location

    _dir = _location.STREAMPOOL_DIR
    if not os.path.isabs(_dir):
        _dir = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), _dir))
    sys.path.insert(0, _dir)

from streampool import _core  # noqa: E402

face = getattr(_core, "pyacl", None)
if face is None:
    raise ImportError(
        f"the streampool package at {os.path.dirname(_core.__file__)} has no AscendCL face "
        "(streampool._core.pyacl); put the one built with this acl package first on sys.path")

#: Every ACL_* name of the AscendCL face's headers, with its value there.
constants = dict(face.constants)
