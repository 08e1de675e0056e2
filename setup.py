"""Builds the streampool Python package with the project's CMake build.

build_py configures build/pip (Release) and builds only the extension's
targets, then copies the package CMake assembles there (the Python sources,
streampool._core and libstreampool-torch.so) into the wheel. The build
directory is kept between installs and compiles through ccache where the
machine has it, with CCACHE_BASEDIR at the checkout, so a reinstall, or a
first install after ./run.sh build, compiles little or nothing.

Environment: STREAMPOOL_CMAKE_ARGS adds CMake arguments (shell words);
STREAMPOOL_JOBS sets the build's parallelism (default: the cores).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.join(ROOT, "build", "pip")
# What the package needs: the extension, and PyTorch's allocator library
# that streampool.torch hands to PyTorch.
TARGETS = ["streampool_python", "streampool_python_torch"]


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(streampool VERSION ([0-9.]+)", f.read()).group(1)


class _CMakeBuildPy(build_py):
    """build_py that takes the package from the CMake build tree."""

    def run(self):
        env = dict(os.environ)
        args = ["-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}",
                # Only the package: no tests, benchmarks, tools or examples
                # to configure (their targets would not be built anyway).
                "-DSTREAMPOOL_BUILD_TESTS=OFF", "-DSTREAMPOOL_BUILD_BENCH=OFF",
                "-DSTREAMPOOL_BUILD_EXAMPLES=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            # Paths below the checkout hashed relative to it: objects of
            # another build of the same sources are hits.
            env.setdefault("CCACHE_BASEDIR", ROOT)
            args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(env.get("STREAMPOOL_CMAKE_ARGS", ""))
        jobs = env.get("STREAMPOOL_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "-S", ROOT, "-B", BUILD_DIR, *args], check=True, env=env)
        subprocess.run(["cmake", "--build", BUILD_DIR, "-j", jobs, "--target", *TARGETS],
                       check=True, env=env)
        package = os.path.join(BUILD_DIR, "python", "streampool")
        if not os.path.exists(os.path.join(package, "__init__.py")):
            sys.exit(f"CMake built no Python package in {package}: is pybind11 installed "
                     "(Debian: python3-pybind11, python3-dev)?")
        out = os.path.join(self.build_lib, "streampool")
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(package, out, ignore=shutil.ignore_patterns("__pycache__"))


class _BinaryDistribution(Distribution):
    """The wheel holds a compiled extension: tagged for this interpreter and
    platform, not as pure Python."""

    def has_ext_modules(self):
        return True


os.makedirs(BUILD_DIR, exist_ok=True)
setup(
    version=_version(),
    packages=["streampool"],
    package_dir={"streampool": "python/streampool"},
    cmdclass={"build_py": _CMakeBuildPy},
    distclass=_BinaryDistribution,
    # setuptools' own scratch files under build/pip, beside the CMake tree,
    # not in the checkout's root.
    options={"build": {"build_base": os.path.join("build", "pip", "setuptools")},
             "egg_info": {"egg_base": os.path.join("build", "pip")}},
    zip_safe=False,
)
