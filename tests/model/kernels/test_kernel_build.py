"""albert_min/model/kernels: finding, building and loading the library where things are missing or
wrong: a foreign library in the cache, a full disk, no compiler, no /proc, no sched_getaffinity."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from albert_min.common.checksums import sha256_of
from albert_min.model import kernels
from albert_min.model.kernels import build
from helpers.reference_model import accelerates
from helpers.paths import ROOT
from test_kernels import tiny_build  # noqa: F401  (a fixture: build.py on a one-function source)


def compile_library(source_text, tmp_path, name="foreign.so"):
    source = tmp_path / (name + ".cc")
    source.write_text(source_text)
    out = tmp_path / name
    subprocess.run([build.compiler()[0], "-shared", "-fPIC", str(source), "-o", str(out)], check=True)
    return out.read_bytes()


def plant(cache, data):
    """``data`` as the kernels' library in ``cache``, under the key this process computes, with a
    record that matches it: what the loader sees is a whole, recorded, but foreign file."""
    cxx, version = build.compiler()
    onednn_dir = build.onednn()
    folder = os.path.join(cache, "kernels", build.build_key(cxx, version, onednn_dir))
    os.makedirs(folder)
    path = os.path.join(folder, build.LIBRARY)
    with open(path, "wb") as f:
        f.write(data)
    with open(path + build.RECORD_SUFFIX, "w") as f:
        json.dump({"size": len(data), "sha256": sha256_of(path), "inputs": build.inputs_hash(onednn_dir)}, f)
    return path


# Issue 44.4: a valid shared library that is not albert_min's, with a matching record, raised
# AttributeError (undefined symbol: set_blas_threads) from building any model.
@pytest.mark.parametrize("foreign", ["another library", "not a library"])
def test_a_foreign_library_in_the_cache_gives_one_notice_and_mindspores_ops(library, tmp_path, monkeypatch, capsys,
                                                                          foreign):
    data = (compile_library('extern "C" int set_blas_threads(int n) { return n; }\n', tmp_path)
            if foreign == "another library" else b"\x7fELF but not one" * 64)
    path = plant(str(tmp_path / "cache"), data)
    monkeypatch.setenv("ALBERT_MIN_CACHE", str(tmp_path / "cache"))      # a cache root not tried yet
    assert not accelerates()
    assert not accelerates()                                               # noticed once, not per model
    notice = capsys.readouterr().err.strip().splitlines()
    assert len(notice) == 1 and notice[0].startswith(f"albert_min: kernels not used ({path}: ")
    assert notice[0].endswith("); using MindSpore's ops")
    if foreign == "another library":
        assert f"it lacks {kernels.FUNCTIONS[0]} and {len(kernels.FUNCTIONS) - 1} more of the kernels' functions: " \
               "not albert_min's kernels" in notice[0]


def test_every_function_the_layers_call_is_checked_at_load():
    """FUNCTIONS lists each ``library:function`` the kernels' layers name (else a library lacking one would load)."""
    import re
    named = set()
    for name in sorted(n for n in os.listdir(build.HERE) if n.endswith(".py")):
        with open(os.path.join(build.HERE, name), encoding="utf-8") as f:
            text = f.read()
        named |= set(re.findall(r'\{library\}:(\w+)"', text))
        named |= set(re.findall(r'forward_kernel\(library, "(\w+)"', text))
    assert named and named <= set(kernels.FUNCTIONS)


FAKE_COMPILER = """#!/bin/sh
# what g++ prints when the disk fills while it links
case "$1" in --version) echo "g++ (fake) 1.0"; exit 0;; esac
echo "/usr/bin/ld: final link failed: No space left on device" >&2
echo "collect2: error: ld returned 1 exit status" >&2
exit 1
"""


def fake_compiler(tmp_path, text=FAKE_COMPILER, name="g++-full-disk"):
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


# Issue 44.7: a build on a full disk said only "collect2: error: ld returned 1 exit status".
@pytest.mark.parametrize("told", ["by the compiler", "by the free space"])
def test_a_build_on_a_full_disk_says_so(tmp_path, monkeypatch, capsys, told):
    cache = tmp_path / "cache"
    if told == "by the compiler":
        monkeypatch.setenv("CXX", fake_compiler(tmp_path))
    else:   # g++ says only collect2's line: the folder's free space tells
        monkeypatch.setenv("CXX", fake_compiler(tmp_path, FAKE_COMPILER.replace(
            'echo "/usr/bin/ld: final link failed: No space left on device" >&2\n', "")))
        real = build.shutil.disk_usage
        monkeypatch.setattr(build.shutil, "disk_usage", lambda path: real(path)._replace(
            free=1024 if str(path).startswith(str(cache)) else real(path).free))
    with pytest.raises(build.KernelBuildError, match=r"^no space left on device: ") as raised:
        build.library_path(str(cache))
    assert str(raised.value).split(": ", 1)[1].startswith(os.path.join(str(cache), "kernels", ""))
    monkeypatch.setenv("ALBERT_MIN_CACHE", str(cache))
    assert not accelerates()
    notice = capsys.readouterr().err.strip().splitlines()
    assert notice == [f"albert_min: kernels not built ({raised.value}); using MindSpore's ops"]


def test_a_failed_build_names_the_linkers_reason_not_collect2(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", fake_compiler(tmp_path, FAKE_COMPILER.replace(
        "final link failed: No space left on device", "cannot find -lsomething")))
    with pytest.raises(build.KernelBuildError, match=r"failed on .*: /usr/bin/ld: cannot find -lsomething$"):
        build.library_path(str(tmp_path / "cache"))


# Issue 44.7: with no compiler on PATH, a library built before (and whole) was not used.
def test_without_a_compiler_a_library_built_before_from_the_same_sources_is_used(library, tiny_build, tmp_path,
                                                                                 monkeypatch):
    path = build.library_path(tiny_build)
    monkeypatch.setenv("CXX", "no-such-compiler-albert-min")
    assert build.library_path(tiny_build) == path
    with open(path, "r+b") as f:             # damaged: not used, and nothing to build it with
        f.write(b"\0" * 16)
    with pytest.raises(build.KernelBuildError, match=r"^no C\+\+ compiler: no-such-compiler-albert-min not found$"):
        build.library_path(tiny_build)


def test_without_a_compiler_a_library_of_other_sources_is_not_used(library, tiny_build, tmp_path, monkeypatch):
    build.library_path(tiny_build)
    with open(build.SOURCES[0], "a") as f:
        f.write("// changed\n")
    monkeypatch.setenv("CXX", "no-such-compiler-albert-min")
    with pytest.raises(build.KernelBuildError, match=r"^no C\+\+ compiler: no-such-compiler-albert-min not found$"):
        build.library_path(tiny_build)


# Issue 46.5: portability of the build and of the kernels' import.
def test_without_cxx_the_compiler_is_the_first_of_cpp_gpp_clang_on_path(tmp_path, monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    clang = fake_compiler(tmp_path, '#!/bin/sh\necho "clang version 99"\n', name="clang++")
    monkeypatch.setenv("PATH", os.path.dirname(clang))
    assert build.compiler() == (clang, "clang version 99")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(build.KernelBuildError,
                       match=r"^no C\+\+ compiler: none of c\+\+, g\+\+, clang\+\+ found on PATH$"):
        build.compiler()


@pytest.mark.skipif(not os.path.isfile("/proc/cpuinfo"), reason="compares with /proc/cpuinfo")
def test_without_proc_cpuinfo_the_cpus_features_come_from_the_compiler(library, tmp_path, monkeypatch):
    with_proc = build.cpu_features()
    assert with_proc.startswith("flags")
    monkeypatch.setattr(build, "CPUINFO", str(tmp_path / "no-proc" / "cpuinfo"))
    from_compiler = build.cpu_features(build.compiler()[0])
    assert from_compiler != with_proc
    assert ("#define __x86_64__ 1" in from_compiler.splitlines()) == (build.platform.machine() == "x86_64")
    if " avx512f " in with_proc + " ":
        assert "#define __AVX512F__ 1" in from_compiler.splitlines()
    without_anything = build.cpu_features()
    assert without_anything == f"{build.platform.machine()} {build.platform.processor()}"
    cxx, version = build.compiler()
    assert build.build_key(cxx, version, build.onednn()) != build.build_key(cxx, version + " other", build.onednn())


def test_the_kernels_import_without_sched_getaffinity():
    """macOS and Windows have no os.sched_getaffinity: the machine's CPU count instead."""
    code = ("import os; del os.sched_getaffinity; from albert_min.model import kernels; "
            "print(kernels.KERNEL_THREADS, min(2, os.cpu_count()))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    threads, expected = proc.stdout.split()
    assert threads == expected


@pytest.mark.parametrize("lacking", ["the library", "a function"])
def test_without_mindspores_onednn_the_layers_fall_back_after_one_line(tmp_path, monkeypatch, capsys, lacking):
    """The kernels' GEMMs are oneDNN's, from the libdnnl.so.3 MindSpore ships: a MindSpore without it
    (or with one lacking dnnl_sgemm) gets MindSpore's ops and one line saying why."""
    if lacking == "the library":
        monkeypatch.setattr(build, "ONEDNN", "libdnnl-absent.so.3")
        folder = os.path.join(os.path.dirname(importlib.util.find_spec("mindspore").origin), "lib")
        why = f"no oneDNN: MindSpore's libdnnl-absent.so.3 is not in {folder}); "
    else:
        why = f"no oneDNN GEMM: {os.path.join(build.onednn(), build.ONEDNN)} lacks dnnl_no_such_gemm); "
        monkeypatch.setattr(build, "ONEDNN_SYMBOLS", build.ONEDNN_SYMBOLS + ("dnnl_no_such_gemm",))
    monkeypatch.setenv("ALBERT_MIN_CACHE", str(tmp_path))
    assert not accelerates() and kernels.library() is None
    notice = capsys.readouterr().err.strip().splitlines()
    assert notice == [f"albert_min: kernels not built ({why}using MindSpore's ops"]
