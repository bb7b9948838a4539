"""Compile the kernels' C++ on first use, into the compile-cache folder.

The library lands in ``<compile cache>/kernels/<key>/albert_kernels.so``
(the compile cache is $ALBERT_MIN_CACHE, else ~/.cache/albert_min/compile).
The key hashes everything that makes the binary: the sources, the flags, the
oneDNN it links (the one MindSpore ships), the CPU's instruction sets (the
code is built for this CPU, ``-march=native``), and the compiler and its
version. The library is built under a temporary name and renamed when
complete, so concurrent or interrupted builds never leave a half-written
file; a killed build's temporary is removed by the next build. The build
records the library's size and sha256 beside it (``albert_kernels.so.json``),
and the library is checked against them before it is loaded: a truncated or
damaged one is built again, never loaded (it would kill the process: SIGBUS,
SIGSEGV). The record also holds the hash of everything but the compiler
(``inputs``): without a compiler, a library built here before from the same
sources is found by it and used.
"""

import glob
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

from ...common.errors import AlbertMinError
from ...common.json_files import Field, JSONFileError, read_json
from ...common.checksums import sha256_of
from ...common.safe_output import remove_dead_temp_files, replace_file

HERE = os.path.dirname(os.path.abspath(__file__))
# Every .cc here is compiled into the one library (a file per op: dense.cc, layer_norm.cc, ...), and
# every .h counts in its key. An install that lost them (a wheel built without setup.cfg's package
# data, which ships *.cc and *.h together) is told so by library_path; one that lost a single file
# builds a library that lacks its functions, which the loader refuses by name (kernels.FUNCTIONS).
SOURCES = sorted(glob.glob(os.path.join(glob.escape(HERE), "*.cc")))
HEADERS = sorted(glob.glob(os.path.join(glob.escape(HERE), "*.h")))
LIBRARY = "albert_kernels.so"
RECORD_SUFFIX = ".json"     # albert_kernels.so.json: the library's size and sha256, written by its build
ONEDNN = "libdnnl.so.3"     # MindSpore's oneDNN (its lib folder), whose public C API the kernels call
ONEDNN_SYMBOLS = ("dnnl_sgemm",)
COMPILERS = ("c++", "g++", "clang++")     # tried in this order where $CXX is not set
CPUINFO = "/proc/cpuinfo"   # Linux's; absent on macOS and Windows
# -fno-trapping-math lets loops with a comparison vectorise (GELU's clamp): it changes no result, only
# which floating-point exception flags a computation may raise, and nothing here reads them.
# -z defs: a symbol oneDNN lacks fails the build, by name; -z now: and the load, never a call.
COMPILE_FLAGS = ["-O3", "-march=native", "-fno-trapping-math", "-std=c++17", "-fPIC", "-pthread"]
LINK_FLAGS = ["-shared", "-pthread", "-Wl,-z,defs", "-Wl,-z,now"]
FLAGS = COMPILE_FLAGS + LINK_FLAGS
# Free space below which a failed build is said to be a full disk (the library is ~0.1 MB, g++'s
# temporaries a few MB); g++'s own "No space left on device" says so too.
MIN_FREE_BYTES = 16 << 20


class KernelBuildError(AlbertMinError):
    """The kernels cannot be built here (no compiler, no oneDNN, or the compiler failed)."""


def onednn():
    """The folder holding MindSpore's oneDNN (``ONEDNN``), checked for the functions the kernels call."""
    spec = importlib.util.find_spec("mindspore")
    folder = os.path.join(os.path.dirname(spec.origin), "lib") if spec and spec.origin else ""
    path = os.path.join(folder, ONEDNN)
    if not os.path.isfile(path):
        raise KernelBuildError(f"no oneDNN: MindSpore's {ONEDNN} is not in {folder or 'its lib folder'}")
    import ctypes       # MindSpore has it loaded already
    try:
        library = ctypes.CDLL(path)
        missing = [name for name in ONEDNN_SYMBOLS if not hasattr(library, name)]
    except OSError as err:
        raise KernelBuildError(f"no oneDNN: {path} does not load ({err})") from None
    if missing:
        raise KernelBuildError(f"no oneDNN GEMM: {path} lacks {', '.join(missing)}")
    return folder


def compiler():
    """(path, first line of --version) of $CXX, else the first of ``COMPILERS`` on PATH."""
    names = [os.environ["CXX"]] if os.environ.get("CXX") else list(COMPILERS)
    path = next((found for found in map(shutil.which, names) if found), None)
    if path is None:
        raise KernelBuildError(f"no C++ compiler: {names[0]} not found" if len(names) == 1 else
                               f"no C++ compiler: none of {', '.join(names)} found on PATH")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return path, version


def cpu_features(cxx=None):
    """What -march=native builds for: the CPU's flags line in /proc/cpuinfo (Linux); elsewhere the
    macros the compiler defines for -march=native (its instruction sets), else the processor's name."""
    try:
        with open(CPUINFO, encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
        if flags:
            return flags
    except OSError:
        pass
    if cxx:
        try:
            macros = subprocess.run([cxx, "-march=native", "-dM", "-E", "-x", "c++", "-"], input="",
                                    capture_output=True, text=True, timeout=60)
            if macros.returncode == 0 and macros.stdout:
                return "".join(sorted(macros.stdout.splitlines(keepends=True)))
        except (OSError, subprocess.SubprocessError):
            pass
    return f"{platform.machine()} {platform.processor()}"


def inputs_hash(onednn_dir):
    """Everything that makes the library but the compiler: sources, flags, oneDNN, the CPU."""
    digest = hashlib.sha256()
    for path in SOURCES + HEADERS:
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update("\n".join([*FLAGS, onednn_dir, platform.machine(), cpu_features()]).encode())
    return digest.hexdigest()


def build_key(cxx, version, onednn_dir, inputs=None):
    """The cache folder's name: ``inputs_hash`` and the compiler (its path, version and the instruction
    sets it sees where /proc/cpuinfo is absent)."""
    parts = [inputs or inputs_hash(onednn_dir), cxx, version, cpu_features(cxx)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


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
        recorded = read_json(record, {"size": Field(int, low=0), "sha256": Field(str),
                                      "inputs": Field(str, required=False)})
    except (JSONFileError, OSError) as err:
        return f"its build record is unreadable ({err})"
    size = os.path.getsize(path)
    if size != recorded["size"]:
        return f"truncated or damaged: {size} bytes, its build recorded {recorded['size']}"
    if sha256_of(path) != recorded["sha256"]:
        return "damaged: its sha256 differs from the one its build recorded"
    return None


def built_before(cache_root, inputs):
    """A library in the cache whose record holds ``inputs`` (the same sources, flags, oneDNN and CPU;
    built with whichever compiler) and which is what its build recorded; the newest, or None."""
    found = []
    for record in glob.glob(os.path.join(glob.escape(cache_root), "kernels", "*", LIBRARY + RECORD_SUFFIX)):
        try:
            same = read_json(record, {"inputs": Field(str, required=False)}).get("inputs") == inputs
        except (JSONFileError, OSError):
            continue
        path = record[:-len(RECORD_SUFFIX)]
        if same and check_library(path) is None:
            found.append((os.path.getmtime(path), path))
    return max(found)[1] if found else None


def full_disk(folder, compiler_output):
    """The folder (the cache's or the compiler's temporary one) with no space left, where a build
    failed for want of it, else None. g++ says only "ld returned 1 exit status" for some of them."""
    import tempfile
    for path in (folder, tempfile.gettempdir()):
        try:
            if shutil.disk_usage(path).free < MIN_FREE_BYTES:
                return path
        except OSError:
            continue
    return folder if "No space left on device" in compiler_output else None


def library_path(cache_root, notice=None):
    """The compiled library, built now if no earlier process built it whole. Raises KernelBuildError.

    A library that is not what its build recorded (``check_library``) is built again, and
    ``notice`` (a function taking one line) told so once it is."""
    missing = [os.path.basename(path) for path in SOURCES + HEADERS if not os.path.isfile(path)]
    if not SOURCES:         # the folder holds none
        missing = ["*.cc"]
    if missing:
        raise KernelBuildError(f"{HERE} lacks the kernels' sources {', '.join(missing)}: albert_min was installed "
                               "without its package data; reinstall it")
    onednn_dir = onednn()
    inputs = inputs_hash(onednn_dir)
    try:
        cxx, version = compiler()
    except KernelBuildError:
        found = built_before(cache_root, inputs)      # built here before, by a compiler since removed
        if found:
            return found
        raise
    folder = os.path.join(cache_root, "kernels", build_key(cxx, version, onednn_dir, inputs))
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
        compile_and_link(cxx, onednn_dir, tmp, folder)
        with replace_file(final + RECORD_SUFFIX) as record, open(record, "w", encoding="utf-8") as f:
            json.dump({"size": os.path.getsize(tmp), "sha256": sha256_of(tmp), "inputs": inputs}, f)
    if damage and notice:
        notice(f"{final}: {damage}; built it again")
    return final


def compile_and_link(cxx, onednn_dir, output, folder):
    """Every source compiled to an object file, as many at once as this process has CPUs (each file
    takes 0.4-1.8 s; the whole library about 10 s on one core), then linked into ``output``. The object
    files live in a temporary folder, removed after. A failure raises KernelBuildError naming the
    file(s) and the compiler's or linker's last line (``folder``: where a full disk is looked for)."""
    def run(command, sources):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            no_space = full_disk(folder, result.stderr)
            if no_space:
                raise KernelBuildError(f"no space left on device: {no_space}")
            lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("collect2:")]
            last = (lines or result.stderr.strip().splitlines() or ["no output"])[-1]   # ld's reason, not collect2's
            raise KernelBuildError(f"{os.path.basename(cxx)} failed on {', '.join(map(os.path.basename, sources))}: "
                                   f"{last}")

    with tempfile.TemporaryDirectory(prefix="albert_min-kernels-") as objects:
        outputs = [os.path.join(objects, os.path.basename(source) + ".o") for source in SOURCES]
        with ThreadPoolExecutor(max_workers=build_jobs()) as pool:
            for done in [pool.submit(run, [cxx, *COMPILE_FLAGS, "-c", source, "-o", obj], [source])
                         for source, obj in zip(SOURCES, outputs)]:
                done.result()                                  # the first failure, in the sources' order
        run([cxx, *LINK_FLAGS, *outputs, f"-L{onednn_dir}", f"-l:{ONEDNN}", f"-Wl,-rpath,{onednn_dir}", "-o", output],
            SOURCES)


def build_jobs():
    """Compilers run at once: the CPUs this process may use (its affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):            # macOS, Windows
        return os.cpu_count() or 1
