"""The installed wheel on every Python that MindSpore 2.10.0 ships wheels for (marker ``wheels``: not in
the default run; ``.ci/run`` runs this stage after the README stage, ``python3 -m pytest -m wheels``).

The wheel is built once from a copy of the checkout; for each of Python 3.10, 3.11 and 3.12 a new virtual
environment WITHOUT the system's site-packages gets it with its dependencies from PyPI (mindspore too: the
pip cache makes a rerun fast), and from a folder outside the checkout it is used as a user would:

1. every ``albert_min`` / ``tokenizer`` module loads from that environment, and ``pipeline()`` labels two
   sentences;
2. evaluate on SST-2 dev gives the README's numbers for ``weights/sst2-small`` (accuracy 81.42, F1 82.08);
3. a 20-step training run, and evaluate on the model it kept;
4. the convert round trip (``--to hf`` and back) scores the same as the folder it started from.

train and evaluate run through ``entry_command``: ``python -m albert_min.train`` once the wheel has
that module, else the checkout's ``train.py`` under ``python -I`` (no script folder on sys.path, so the
package still comes from the environment). Each interpreter is found as ``pythonX.Y`` (with pyenv,
the newest installed X.Y.*); a missing one fails the stage rather than skipping it.

The table of each step's peak memory and time is written to ``runs/python-versions.md``.
"""

import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest

from helpers.readme_examples import report, run_measured
from test_readme_examples import CHECK_MODULES, SHARED, checkout, kernel_sources, user_env  # noqa: F401 (a fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "runs", "python-versions.md")
VERSIONS = ("3.10", "3.11", "3.12")
README_SST2 = {"accuracy": 0.8142, "f1": 0.8208}    # the README's numbers for weights/sst2-small
STEP_TIMEOUT_S = 20 * 60                             # one step (the first install downloads mindspore)

pytestmark = [pytest.mark.wheels,
              pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED, "data")),
                                 reason="../shared/data is not beside this checkout")]


def find_python(version):
    """The path of a Python ``version`` ("3.10") interpreter: pyenv's newest X.Y.*, else ``pythonX.Y`` on PATH."""
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("pyenv") else ""
    found = sorted(glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python" + version)),
                   key=lambda p: [int(x) for x in p.split(os.sep)[-3].split(".") if x.isdigit()]) if root else []
    candidates = found[-1:] + [shutil.which("python" + version)]
    for path in filter(None, candidates):
        probe = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return path
    pytest.fail(f"no Python {version} here (pyenv or python{version} on PATH): the stage tests 3.10, 3.11 and 3.12")


def entry_command(name, source):
    """How a user runs train / evaluate from the installed package: ``python -m albert_min.NAME`` once
    the package has it, until then the checkout's NAME.py with ``-I`` (the script's folder not on
    sys.path, so albert_min comes from the environment)."""
    if os.path.isfile(os.path.join(source, "albert_min", name + ".py")):
        return f"python3 -m albert_min.{name}"
    return f"python3 -I {shlex.quote(os.path.join(source, name + '.py'))}"


class Step:
    def __init__(self, text, shell, peak_gb=4.0):
        self.text, self.command, self.peak_gb = text, shell, peak_gb


CHECK_CLEAN = textwrap.dedent("""
    import os, sys
    import mindspore   # a clean environment: MindSpore too is its own, not the system's
    assert mindspore.__file__.startswith(sys.prefix + os.sep), mindspore.__file__
    print(sys.version.split()[0], "MindSpore", mindspore.__version__, "from", os.path.dirname(mindspore.__file__))
""")

CHECK_SCORES = textwrap.dedent("""
    import json, sys
    got, want = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
    wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) is None or abs(got[k] - v) > 5e-5}
    assert not wrong, f"{sys.argv[1]}: (got, expected) {wrong}"
    print(sys.argv[1], {k: got[k] for k in want})
""")


def check_scores(path, want):
    return f"python3 -c {shlex.quote(CHECK_SCORES)} {path} {shlex.quote(json.dumps(want))}"


def user_steps(evaluate, train, data):
    sst2 = f"{data}/sst2"
    return [
        Step("MindSpore from the clean environment", "python3 -c " + shlex.quote(CHECK_CLEAN)),
        Step("modules from the environment, pipeline(), kernel sources", "python3 -c " + shlex.quote(CHECK_MODULES)),
        Step("evaluate weights/sst2-small on SST-2 dev: the README's numbers",
             f"{evaluate} --data {sst2}/dev.tsv --model weights/sst2-small --json > sst2.json && "
             + check_scores("sst2.json", README_SST2)),
        Step("train 20 steps",
             f"head -n 641 {sst2}/train.tsv > train-640.tsv && "
             f"{train} --train train-640.tsv --dev {sst2}/dev.tsv --task sst2 --output runs/quick "
             "--vocab-size 2000 --layers 2 --max-length 48 --batch-size 32 --max-steps 20 --quiet"),
        Step("evaluate the trained model", f"{evaluate} --model runs/quick --data {sst2}/dev.tsv --json > quick.json"
             " && python3 -c \"import json; print(json.load(open('quick.json')))\""),
        Step("convert --to hf", "python3 -m albert_min.convert --to hf weights/sst2-small runs/sst2-small-hf"),
        Step("convert back", "python3 -m albert_min.convert runs/sst2-small-hf runs/sst2-small-back"),
        Step("evaluate the round trip: the same numbers",
             f"{evaluate} --model runs/sst2-small-back --data {sst2}/dev.tsv --json > back.json && "
             + check_scores("back.json", README_SST2)),
    ]


@pytest.fixture(scope="module")
def wheel(checkout, tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(checkout / "albert_min")], check=True)
    return next(dist.glob("albert_min-*.whl"))


@pytest.mark.parametrize("version", VERSIONS)
def test_wheel_on_python(version, wheel, checkout, tmp_path):
    python = find_python(version)
    source = checkout / "albert_min"
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)          # no --system-site-packages
    bin_dir = str(venv / "bin")

    # The user's own folder, outside the checkout: model folders and data beside it, no albert_min/ in it.
    user = tmp_path / "elsewhere" / "project"
    user.mkdir(parents=True)
    shutil.copytree(source / "weights", user / "weights", symlinks=True)
    env = user_env(bin_dir, str(tmp_path / "cache"))
    env["KERNEL_SOURCES"] = kernel_sources(source)     # CHECK_MODULES: every one installed
    steps = [Step(f"install the wheel and its dependencies into a clean Python {version} environment",
                  f"python3 -m pip install -q {shlex.quote(str(wheel))}", peak_gb=2.0)]
    steps += user_steps(entry_command("evaluate", str(source)), entry_command("train", str(source)),
                        shlex.quote(os.path.join(SHARED, "data")))
    rows = []
    try:
        for step in steps:
            result = run_measured(step.command, str(user), env, timeout_s=STEP_TIMEOUT_S)
            rows.append((step.text, result.peak_gb, result.seconds))
            print(f"python {version}: {step.text}: {result.returncode}, {result.peak_gb:.2f} GB, "
                  f"{result.seconds:.0f} s", flush=True)
            if result.returncode != 0:
                pytest.fail(f"Python {version}: {step.text}\nexited {result.returncode} after {result.seconds:.0f} s:\n"
                            f"{result.output[-4000:]}")
            if result.peak_gb > step.peak_gb:
                pytest.fail(f"Python {version}: {step.text}\npeak resident memory {result.peak_gb:.2f} GB is over "
                            f"its bound of {step.peak_gb:g} GB")
    finally:
        os.makedirs(os.path.dirname(REPORT), exist_ok=True)
        title = f"the wheel on Python {version} ({python}), clean environment, from {user}"
        with open(REPORT, "a", encoding="utf-8") as f:
            f.write(f"\n## {title}\n\n{report(rows)}\n")
        print(f"\n{title}\n{report(rows)}")
