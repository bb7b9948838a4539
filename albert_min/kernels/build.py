"""Compile the kernels' C++ on first use, into the compile-cache folder.

The library lands in ``<compile cache>/kernels/<key>/albert_kernels.so``
(the compile cache is $ALBERT_MIN_CACHE, else ~/.cache/albert_min/compile).
The key hashes everything that makes the binary: the sources, the compiler
and its version, the flags, the BLAS headers and library, and the CPU's
instruction sets (the code is built for this CPU, ``-march=native``). The
library is built under a temporary name and renamed when complete, so
concurrent or interrupted builds never leave a half-written file.
"""

import glob
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile

from ..errors import AlbertMinError

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = sorted(glob.glob(os.path.join(HERE, "*.cc")))
HEADERS = sorted(glob.glob(os.path.join(HERE, "*.h")))
LIBRARY = "albert_kernels.so"
# -fno-trapping-math lets loops with a comparison vectorise (GELU's clamp): it changes no result, only
# which floating-point exception flags a computation may raise, and nothing here reads them.
FLAGS = ["-O3", "-march=native", "-fno-trapping-math", "-std=c++17", "-shared", "-fPIC", "-pthread"]


class KernelBuildError(AlbertMinError):
    """The kernels cannot be built here (no compiler, no BLAS, or the compiler failed)."""


def blas():
    """(include dir, lib dir, link name) of scipy-openblas32, the OpenBLAS packaged for building against."""
    try:
        import scipy_openblas32
    except ImportError:
        raise KernelBuildError("no BLAS: the package scipy-openblas32 is not installed") from None
    return scipy_openblas32.get_include_dir(), scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library()


def compiler():
    """(path, first line of --version) of $CXX or g++."""
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise KernelBuildError(f"no C++ compiler: {name} not found")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return path, version


def cpu_features():
    """The CPU's flags line (what -march=native builds for)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return platform.processor()


def build_key(cxx, version, blas_dirs):
    digest = hashlib.sha256()
    for path in SOURCES + HEADERS:
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update("\n".join([cxx, version, *FLAGS, *blas_dirs, platform.machine(), cpu_features()]).encode())
    return digest.hexdigest()[:24]


def library_path(cache_root):
    """The compiled library, built now if no earlier process built it. Raises KernelBuildError."""
    include, libdir, link = blas()
    cxx, version = compiler()
    folder = os.path.join(cache_root, "kernels", build_key(cxx, version, (include, libdir, link)))
    final = os.path.join(folder, LIBRARY)
    if os.path.isfile(final):
        return final
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{LIBRARY}.", suffix=".tmp", dir=folder)
    os.close(fd)
    command = [cxx, *FLAGS, *SOURCES, f"-I{include}", f"-L{libdir}", f"-l{link}", f"-Wl,-rpath,{libdir}",
               "-o", tmp]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise KernelBuildError(f"{os.path.basename(cxx)} failed on {', '.join(map(os.path.basename, SOURCES))}: "
                                   f"{last}")
        os.replace(tmp, final)          # atomic: another process sees no library or a whole one
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return final
