"""Compile the kernels' C++ on first use, into the compile-cache folder.

The library lands in ``<compile cache>/kernels/<key>/albert_kernels.so``
(the compile cache is $ALBERT_MIN_CACHE, else ~/.cache/albert_min/compile).
The key hashes everything that makes the binary: the sources, the compiler
and its version, the flags, the BLAS headers and library, and the CPU's
instruction sets (the code is built for this CPU, ``-march=native``). The
library is built under a temporary name and renamed when complete, so
concurrent or interrupted builds never leave a half-written file; a killed
build's temporary is removed by the next build. The build records the
library's size and sha256 beside it (``albert_kernels.so.json``), and the
library is checked against them before it is loaded: a truncated or damaged
one is built again, never loaded (it would kill the process: SIGBUS, SIGSEGV).
"""

import hashlib
import json
import os
import platform
import shutil
import subprocess

from ...common.errors import AlbertMinError
from ...common.json_files import Field, JSONFileError, read_json
from ...common.checksums import sha256_of
from ...common.safe_output import remove_dead_temp_files, replace_file

HERE = os.path.dirname(os.path.abspath(__file__))
# Named, not globbed: an install that lost them (a wheel built without setup.cfg's package data)
# must be told so, not build a library without its functions.
SOURCES = [os.path.join(HERE, name) for name in ("backward.cc", "dropout.cc", "forward.cc", "int8.cc")]
HEADERS = [os.path.join(HERE, "helper.h")]
LIBRARY = "albert_kernels.so"
ONEDNN = "libdnnl.so.3"     # MindSpore's oneDNN, linked for int8.cc's int8 gemm
RECORD_SUFFIX = ".json"     # albert_kernels.so.json: the library's size and sha256, written by its build
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


def onednn_dir():
    """The folder of the oneDNN MindSpore ships (``mindspore/lib/libdnnl.so.3``: int8.cc's int8 gemm),
    or None where it has none: the kernels are then built without it, and int8 inference is off
    (``int8.cc``'s ``int8_available``)."""
    import importlib.util
    spec = importlib.util.find_spec("mindspore")
    folder = os.path.join(os.path.dirname(spec.origin), "lib") if spec and spec.origin else None
    return folder if folder and os.path.isfile(os.path.join(folder, ONEDNN)) else None


def onednn_flags(folder):
    """Link flags for the oneDNN in ``folder`` (none for None)."""
    # --no-as-needed: int8.cc's references are weak, which alone would not keep the library linked
    return [f"-L{folder}", "-Wl,--push-state,--no-as-needed", f"-l:{ONEDNN}", "-Wl,--pop-state",
            f"-Wl,-rpath,{folder}"] if folder else []


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


def check_library(path):
    """None if the library at ``path`` is what its build recorded (``RECORD``: size and sha256),
    else why not: "" when there is nothing to check (no library yet, or no record: an older
    albert_min's build, or one killed between its two renames), else the damage, in words.
    A truncated library kills the process that loads it (SIGBUS), a changed byte may (SIGSEGV):
    it is checked before ``ctypes`` loads it."""
    record = path + RECORD_SUFFIX
    if not os.path.isfile(path) or not os.path.isfile(record):
        return ""
    try:
        recorded = read_json(record, {"size": Field(int, low=0), "sha256": Field(str)})
    except (JSONFileError, OSError) as err:
        return f"its build record is unreadable ({err})"
    size = os.path.getsize(path)
    if size != recorded["size"]:
        return f"truncated or damaged: {size} bytes, its build recorded {recorded['size']}"
    if sha256_of(path) != recorded["sha256"]:
        return "damaged: its sha256 differs from the one its build recorded"
    return None


def library_path(cache_root, notice=None):
    """The compiled library, built now if no earlier process built it whole. Raises KernelBuildError.

    A library that is not what its build recorded (``check_library``) is built again, and
    ``notice`` (a function taking one line) told so once it is."""
    missing = [os.path.basename(path) for path in SOURCES + HEADERS if not os.path.isfile(path)]
    if missing:
        raise KernelBuildError(f"{HERE} lacks the kernels' sources {', '.join(missing)}: albert_min was installed "
                               "without its package data; reinstall it")
    include, libdir, link = blas()
    cxx, version = compiler()
    onednn = onednn_dir()
    linked = (include, libdir, link, *onednn_flags(onednn))
    folder = os.path.join(cache_root, "kernels", build_key(cxx, version, linked))
    final = os.path.join(folder, LIBRARY)
    damage = check_library(final)
    if damage is None:
        return final
    os.makedirs(folder, exist_ok=True)
    for path in (final, final + RECORD_SUFFIX):
        remove_dead_temp_files(path)    # what a killed build left
    # Written as every albert_min output file is (safe_output.replace_file): under a temporary name
    # holding this process's id, fsynced, renamed when complete; the record first, so that a
    # library in place always has its record (concurrent builds write the same bytes).
    with replace_file(final) as tmp:
        command = [cxx, *FLAGS, *SOURCES, f"-I{include}", f"-L{libdir}", f"-l{link}", f"-Wl,-rpath,{libdir}",
                   *onednn_flags(onednn), "-o", tmp]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise KernelBuildError(f"{os.path.basename(cxx)} failed on {', '.join(map(os.path.basename, SOURCES))}: "
                                   f"{last}")
        with replace_file(final + RECORD_SUFFIX) as record, open(record, "w", encoding="utf-8") as f:
            json.dump({"size": os.path.getsize(tmp), "sha256": sha256_of(tmp)}, f)
    if damage and notice:
        notice(f"{final}: {damage}; built it again")
    return final
