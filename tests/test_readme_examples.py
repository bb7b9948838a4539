"""The README's examples, run as a user runs them (marker ``readme``: not in the default run;
``.ci/run`` runs this stage after the README's test command, ``python3 -m pytest -m readme``).

1. ``test_readme_as_written``: a copy of this checkout (the files git tracks, and the untracked ones it
   does not ignore) with ``../shared`` beside it, a new virtual environment, and every bash and python
   block of README.md in order, from the first (``pip install -e . && python3 evaluate.py ...``) on,
   each command under its memory bound (``tests/helpers/readme_examples.py``).
2. ``test_installed_wheel``: the package built as a wheel and installed into another environment, not
   editable, then used from a folder outside the checkout: the README's Python blocks, ``python -m
   albert_min.convert`` and ``export``, and a training step that builds the compiled kernels. Every
   ``albert_min`` / ``tokenizer`` module it loads must come from that environment.

Both environments are clean: without the system's site-packages (where CI's editable install and
MindSpore already are), so each installs its dependencies, MindSpore too, as a user's does (from PyPI,
or pip's cache on a rerun). The check of every loaded module's ``__file__`` still guards against a
module the wheel lacks being filled in from the checkout.

The table of each command's peak memory and time is written to ``runs/readme-examples.md``.
"""

import os
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest

from helpers.readme_examples import examples, report, run_measured

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
REPORT = os.path.join(ROOT, "runs", "readme-examples.md")

pytestmark = [pytest.mark.readme,
              pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED, "data")),
                                 reason="../shared/data is not beside this checkout")]


def copy_checkout(dest):
    """The files a fresh clone has (tracked), plus the untracked ones git does not ignore (work in progress)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = os.path.join(ROOT, rel)
        if not os.path.lexists(src):
            continue                      # deleted in the working tree, not yet committed
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)


def make_venv(path):
    subprocess.run([sys.executable, "-m", "venv", path], check=True)     # clean: not the system's site-packages
    return os.path.join(path, "bin")


def user_env(bin_dir, cache):
    """A user's shell in that environment: its python3 first on PATH, a fresh compile cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ALBERT_MIN_DEVICE", "ALBERT_MIN_KERNELS")}
    env.update(PATH=bin_dir + os.pathsep + env.get("PATH", ""), VIRTUAL_ENV=os.path.dirname(bin_dir),
               ALBERT_MIN_CACHE=cache, PYTHONUNBUFFERED="1")
    return env


def write_report(title, rows):
    os.makedirs(os.path.dirname(REPORT), exist_ok=True)
    with open(REPORT, "a", encoding="utf-8") as f:
        f.write(f"\n## {title}\n\n{report(rows)}\n")
    print(f"\n{title}\n{report(rows)}")


def run_all(steps, cwd, env, title):
    """Run each (Example-like) step in order; fail on the first that exits non-zero or passes its bound."""
    rows = []
    try:
        for step in steps:
            result = run_measured(step.shell(), cwd, env)
            rows.append((step.title(), result.peak_gb, result.seconds))
            if result.returncode != getattr(step, "exit_code", 0):
                pytest.fail(f"{step.title()}\nexited {result.returncode} (expected {getattr(step, 'exit_code', 0)}) after {result.seconds:.0f} s "
                            f"(peak {result.peak_gb:.2f} GB):\n{result.output[-4000:]}")
            if result.peak_gb > step.peak_gb:
                pytest.fail(f"{step.title()}\npeak resident memory {result.peak_gb:.2f} GB is over its bound of "
                            f"{step.peak_gb:g} GB")
    finally:
        write_report(title, rows)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the checkout at BASE/albert_min, with BASE/shared -> the real ../shared."""
    base = tmp_path_factory.mktemp("user")
    os.symlink(SHARED, base / "shared")
    copy_checkout(str(base / "albert_min"))
    return base


def test_readme_as_written(checkout, tmp_path):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        runnable, skipped = examples(f.read())
    assert runnable and runnable[0].command.startswith("python3 -m pip install -e ."), \
        "the README's first example is the install + evaluate command"
    bin_dir = make_venv(str(tmp_path / "venv"))
    env = user_env(bin_dir, str(tmp_path / "cache"))
    print("not run:", *(f"line {line}: {why}" for line, why in skipped), sep="\n  ")
    run_all(runnable, str(checkout / "albert_min"), env, "README.md as written (a copy of the checkout)")


class Step:
    """A command of the installed-wheel test, with the same face as an Example."""
    def __init__(self, text, shell, peak_gb=4.0):
        self.text, self.command, self.peak_gb = text, shell, peak_gb

    def shell(self):
        return self.command

    def title(self):
        return self.text


CHECK_MODULES = textwrap.dedent("""
    import glob, os, sys
    import albert_min, tokenizer
    from albert_min import pipeline
    out = pipeline(os.path.join("weights", "sst2-small"))(["a gorgeous film", "a mess"])
    assert [o["label"] for o in out] == ["LABEL_1", "LABEL_0"], out
    ours = {name: getattr(m, "__file__", None) for name, m in sys.modules.items()
            if name.split(".")[0] in ("albert_min", "tokenizer")}
    outside = {name: f for name, f in ours.items() if not (f or "").startswith(sys.prefix + os.sep)}
    assert not outside, f"modules not loaded from the installed package ({sys.prefix}): {outside}"
    installed = os.path.dirname(albert_min.__file__)
    sources = sorted(os.path.relpath(p, installed) for ext in ("cc", "h")
                     for p in glob.glob(os.path.join(installed, "**", "*." + ext), recursive=True))
    expected = sorted(os.environ["KERNEL_SOURCES"].split(","))
    assert sources == expected, f"kernel sources installed {sources}, the checkout has {expected}"
    print(len(ours), "modules from", installed, "; kernel sources:", sources)
""")

def kernel_sources(source):
    """CHECK_MODULES's $KERNEL_SOURCES: the checkout's .cc / .h files below albert_min/, comma-separated."""
    found = sorted(os.path.relpath(os.path.join(d, f), source / "albert_min")
                   for d, _, files in os.walk(source / "albert_min") for f in files if f.endswith((".cc", ".h")))
    assert found, "the checkout has no kernel sources"
    return ",".join(found)


CHECK_KERNELS_BUILT = textwrap.dedent("""
    import glob, os
    built = glob.glob(os.path.join(os.environ["ALBERT_MIN_CACHE"], "kernels", "*", "*.so"))
    assert built, "the training step built no compiled kernels in " + os.environ["ALBERT_MIN_CACHE"]
    print("kernels built:", built)
""")


def test_installed_wheel(checkout, tmp_path):
    source = checkout / "albert_min"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                    str(source)], check=True)
    wheel = next((tmp_path / "dist").glob("albert_min-*.whl"))
    bin_dir = make_venv(str(tmp_path / "venv"))
    subprocess.run([os.path.join(bin_dir, "python3"), "-m", "pip", "install", "-q", str(wheel)], check=True)

    # The user's own folder, outside the checkout: model folders and data beside it, no albert_min/ in it.
    user = tmp_path / "elsewhere" / "project"
    user.mkdir(parents=True)
    os.symlink(checkout / "shared", tmp_path / "elsewhere" / "shared")
    shutil.copytree(source / "weights", user / "weights", symlinks=True)
    env = user_env(bin_dir, str(tmp_path / "cache"))
    env["KERNEL_SOURCES"] = kernel_sources(source)

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        python_blocks = [e for e in examples(f.read())[0] if e.lang == "python" or "-m albert_min." in e.command]
    steps = [Step("import from the installed package, pipeline(), kernel sources installed",
                  "python3 -c " + shlex.quote(CHECK_MODULES))]
    steps += python_blocks
    steps += [Step("kernels built in a fresh cache by the training step", "python3 -c " + shlex.quote(CHECK_KERNELS_BUILT)),
              Step("the modules again, after the README's blocks", "python3 -c " + shlex.quote(CHECK_MODULES))]
    assert any("Trainer" in e.command for e in python_blocks), "the README shows a training step from Python"
    run_all(steps, str(user), env, f"the installed wheel, from {user}")
