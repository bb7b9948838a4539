"""Mixed precision (train.py --amp, albert_min.training.mixed_precision) on CPU: the loss tracks float32's,
an overflowing float16 step is skipped and counted, a resume is exact, the checkpoints stay float32.

What MindSpore 2.10's CPU kernels run is in docs/mixed-precision.md; float16 is the
dtype these tests train in. Nothing here ran on an accelerator.
"""

import json
import os

import numpy as np
import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

import train  # noqa: E402
from albert_min.model.folder import read_checkpoint

# 50 steps of the tiny model (lr 1e-3, dropout off, same seed and batches): every step's loss under
# --amp float16 within this of float32's. Measured on CPU: max |difference| 7.6e-5 (O2, O3), 1.1e-4 (O1),
# 9.6e-5 (O2 in PyNative).
LOSS_TOLERANCE = 1e-3


def train_steps(tmp_path, name, *extra, steps=50):
    """Run ``steps`` steps of the tiny model (an epoch of 63: the run stops mid-epoch, so the state keeps
    every step's loss); -> (state.json, the output's model.ckpt, the state's model.ckpt and optimizer.ckpt)."""
    tsv = tmp_path / "train.tsv"
    if not tsv.exists():
        sentiment_tsv(tsv, 1008, seed=5)
    output = str(tmp_path / name)
    train.main(["--train", str(tsv), "--output", output, "--max-steps", str(steps), "--batch-size", "16",
                "--lr", "1e-3", "--dropout", "0", *TINY_MODEL, *extra])
    state = json.load(open(os.path.join(output + ".state", "state.json")))
    checkpoints = [read_checkpoint(os.path.join(folder, name)) for folder, name in
                   ((output, "model.ckpt"), (output + ".state", "model.ckpt"), (output + ".state", "optimizer.ckpt"))]
    return state, checkpoints


def assert_float32(checkpoints):
    for checkpoint in checkpoints:
        for name, array in checkpoint.items():
            assert array.dtype != np.float16 and str(array.dtype) != "bfloat16", name
            if np.issubdtype(array.dtype, np.floating):
                assert array.dtype == np.float32, name


@pytest.mark.parametrize("level, mode", [("O1", []), ("O2", []), ("O3", []),
                                         pytest.param("O2", ["--pynative"], marks=pytest.mark.slow)],   # 85 s in PyNative
                         ids=["O1", "O2", "O3", "O2-pynative"])
def test_fifty_amp_steps_track_the_float32_loss_and_save_float32(tmp_path, level, mode):
    """In PyNative (--pynative) too: there the additive attention mask once gave NaN (0 * float16's -inf)."""
    reference, _ = train_steps(tmp_path, "float32", *mode)
    state, checkpoints = train_steps(tmp_path, level, "--amp", level, "--amp-dtype", "float16", *mode)
    full, mixed = np.array(reference["epoch_losses"]), np.array(state["epoch_losses"])
    assert len(full) == len(mixed) == 50
    print(f"{level}: max |loss difference| {np.abs(mixed - full).max():.2e}")
    assert np.abs(mixed - full).max() < LOSS_TOLERANCE
    assert not np.array_equal(mixed, full)    # it did run in float16
    assert_float32(checkpoints)
    assert state["skipped_steps"] == 0 and state["loss_scale"] == {"scale": 65536.0, "counter": 50}
    assert state["history"][-1]["skipped_steps"] == 0


def test_an_overflowing_float16_step_is_skipped_leaving_the_weights_and_counted(tmp_path):
    """A loss scale of 2**40 makes the float16 gradients inf: the step changes nothing but the scale
    (halved) and the step counter (the schedule moves on); steps go on being skipped until the scale fits."""
    import mindspore as ms
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.tasks import get_task
    from albert_min.training.trainer import Trainer
    from albert_min.training.config import TrainingConfig
    from albert_min.training.state import optimizer_state
    from tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(os.path.join(ROOT, "weights", "sst2-small", "spiece.model"))
    ms.set_seed(0)
    model = AlbertForSequenceClassification(AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=16,
                                                         hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                         intermediate_size=48, classifier_dropout_prob=0.0))
    task = get_task("sst2")
    train_set = task.prepare(task.read(sentiment_tsv(tmp_path / "train.tsv", 64, seed=5)), tokenizer, max_length=24)
    config = TrainingConfig(output=str(tmp_path / "o"), epochs=20, batch_size=16, amp="O2", amp_dtype="float16",
                            loss_scale=2.0 ** 40, quiet=True)
    trainer = Trainer(config, model, task, train_set)
    batch = next(task.train_batches(train_set, 0, 16, config.seed, trainer.parallel))

    def snapshot():
        return {n: p.asnumpy().copy() for n, p in {**{p.name: p for p in model.get_parameters()},
                                                   **optimizer_state(model, trainer.optimizer)}.items()}

    before = snapshot()
    loss = trainer.step(batch)
    after = snapshot()
    assert np.isfinite(loss) and trainer.state["skipped_steps"] == 1
    assert float(trainer.loss_scaler.scale_value.asnumpy()) == 2.0 ** 39
    for name, value in before.items():
        if name != "global_step":
            assert np.array_equal(after[name], value), f"{name} changed on a skipped step"
    assert int(after["global_step"][0]) == 1   # the learning-rate schedule moved on

    skipped = 1
    while trainer.state["skipped_steps"] == skipped:   # halve until the gradients fit float16
        trainer.step(batch)
        skipped += 1
        assert skipped < 30
    last = snapshot()
    assert any(not np.array_equal(last[n], before[n]) for n in before if n != "global_step")
    assert float(trainer.loss_scaler.scale_value.asnumpy()) == 2.0 ** (40 - trainer.state["skipped_steps"])


def test_resuming_a_float16_run_repeats_it_exactly_loss_scale_included(tmp_path):
    """--max-minutes tiny stops the run after its first step (an overflow: --loss-scale 2**22 is too big),
    --resume finishes it: the same weights, moments, losses, loss scale and skipped-step count as one run."""
    amp = ["--amp", "O2", "--amp-dtype", "float16", "--loss-scale", str(2.0 ** 22)]
    whole_state, whole = train_steps(tmp_path, "whole", *amp, steps=12)
    train_steps(tmp_path, "parts", *amp, "--max-minutes", "1e-6", steps=12)
    first = json.load(open(tmp_path / "parts.state" / "state.json"))
    assert first["step"] == 1 and first["skipped_steps"] == 1
    train.main(["--output", str(tmp_path / "parts"), "--resume"])
    parts_state = json.load(open(tmp_path / "parts.state" / "state.json"))
    parts = [read_checkpoint(str(tmp_path / f)) for f in ("parts/model.ckpt", "parts.state/model.ckpt",
                                                          "parts.state/optimizer.ckpt")]
    assert whole_state["skipped_steps"] > 1
    for key in ("step", "epoch_losses", "loss_scale", "skipped_steps"):
        assert parts_state[key] == whole_state[key], key
    for a, b in zip(whole, parts):
        assert sorted(a) == sorted(b)
        for name in a:
            assert np.array_equal(a[name], b[name]), name
    assert_float32(parts)


def test_bfloat16_on_cpu_is_one_error_line_before_any_work(tmp_path, capsys):
    """MindSpore 2.10's CPU has no bfloat16 MatMul/BatchMatMul/Softmax/Sigmoid/Erf kernel: refused by name,
    before a tokenizer is trained; the flag stays for GPU/Ascend."""
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    with pytest.raises(SystemExit) as exit_:
        train.main(["--train", tsv, "--output", str(tmp_path / "o"), "--amp", "O2", "--amp-dtype", "bfloat16",
                    *TINY_MODEL])
    assert str(exit_.value) == ("error: --amp O2 --amp-dtype bfloat16: MindSpore 2.10.0's CPU kernels do not run "
                                "bfloat16 (MatMul, BatchMatMul, Softmax, Sigmoid and Erf have no bfloat16 CPU "
                                "kernel); use --amp bf16 (bfloat16 matrix products in albert_min's kernels) or "
                                "--amp-dtype float16 on CPU, or this setting on GPU/Ascend")
    assert "SentencePiece" not in capsys.readouterr().out and not (tmp_path / "o").exists()


@pytest.mark.parametrize("flags, message", [
    (["--amp-dtype", "float16"], "--amp-dtype: mixed precision is off (--amp O0); add --amp O1, O2 or O3"),
    (["--loss-scale", "128"], "--loss-scale: mixed precision is off (--amp O0); add --amp O1, O2 or O3"),
    (["--amp", "O1", "--amp-dtype", "bfloat16", "--loss-scale", "64"],
     "--loss-scale is for --amp-dtype float16 (bfloat16 needs no loss scale), not bfloat16"),
])
def test_amp_flags_that_would_do_nothing_are_refused(tmp_path, capsys, flags, message):
    """--amp-dtype without --amp once trained float32 without a word: now a usage error (exit 2)."""
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    with pytest.raises(SystemExit) as exit_:
        train.main(["--train", tsv, "--output", str(tmp_path / "o"), *flags, *TINY_MODEL])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f": error: {message}")   # prog: error: ...
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ --amp bf16: the kernels' bf16 products (CPU)
# 50 steps of the tiny model under --amp bf16: every step's loss within this of float32's (measured on CPU:
# max |difference| 8.8e-4).
BF16_LOSS_TOLERANCE = 5e-3


@pytest.fixture(scope="module")
def bf16_library(library):
    from albert_min.model.kernels import bf16
    if not bf16.has_bf16_gemm(library):
        pytest.skip("MindSpore's oneDNN lacks dnnl_gemm_bf16bf16f32 here")
    return library


def test_fifty_bf16_steps_track_the_float32_loss_and_save_float32(tmp_path, bf16_library):
    reference, _ = train_steps(tmp_path, "float32")
    state, checkpoints = train_steps(tmp_path, "bf16", "--amp", "bf16")
    full, mixed = np.array(reference["epoch_losses"]), np.array(state["epoch_losses"])
    assert len(full) == len(mixed) == 50
    print(f"bf16: max |loss difference| {np.abs(mixed - full).max():.2e}")
    assert np.abs(mixed - full).max() < BF16_LOSS_TOLERANCE
    assert not np.array_equal(mixed, full)    # it did multiply in bfloat16
    assert_float32(checkpoints)
    assert state["cpu"]["bf16_gemms"] is True and "bf16_gemms" not in reference["cpu"]
    assert state["settings"]["training"]["amp"] == "bf16" and "loss_scale" not in state


def test_resuming_a_bf16_run_repeats_it_exactly(tmp_path, bf16_library):
    """--max-minutes tiny stops the run after its first step, --resume finishes it (--amp bf16 from the
    saved settings): the same weights, moments and losses as one run, dropout on (the kernels' masks)."""
    dropout = ["--dropout", "0.1"]
    whole_state, whole = train_steps(tmp_path, "whole", "--amp", "bf16", *dropout, steps=12)
    train_steps(tmp_path, "parts", "--amp", "bf16", *dropout, "--max-minutes", "1e-6", steps=12)
    assert json.load(open(tmp_path / "parts.state" / "state.json"))["step"] == 1
    train.main(["--output", str(tmp_path / "parts"), "--resume"])
    parts_state = json.load(open(tmp_path / "parts.state" / "state.json"))
    parts = [read_checkpoint(str(tmp_path / f)) for f in ("parts/model.ckpt", "parts.state/model.ckpt",
                                                          "parts.state/optimizer.ckpt")]
    for key in ("step", "epoch_losses", "cpu"):
        assert parts_state[key] == whole_state[key], key
    for a, b in zip(whole, parts):
        assert sorted(a) == sorted(b)
        for name in a:
            assert np.array_equal(a[name], b[name]), name


def test_bf16_without_the_gemm_is_one_error_line_before_any_work(tmp_path, capsys, monkeypatch, library):
    from albert_min.model.kernels import bf16
    monkeypatch.setattr(bf16, "has_bf16_gemm", lambda path: False)
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    with pytest.raises(SystemExit) as exit_:
        train.main(["--train", tsv, "--output", str(tmp_path / "o"), "--amp", "bf16", *TINY_MODEL])
    assert str(exit_.value) == ("error: --amp bf16: the kernels were built without oneDNN's dnnl_gemm_bf16bf16f32 "
                                "(mindspore/lib/libdnnl.so.3 missing or without it); train in float32 (no --amp)")
    assert "SentencePiece" not in capsys.readouterr().out and not (tmp_path / "o").exists()


def test_a_bf16_state_resumes_only_with_bf16_products():
    from albert_min.model.folder import CheckpointError
    from albert_min.training.state import check_same_cpu_setup
    check_same_cpu_setup({"threads": 1, "kernels": True, "bf16_gemms": True},
                         {"threads": 1, "kernels": True, "bf16_gemms": True}, "s")
    check_same_cpu_setup({"threads": 1, "kernels": True, "bf16_gemms": False}, {"threads": 1, "kernels": True}, "s")
    with pytest.raises(CheckpointError, match=r"^s/state.json: the run trained with bf16 matrix products "
                                              r"\(--amp bf16\) and this process computes them in float32"):
        check_same_cpu_setup({"threads": 1, "kernels": True, "bf16_gemms": True}, {"threads": 1, "kernels": True}, "s")


@pytest.mark.parametrize("flags", [["--amp-dtype", "bfloat16"], ["--loss-scale", "64"]])
def test_bf16_flags_that_would_do_nothing_are_refused(tmp_path, capsys, flags):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    with pytest.raises(SystemExit) as exit_:
        train.main(["--train", tsv, "--output", str(tmp_path / "o"), "--amp", "bf16", *flags, *TINY_MODEL])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f": error: {flags[0]}: --amp bf16 computes in bfloat16 with no loss scale; they are for --amp O1, O2 or O3")
