"""Pre-training pieces: n-gram masking statistics, SOP/NSP pairs, the held-out split,
sharing strategies (Table 4), factorized E, and --max-minutes stop + resume."""

import collections
import json
import os
import random
import sys

import numpy as np
import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import corpus, tiny

sys.path.insert(0, ROOT)
import train  # noqa: E402
from albert_min.model import kernels as albert_kernels  # noqa: E402
from albert_min.tasks.pretraining import features as pretraining_features  # noqa: E402
from albert_min.tasks.pretraining import loss as pretraining_loss  # noqa: E402
from albert_min.tasks.pretraining import metric as pretraining_metric  # noqa: E402
from albert_min.tasks.pretraining import reading as pretraining_reading  # noqa: E402
from albert_min.training.trainer import Trainer  # noqa: E402
from albert_min.model.config import AlbertConfig, ConfigError, SHARING_STRATEGIES  # noqa: E402
from albert_min.model.modeling import AlbertModel, count_parameters  # noqa: E402
from albert_min.model.heads import AlbertForPreTraining  # noqa: E402

SPECIAL = {0, 1, 2, 3, 4}   # <pad> <unk> [CLS] [SEP] [MASK]
MASK = 4


def words_sequence(rng, n_words, max_pieces_per_word=3, vocab=200):
    """[CLS] a [SEP] b [SEP] with words of 1-3 pieces; ids >= 100 start a word, 5..99 continue one."""
    ids = [2]
    for w in range(n_words):
        ids.append(rng.randrange(100, vocab))
        ids += [rng.randrange(5, 100) for _ in range(rng.randrange(max_pieces_per_word))]
        if w == n_words // 2:
            ids.append(3)
    return ids + [3]


WORD_START = np.array([i >= 100 or i in SPECIAL for i in range(200)])
RANDOM_IDS = np.arange(5, 200)


def mask_many(n, seed=0, max_pieces_per_word=3, length_words=40):
    rng, np_rng = random.Random(seed), np.random.default_rng(seed)
    for _ in range(n):
        ids = words_sequence(rng, length_words, max_pieces_per_word)
        yield ids, pretraining_features.ngram_mask(ids, WORD_START, SPECIAL, RANDOM_IDS, MASK, np_rng, max_predictions=1000)


def test_ngram_masking_predicts_15_percent_and_never_special_tokens():
    fractions = []
    for ids, (masked, positions, originals) in mask_many(300):
        assert len(masked) == len(ids) and positions == sorted(set(positions))
        assert all(ids[i] not in SPECIAL for i in positions)
        assert originals == [ids[i] for i in positions]
        assert all(m == o for i, (m, o) in enumerate(zip(masked, ids)) if i not in set(positions))
        assert len(positions) <= round(0.15 * len(ids))
        fractions.append(len(positions) / len(ids))
    assert 0.13 < np.mean(fractions) <= 0.15


def test_ngram_masking_80_10_10():
    outcome = collections.Counter()
    for ids, (masked, positions, _) in mask_many(600):
        for i in positions:
            outcome["mask" if masked[i] == MASK else "same" if masked[i] == ids[i] else "random"] += 1
    total = sum(outcome.values())
    # A random replacement can draw the original piece (1 in 195): "same" is a hair over 10%.
    assert abs(outcome["mask"] / total - 0.8) < 0.02
    assert abs(outcome["random"] / total - 0.1) < 0.015
    assert abs(outcome["same"] / total - 0.1) < 0.015


def test_ngram_spans_are_whole_words_with_p_n_proportional_to_1_over_n():
    """With one piece per word, each masked run of consecutive positions is one n-gram
    (or neighbouring n-grams that touch); lengths follow 6/11, 3/11, 2/11 roughly."""
    spans = collections.Counter()
    for ids, (masked, positions, _) in mask_many(2000, max_pieces_per_word=1, length_words=120):
        run = 1
        for a, b in zip(positions, positions[1:] + [None]):
            if b == a + 1:
                run += 1
            else:
                spans[min(run, 4)] += 1
                run = 1
    total = sum(spans.values())
    p1, p2, p3 = (spans[n] / total for n in (1, 2, 3))
    # Ideal 0.545 / 0.273 / 0.182; touching spans and shorter fall-backs at the budget's end blur it a little.
    assert 0.45 < p1 < 0.62 and 0.2 < p2 < 0.33 and 0.12 < p3 < 0.24 and p1 > p2 > p3
    # Multi-piece words are masked whole: never a continuation piece without its word start.
    for ids, (masked, positions, _) in mask_many(300, max_pieces_per_word=3):
        chosen = set(positions)
        for i in chosen:
            if not WORD_START[ids[i]]:
                assert i - 1 in chosen


def documents(n_docs=12, n_sentences=6, seed=0):
    rng = random.Random(seed)
    return [[[100 * d + 10 * s + k for k in range(rng.randint(3, 7))] for s in range(n_sentences)]
            for d in range(n_docs)]


def test_sop_pairs_are_consecutive_text_swapped_half_the_time():
    docs = documents(40)
    examples = pretraining_features.make_sentence_examples("sop", docs, 24, random.Random(1))
    labels = [y for _, _, y in examples]
    assert 0.35 < np.mean(labels) < 0.65
    adjacent = 0
    for a, b, y in examples:
        first, second = (b, a) if y else (a, b)
        assert first[-1] // 100 == second[0] // 100               # same document
        assert len(a) + len(b) <= 24 - 3
        # text in its order: the second segment comes after the first (right after it, unless
        # trimming to fit took pieces off the first one's back, as Google's truncate_seq_pair may)
        assert first == sorted(first) and second == sorted(second) and first[-1] < second[0]
        adjacent += second[0] == first[-1] + 1 or second[0] % 10 == 0 and second[0] // 10 == first[-1] // 10 + 1
    assert adjacent > len(examples) / 2


def test_nsp_negatives_come_from_another_document():
    docs = documents(40)
    examples = pretraining_features.make_nsp_examples(docs, 24, random.Random(2))
    labels = [y for _, _, y in examples]
    assert 0.35 < np.mean(labels) < 0.65
    for a, b, y in examples:
        assert b and len(a) + len(b) <= 24 - 3
        same_doc = a[0] // 100 == b[0] // 100
        assert same_doc == (y == 0)
        if y == 0:
            assert b[0] > a[-1]   # positives: B comes after A


def test_heldout_split_has_no_document_overlap():
    docs = [[f"doc {i} line {j}" for j in range(3)] for i in range(200)]
    train_docs, heldout = pretraining_reading.split_documents(docs, 0.05, random.Random(0))
    assert len(heldout) == 10 and len(train_docs) == 190
    assert not {d[0] for d in train_docs} & {d[0] for d in heldout}
    assert sorted(map(tuple, train_docs + heldout)) == sorted(map(tuple, docs))


# --------------------------------------------------------- sharing (Table 4)
@pytest.mark.parametrize("sharing", SHARING_STRATEGIES)
def test_sharing_strategy_parameter_count_matches_built_model(sharing):
    config = AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                          num_attention_heads=2, intermediate_size=24, cross_layer_sharing=sharing)
    model = AlbertModel(config)
    assert count_parameters(model) == config.parameter_count()
    names = [p.name for p in model.trainable_params()]
    assert len(names) == len(set(names))
    if sharing == "all":
        assert not any("albert_layer_groups.1" in n for n in names)
    if sharing == "attention":
        assert not any("groups.1.albert_layers.0.attention" in n for n in names)
        assert any("groups.2.albert_layers.0.ffn.weight" in n for n in names)
    if sharing == "ffn":
        assert any("groups.2.albert_layers.0.attention.query" in n for n in names)
        assert not any("groups.1.albert_layers.0.ffn" in n or "groups.1.albert_layers.0.full_layer" in n
                       for n in names)


def test_sharing_is_written_only_when_not_the_default(tmp_path):
    default = AlbertConfig(hidden_size=32, num_attention_heads=2, intermediate_size=48)
    assert "cross_layer_sharing" not in default.to_dict()
    ffn = AlbertConfig(hidden_size=32, num_attention_heads=2, intermediate_size=48, cross_layer_sharing="ffn")
    ffn.to_json_file(tmp_path / "config.json")
    assert AlbertConfig.from_json_file(str(tmp_path / "config.json")).cross_layer_sharing == "ffn"
    with pytest.raises(ConfigError, match="cross_layer_sharing"):
        AlbertConfig(cross_layer_sharing="some")
    with pytest.raises(ConfigError, match="num_hidden_groups"):
        AlbertConfig(cross_layer_sharing="none", num_hidden_groups=2)


# ----------------------------------------------------------- end to end runs
@pytest.mark.parametrize("mask_prob", [0.15, 0.4])
def test_batcher_masks_the_share_it_is_given(mask_prob):
    """--mask-prob reaches the masking itself, not only the number of prediction slots."""
    from tokenizer import AlbertTokenizer
    tok = AlbertTokenizer(os.path.join(ROOT, "weights", "pretrained-small", "spiece.model"))
    rng = random.Random(0)
    words = "the film was a quiet story about love loss and a very long summer in new york".split()
    documents = [[tok.encode_ids(" ".join(rng.choices(words, k=12)) + " .") for _ in range(6)] for _ in range(4)]
    examples = pretraining_features.make_sop_examples(documents, 64, random.Random(0))
    batcher = pretraining_features.PretrainingBatcher(tok, 64, mask_prob)
    ids, _, attention_mask, _, _, weights, _ = batcher(examples, np.random.default_rng(0))
    predicted = weights.reshape(len(examples), -1).sum(1)
    lengths = attention_mask.sum(1)
    assert batcher.max_predictions == round(64 * mask_prob)
    # round(share x length) pieces each, whole words permitting (a word never straddles the budget)
    assert np.all(predicted <= np.round(lengths * mask_prob))
    assert abs(predicted.sum() / lengths.sum() - mask_prob) < 0.03


def test_mask_prob_is_a_pretraining_flag_in_0_1(tmp_path, capsys):
    text = corpus(tmp_path / "c.txt")
    for bad, why in [("0", "must be a number in (0.0, 1.0)"), ("1", "must be a number in (0.0, 1.0)"),
                     ("1.5", "must be a number in (0.0, 1.0)"), ("nan", "'nan' is not a finite number")]:
        with pytest.raises(SystemExit):
            train.parse_args(["--task", "mlm", "--text", text, "--output", "o", "--mask-prob", bad])
        assert f"--mask-prob: {why}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.parse_args(["--train", text, "--task", "sst2", "--output", "o", "--mask-prob", "0.4"])
    assert "--mask-prob is for pre-training" in capsys.readouterr().err


def test_heldout_masks_stay_at_15_percent_whatever_mask_prob(tmp_path, monkeypatch):
    """Held-out MLM accuracy compares across runs only if the held-out masks are the same."""
    seen = {}
    real_heldout = pretraining_metric.HeldOut

    def recording_heldout(documents_ids, batcher, *rest):
        seen["heldout"] = batcher.mask_prob
        return real_heldout(documents_ids, batcher, *rest)

    real_batcher_call = pretraining_features.PretrainingBatcher.__call__

    def recording_call(self, examples, rng, *lengths):
        seen.setdefault("shares", set()).add(self.mask_prob)
        return real_batcher_call(self, examples, rng, *lengths)

    monkeypatch.setattr(pretraining_metric, "HeldOut", recording_heldout)
    monkeypatch.setattr(pretraining_features.PretrainingBatcher, "__call__", recording_call)
    train.main(["--task", "mlm", "--text", corpus(tmp_path / "c.txt"), "--output", str(tmp_path / "pre"),
                "--max-steps", "1", "--mask-prob", "0.4", *tiny()])
    assert seen["heldout"] == 0.15 and seen["shares"] == {0.15, 0.4}


@pytest.mark.parametrize("task,sharing,how", [("sop", "attention", "--config"), ("nsp", "ffn", "--sharing"),
                                              ("mlm", "none", "--sharing")])
def test_each_objective_and_sharing_strategy_trains(tmp_path, task, sharing, how):
    if how == "--config":   # the shape from a config.json, so no size flags
        config = tmp_path / "config.json"
        AlbertConfig(vocab_size=60, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=48, max_position_embeddings=128, cross_layer_sharing=sharing).to_json_file(config)
        model_flags = ["--config", str(config), "--vocab-size", "60", "--max-length", "32", "--batch-size", "8",
                       "--quiet"]
    else:
        model_flags = ["--sharing", sharing, *tiny()]
    out = str(tmp_path / "pre")
    state = train.main(["--task", task, "--text", corpus(tmp_path / "c.txt"), "--output", out, "--max-steps", "3",
                        *model_flags])
    record = state["history"][-1]
    assert state["step"] == 3 and np.isfinite(record["train_loss"])
    assert {"heldout_mlm_accuracy", "heldout_sop_accuracy", "heldout_nsp_accuracy"} <= set(record)
    assert AlbertForPreTraining.from_pretrained(out).config.cross_layer_sharing == sharing
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["cross_layer_sharing"] == sharing


@pytest.mark.parametrize("E", [8, 32])   # E from well below H up to E = H
def test_factorized_embedding_sizes_pretrain(tmp_path, E):
    out = str(tmp_path / "pre")
    state = train.main(["--task", "sop", "--text", corpus(tmp_path / "c.txt"), "--output", out, "--max-steps", "2",
                        *tiny(embedding_size=E)])
    assert state["step"] == 2
    model = AlbertForPreTraining.from_pretrained(out)
    assert model.albert.embeddings.word_embeddings.weight.shape[1] == E


def test_max_minutes_stops_cleanly_and_resume_finishes_the_same_steps(tmp_path):
    text = corpus(tmp_path / "c.txt", n_docs=60)
    out = str(tmp_path / "pre")
    args = ["--task", "sop", "--text", text, "--output", out, "--epochs", "2", *tiny()]
    stopped = train.main(args + ["--max-minutes", "0.0001"])   # out of time after the first step
    assert stopped["step"] == 1 and stopped["epoch"] == 0 and len(stopped["epoch_losses"]) == 1
    assert os.path.isfile(os.path.join(out, "model.ckpt"))
    with open(out + ".state/state.json") as f:
        assert json.load(f)["step"] == 1
    resumed = train.main(args + ["--resume"])
    full = train.main(args[:5] + [str(tmp_path / "full")] + args[6:])
    assert resumed["step"] == full["step"] and resumed["epoch"] == full["epoch"] == 2


@pytest.mark.slow   # about 3 minutes on 2 cores
def test_masked_lm_learns_from_context_not_only_word_frequencies():
    """Every sequence counts up a cycle of 45 ids, so a masked id is its left neighbour + 1 and
    all ids are equally frequent: a model that ignores the context stays at 1/45 (loss ln 45 = 3.81).
    It runs pre-training's optimizer: AdamWeightDecay (no bias correction of its own, as Google's)
    with the schedule times Adam's bias correction, at pre-training's lr 1e-3. Without the
    correction the first ~1000 steps are ~3x larger than torch AdamW's, and at lr 1e-3 this model,
    like torch AdamW at 3e-3, sat on the unigram plateau past 1000 steps."""
    import mindspore as ms
    from albert_min.training.step import (linear_warmup_decay, make_optimizer, make_train_step, seed_everything,
                                          with_adam_bias_correction)
    seed_everything(0)
    V, B, S, P, steps = 50, 32, 32, 5, 1000
    model = AlbertForPreTraining(AlbertConfig(vocab_size=V, embedding_size=64, hidden_size=64, num_hidden_layers=2,
                                              num_attention_heads=2, intermediate_size=128,
                                              max_position_embeddings=64))
    optimizer = make_optimizer(model, with_adam_bias_correction(linear_warmup_decay(1e-3, steps, 0.05)), 0.01)
    train_step = make_train_step(pretraining_loss.make_loss_fn(model, "mlm"), optimizer, 1.0)
    rng = np.random.default_rng(0)

    def batch():
        ids = (5 + (rng.integers(0, V - 5, (B, 1)) + np.arange(S)) % (V - 5)).astype(np.int32)
        positions = np.stack([np.sort(rng.choice(np.arange(1, S - 1), P, replace=False)) for _ in range(B)])
        targets = np.take_along_axis(ids, positions, 1).reshape(-1)
        masked = ids.copy()
        np.put_along_axis(masked, positions, MASK, 1)
        flat = (positions + S * np.arange(B)[:, None]).reshape(-1).astype(np.int32)
        return masked, np.zeros_like(ids), np.ones_like(ids), flat, targets, np.ones(B * P, np.float32), \
            np.zeros(B, np.int32)

    model.set_train(True)
    for _ in range(steps):
        train_step(*[ms.Tensor(x) for x in batch()])
    model.set_train(False)
    ids, types, mask, flat, targets, _, _ = batch()
    sequence_output, _ = model.albert(ms.Tensor(ids), ms.Tensor(types), ms.Tensor(mask))
    predicted = pretraining_loss.masked_lm_logits(model, sequence_output, ms.Tensor(flat)).asnumpy().argmax(-1)
    assert (predicted == targets).mean() > 0.25   # chance: 1/45


def test_bias_corrected_schedule_makes_adamweightdecay_follow_adam():
    """AdamWeightDecay with the schedule times sqrt(1-b2^t)/(1-b1^t) takes Adam's (Kingma & Ba's)
    bias-corrected steps, which AdamWeightDecay alone overshoots 3-6.5x early on."""
    import mindspore as ms
    from mindspore import nn
    from albert_min.training.step import with_adam_bias_correction
    rng = np.random.default_rng(0)
    steps, lr, b1, b2, eps = 30, 1e-2, 0.9, 0.999, 1e-12
    grads = rng.normal(size=(steps, 5)).astype(np.float32) + 0.5
    p = ms.Parameter(ms.Tensor(np.zeros(5, np.float32)), name="w")
    schedule = with_adam_bias_correction(np.full(steps, lr, np.float32))
    optimizer = nn.AdamWeightDecay([p], learning_rate=ms.Tensor(schedule), eps=eps, weight_decay=0.0)
    m = v = np.zeros(5)
    reference = np.zeros(5)
    for t, g in enumerate(grads, start=1):
        optimizer((ms.Tensor(g),))
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        reference -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    np.testing.assert_allclose(p.asnumpy(), reference, rtol=1e-4)
    factor = with_adam_bias_correction(np.ones(1000, np.float32))
    assert abs(factor[0] - np.sqrt(1 - b2) / (1 - b1)) < 1e-6 and abs(factor[-1] - 0.795) < 1e-3


@pytest.mark.parametrize("kernels", ["on", "off"])
def test_a_model_without_mindspores_dropout_keeps_its_compiled_step_across_saves(kernels, monkeypatch):
    """MindSpore's dropout is reseeded by recompiling at each saved state (each recompile costs memory
    MindSpore keeps); without dropout, or with the kernels' dropout (masks from seed, step and call:
    nothing to reseed), the compiled step is kept."""
    from albert_min.training.step import reseeds_by_recompiling, uses_dropout
    monkeypatch.setenv("ALBERT_MIN_KERNELS", kernels)
    if kernels == "on" and albert_kernels.library() is None:
        pytest.skip("the kernels cannot be built here")

    def model(config):                                     # as the Trainer has it: accelerated
        return albert_kernels.accelerate(AlbertForPreTraining(config))
    sizes = dict(vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=24)
    assert uses_dropout(model(AlbertConfig(**sizes)))
    assert reseeds_by_recompiling(model(AlbertConfig(**sizes))) == (kernels == "off")
    quiet = AlbertConfig(**sizes, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    assert not uses_dropout(model(quiet)) and not reseeds_by_recompiling(model(quiet))
    from types import SimpleNamespace
    for config, kept in ((quiet, True), (AlbertConfig(**sizes), kernels == "on")):
        compiled = object()
        trainer = SimpleNamespace(model=model(config), train_step=compiled, loss_scaler=None,
                                  parallel=SimpleNamespace(writes=False))   # a worker that does not write
        Trainer.save_state(trainer)
        assert (trainer.train_step is compiled) == kept
