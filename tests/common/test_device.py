"""--device / $ALBERT_MIN_DEVICE / pipeline(device=...): CPU runs; GPU and Ascend, which the MindSpore
installed here was not built for, are one error line naming the device and the build (issue 28, part 3).

Only CPU can run on this machine: the GPU and Ascend paths are checked up to the refusal, and the
CPU-only parts through the function that decides them, never with a faked accelerator.
"""

import argparse
import json
import os
import subprocess
import sys

import mindspore as ms
import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min.model import kernels
from albert_min import pipeline
from albert_min.common.device import (DEVICES, ENVIRONMENT, HOST_BLOCKING, DeviceError, applies_cpu_only_parts, available_devices,
                                      chosen_device, device_flag, use_device)
from helpers.reference_model import accelerates
from albert_min.training.run_config import settings_for_resume
from albert_min.training.run import saved_run

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")
MISSING = [d for d in DEVICES if d not in available_devices()]   # here: GPU and Ascend


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny run trained with --device cpu (any case), and its data."""
    tmp = tmp_path_factory.mktemp("device_run")
    args = ["--train", sentiment_tsv(tmp / "train.tsv", 48, seed=3),
            "--dev", sentiment_tsv(tmp / "dev.tsv", 16, seed=4), "--epochs", "1", "--batch-size", "16", *TINY_MODEL]
    state = train.main(args + ["--output", str(tmp / "model"), "--device", "cpu"])
    return {"tmp": tmp, "args": args, "output": str(tmp / "model"), "dev": args[3], "state": state}


@pytest.fixture(autouse=True)
def _no_device_in_the_environment(monkeypatch):
    monkeypatch.delenv(ENVIRONMENT, raising=False)


def test_names_in_any_case_unknown_ones_name_the_flag():
    assert [device_flag(t) for t in ("cpu", "Gpu", "ASCEND", " CPU ")] == ["CPU", "GPU", "Ascend", "CPU"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown device 'tpu': choose CPU, GPU, Ascend"):
        device_flag("tpu")


def test_default_is_the_environment_variable_else_cpu(monkeypatch):
    assert chosen_device()[0] == "CPU"
    monkeypatch.setenv(ENVIRONMENT, "gpu")
    assert chosen_device() == ("GPU", f"{ENVIRONMENT}=gpu")
    assert chosen_device("ascend")[0] == "Ascend"            # a name given wins over the variable
    monkeypatch.setenv(ENVIRONMENT, "tpu")
    with pytest.raises(DeviceError, match=f"{ENVIRONMENT}=tpu: unknown device"):
        chosen_device()


def test_on_cpu_ops_launch_on_the_calling_thread():
    """use_device("CPU") (conftest) turns off MindSpore's launch queue, whose caller busy-waited on it and
    took a core from the kernels (docs/int8.md: the dynamic-shape graph 1.25 s against a static 0.84 s)."""
    from mindspore._c_expression import RuntimeConf
    assert RuntimeConf.get_instance().is_launch_blocking()


def test_cpu_only_parts_apply_on_cpu_alone():
    assert [applies_cpu_only_parts(d) for d in DEVICES] == [True, False, False]


def test_compiled_kernels_only_where_mindspore_runs_on_cpu(monkeypatch):
    """The kernels are CPU code called through ops.Custom: off CPU the layers must use MindSpore's ops."""
    from albert_min.common import device
    if kernels.library() is None:
        pytest.skip("the kernels cannot be built here: nothing to switch off")
    monkeypatch.setattr(device, "current_device", lambda: "GPU")   # what kernels asks; nothing runs on it
    assert kernels.library() is None and not accelerates()


def test_this_mindspore_is_the_cpu_build_the_tests_assume():
    assert available_devices() == ["CPU"], "a MindSpore with another backend: the refusals below do not apply"


@pytest.mark.parametrize("device", MISSING)
def test_a_device_mindspore_was_not_built_for_is_refused_and_the_process_stays_on_cpu(device):
    with pytest.raises(DeviceError) as err:
        use_device(device.lower())
    message = str(err.value)
    assert message.startswith(f"device {device}: the installed MindSpore {ms.__version__} (backends here: CPU) "
                              f"cannot run on {device}") and "\n" not in message
    assert use_device() == "CPU" and ms.get_context("device_target") == "CPU"


def run_script(script, tmp_path, *flags, env=None):
    """``script`` (train.py, evaluate.py, albert_min.convert or .export) on small inputs, writing to tmp_path/out*."""
    out = str(tmp_path / "out")
    args = {"evaluate.py": ["--model", SST2_SMALL, "--quiet"],
            "train.py": ["--train", sentiment_tsv(tmp_path / "t.tsv", 8, seed=0), "--output", out, *TINY_MODEL],
            "albert_min.convert": [os.path.join(ROOT, "tests", "fixtures", "tiny_pretraining"), out],
            "albert_min.export": [SST2_SMALL, out + ".mindir"]}[script]
    command = ["-m", script] if script.startswith("albert_min.") else [script]
    return subprocess.run([sys.executable, *command, *args, *flags], cwd=ROOT, capture_output=True, text=True,
                          env=env)


@pytest.mark.parametrize("script, device", [("evaluate.py", "GPU"), ("evaluate.py", "Ascend"), ("train.py", "gpu"),
                                            ("albert_min.convert", "GPU"), ("albert_min.export", "GPU")])
def test_scripts_refuse_it_in_one_line_before_any_work(script, device, tmp_path):
    result = run_script(script, tmp_path, "--device", device)
    name = device_flag(device)
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: --device {name}: the installed MindSpore {ms.__version__} (backends here: CPU) "
                           f"cannot run on {name}"), line
    assert not [p for p in os.listdir(tmp_path) if p.startswith("out")]   # nothing written


def test_the_environment_variable_is_named_in_its_errors(tmp_path):
    def evaluate_with(value):
        return subprocess.run([sys.executable, "evaluate.py", "--model", SST2_SMALL], cwd=ROOT, capture_output=True,
                              text=True, env=dict(os.environ, **{ENVIRONMENT: value}))
    for value, wanted in (("GPU", f"error: {ENVIRONMENT}=GPU: the installed MindSpore {ms.__version__}"),
                          ("tpu", f"error: {ENVIRONMENT}=tpu: unknown device; choose CPU, GPU, Ascend")):
        result = evaluate_with(value)
        assert result.returncode == 2 and result.stderr.splitlines() == [result.stderr.strip()]
        assert result.stderr.startswith(wanted), result.stderr


def test_an_unknown_device_is_a_usage_error_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--model", SST2_SMALL, "--device", "tpu"])
    assert exit_info.value.code == 2
    assert "error: argument --device: unknown device 'tpu'" in capsys.readouterr().err


def test_cpu_runs_train_evaluate_and_pipeline(run, monkeypatch, capsys):
    assert run["state"]["step"] == 3
    metrics = evaluate.main(["--model", run["output"], "--data", run["dev"], "--json", "--device", "CPU"])
    monkeypatch.setenv(ENVIRONMENT, "cpu")               # the variable, honoured
    assert evaluate.main(["--model", run["output"], "--data", run["dev"], "--json"])["accuracy"] == \
        metrics["accuracy"]
    capsys.readouterr()
    assert pipeline(SST2_SMALL, device="cpu")("a gorgeous film")["label"] == pipeline(SST2_SMALL)("a gorgeous film")[
        "label"]
    with pytest.raises(DeviceError, match=r"device GPU: the installed MindSpore .* cannot run on GPU"):
        pipeline(SST2_SMALL, device="GPU")


def test_the_device_is_not_a_setting_of_the_run(run):
    """A resume may run on another device: the state records none, and --device is never compared."""
    saved, _, path = saved_run(run["output"] + ".state")
    assert "device" not in saved and "quiet" in saved
    assert settings_for_resume(saved, {"device": "GPU"}, path)["epochs"] == saved["epochs"]   # not refused
    with open(path) as f:
        assert "device" not in json.load(f)["settings"]["run"]


def test_resume_with_the_device_given_anew(run, tmp_path):
    import shutil
    for suffix in ("", ".state"):
        shutil.copytree(run["output"] + suffix, str(tmp_path / "model") + suffix)
    state = train.main(["--output", str(tmp_path / "model"), "--resume", "--epochs", "2", "--device", "CPU"])
    assert state["epoch"] == 2 and state["step"] == 6


# ------------------------------------------------------------------ every environment variable albert_min reads
BAD_VARIABLES = [   # (variable, a value it refuses, the start of the message)
    ("ALBERT_MIN_CPU_THREADS", "²", "ALBERT_MIN_CPU_THREADS=²: not a thread count; give a whole number from 1 to 256 "
                                    "(or unset ALBERT_MIN_CPU_THREADS for 1)"),      # isdigit, yet int() refused it
    ("ALBERT_MIN_CPU_THREADS", "٣", "ALBERT_MIN_CPU_THREADS=٣: not a thread count"),  # int() took it as 3
    ("ALBERT_MIN_KERNELS", "maybe", "ALBERT_MIN_KERNELS=maybe: not on or off; give one of on, 1, true, yes, off, 0, "
                                    "false, no (any case) (or unset ALBERT_MIN_KERNELS for on)"),   # was: on
    ("ALBERT_MIN_DEVICE", "tpu", "ALBERT_MIN_DEVICE=tpu: unknown device; choose CPU, GPU, Ascend"),
]


@pytest.mark.parametrize("variable, value, message", BAD_VARIABLES, ids=lambda v: v if v.isascii() else ascii(v))
def test_a_bad_environment_variable_is_an_error_naming_it_from_pipeline(variable, value, message, monkeypatch):
    """Issue 44: ALBERT_MIN_CPU_THREADS=² raised int()'s ValueError, ALBERT_MIN_KERNELS=maybe meant on."""
    from albert_min.common.errors import AlbertMinError
    monkeypatch.setenv(variable, value)
    with pytest.raises(AlbertMinError) as err:
        pipeline(SST2_SMALL)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("script", ["train.py", "evaluate.py", "albert_min.convert", "albert_min.export"])
def test_scripts_print_one_error_line_for_a_bad_environment_variable(script, tmp_path):
    for variable, value, message in BAD_VARIABLES[:3:2]:
        result = run_script(script, tmp_path, env={**os.environ, variable: value})
        assert result.returncode == 2 and result.stderr.splitlines() == [f"error: {message}"], result.stderr[-2000:]
        assert not [p for p in os.listdir(tmp_path) if p.startswith("out")]   # nothing written


def test_msruns_worker_count_and_the_cache_folder(monkeypatch, tmp_path):
    from albert_min.common.device import default_compile_cache
    from albert_min.common.parallel import ParallelError, msrun_workers
    from helpers.tiny_runs import MSRUN_ENV
    for name, value in {**MSRUN_ENV, "MS_WORKER_NUM": "two"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ParallelError, match=r"^MS_WORKER_NUM=two: not msrun's worker count; give a whole number"):
        msrun_workers()                       # was None: "--data-parallel must run under msrun"
    monkeypatch.setenv("MS_WORKER_NUM", " 2 ")
    assert msrun_workers() == 2
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ALBERT_MIN_CACHE", "~/graphs")   # quoted in a shell: ~ is still the home folder
    assert default_compile_cache() == str(tmp_path / "graphs")
    monkeypatch.setenv("ALBERT_MIN_CACHE", " ")
    assert default_compile_cache() == str(tmp_path / ".cache" / "albert_min" / "compile")


WAITING_SCRIPT = """
import resource, sys, time
sys.path.insert(0, sys.argv[1])
from albert_min.common.device import use_device
use_device("CPU")
import numpy as np
import mindspore as ms
from mindspore import ops
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step

config = AlbertConfig(vocab_size=100, embedding_size=32, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=512, max_position_embeddings=128)
ms.set_seed(0)
model = AlbertForSequenceClassification(config)
model.set_train(True)
optimizer = make_optimizer(model, linear_warmup_decay(1e-4, 100, 0.1), 0.01)


def loss_fn(ids, types, mask, labels):
    return ops.cross_entropy(model(ids, types, mask), labels)


step = make_train_step(loss_fn, optimizer, 1.0)
rng = np.random.default_rng(0)
batch = [ms.Tensor(rng.integers(5, 100, (16, 128)).astype(np.int32)), ms.Tensor(np.zeros((16, 128), np.int32)),
         ms.Tensor(np.ones((16, 128), np.int32)), ms.Tensor(rng.integers(0, 2, 16).astype(np.int32))]
step(*batch).asnumpy()
usage, main = resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
for _ in range(10):
    step(*batch).asnumpy()
main, after = time.thread_time() - main, resource.getrusage(resource.RUSAGE_SELF)
print(main, after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
"""


def test_the_python_thread_sleeps_while_a_train_step_runs(tmp_path):
    """use_device("CPU") sets MS_DEV_HOST_BLOCKING_RUN=1 (host_blocking_run): without it MindSpore's calling
    thread busy-waits for the graph (about a third of the process's CPU time in this step, 40% of the
    base model's), taking a core's share from the kernels on a 2-core machine."""
    env = {k: v for k, v in os.environ.items() if k != HOST_BLOCKING}
    script = tmp_path / "waiting.py"               # MindSpore compiles a graph from a file's source
    script.write_text(WAITING_SCRIPT)
    out = subprocess.run([sys.executable, str(script), ROOT], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    main, total = (float(x) for x in out.stdout.split()[-2:])
    assert main < 0.1 * total, (main, total)
