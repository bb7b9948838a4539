"""python -m albert_min.export: MindIR that reproduces the model, stores the shared layer once,
and never overwrites what albert_min did not write."""

import json
import os

import numpy as np
import pytest
import mindspore as ms
from mindspore import nn

from conftest import ROOT
from albert_min.export import ExportError, export_mindir, main, read_metadata
from albert_min.modeling import AlbertForSequenceClassification, AlbertModel

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")


def random_batch(rng, batch, seq, vocab_size):
    """Ids with a padded tail on row 0 and a second segment on the last row."""
    input_ids = rng.integers(5, vocab_size, (batch, seq)).astype(np.int32)
    token_type_ids = np.zeros_like(input_ids)
    attention_mask = np.ones_like(input_ids)
    attention_mask[0, seq // 2:] = 0
    input_ids[0, seq // 2:] = 0
    token_type_ids[-1, seq // 3:] = 1
    return [ms.Tensor(a) for a in (input_ids, token_type_ids, attention_mask)]


@pytest.fixture(scope="module")
def classifier_mindir(tmp_path_factory):
    return export_mindir(SST2_SMALL, str(tmp_path_factory.mktemp("export") / "sst2.mindir"))


def test_dynamic_shape_mindir_reproduces_the_logits(classifier_mindir):
    model = AlbertForSequenceClassification.from_pretrained(SST2_SMALL)
    model.set_train(False)
    graph = nn.GraphCell(ms.load(classifier_mindir))
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 8), (3, 17), (5, 64), (2, 128)]:   # one graph, every shape
        inputs = random_batch(rng, batch, seq, model.config.vocab_size)
        expected = model(*inputs).asnumpy()
        got = graph(*inputs).asnumpy()
        assert got.shape == (batch, 2)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_shared_layer_is_stored_once(classifier_mindir):
    from mindspore.train.mind_ir_pb2 import ModelProto
    proto = ModelProto()
    with open(classifier_mindir, "rb") as f:
        proto.ParseFromString(f.read())
    model = AlbertForSequenceClassification.from_pretrained(SST2_SMALL)
    # L = 4 loops of the block, one stored copy of each of its parameters
    assert model.config.num_hidden_layers == 4
    assert len(proto.graph.parameter) == len(list(model.get_parameters()))
    stored = sum(len(p.raw_data) for p in proto.graph.parameter)
    assert stored == sum(p.asnumpy().nbytes for p in model.get_parameters())
    size, ckpt = os.path.getsize(classifier_mindir), os.path.getsize(os.path.join(SST2_SMALL, "model.ckpt"))
    assert size < 1.1 * ckpt, (size, ckpt)


def test_metadata_names_the_producer_labels_and_max_length(classifier_mindir):
    info = read_metadata(classifier_mindir)
    assert info["producer"] == "albert_min" and info["kind"] == "classifier"
    assert json.loads(info["labels"]) == ["LABEL_0", "LABEL_1"]
    assert info["max_length"] == "64"   # weights/sst2-small/train_metrics.json
    assert json.loads(info["config"])["num_hidden_layers"] == 4


def test_fixed_shape_backbone(tmp_path):
    path = export_mindir(SST2_SMALL, str(tmp_path / "backbone.mindir"), backbone=True, batch=2, seq=16)
    model = AlbertModel.from_pretrained(SST2_SMALL)
    model.set_train(False)
    inputs = random_batch(np.random.default_rng(1), 2, 16, model.config.vocab_size)
    graph = nn.GraphCell(ms.load(path))
    for got, expected in zip(graph(*inputs), model(*inputs)):
        np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), rtol=0, atol=1e-5)
    assert read_metadata(path)["kind"] == "backbone"
    with pytest.raises(RuntimeError):   # a fixed-shape graph refuses other shapes, loudly
        graph(*random_batch(np.random.default_rng(2), 3, 8, model.config.vocab_size))


def test_never_overwrites_what_albert_min_did_not_write(classifier_mindir, tmp_path, capsys):
    foreign = tmp_path / "theirs.mindir"
    foreign.write_bytes(b"someone else's model")
    for argv in ([SST2_SMALL, str(foreign)], [SST2_SMALL, str(foreign), "--force"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert str(exit_.value).startswith("error: ") and "\n" not in str(exit_.value)
    assert foreign.read_bytes() == b"someone else's model"
    with pytest.raises(ExportError, match="already exists"):
        export_mindir(SST2_SMALL, classifier_mindir)
    with pytest.raises(ExportError, match="must end in .mindir"):
        export_mindir(SST2_SMALL, str(tmp_path / "model.ckpt"))
    with pytest.raises(ExportError, match="--seq 1000"):
        export_mindir(SST2_SMALL, str(tmp_path / "long.mindir"), seq=1000)
    with pytest.raises(FileNotFoundError):
        export_mindir(str(tmp_path / "missing"), str(tmp_path / "x.mindir"))
    assert sorted(os.listdir(tmp_path)) == ["theirs.mindir"]   # no temporary files left behind


def test_force_replaces_an_albert_min_mindir(tmp_path, capsys):
    path = str(tmp_path / "model.mindir")
    main([SST2_SMALL, path, "--backbone", "--batch", "1", "--seq", "8"])
    main([SST2_SMALL, path, "--force"])
    assert "wrote " + path in capsys.readouterr().out
    assert read_metadata(path)["kind"] == "classifier"
    assert os.listdir(tmp_path) == ["model.mindir"]
