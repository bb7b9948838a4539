"""python -m albert_min.export: MindIR that reproduces the model, stores the shared layer once,
and never overwrites what albert_min did not write."""

import json
import os

import numpy as np
import pytest
import mindspore as ms
from mindspore import nn

from helpers.paths import ROOT
from albert_min.export import ExportError, export_mindir, main, read_metadata
from albert_min.model import kernels
from albert_min.model.modeling import AlbertModel
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.common.safe_output import OutputError

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
    """The plain model exported reproduces the accelerated model's (the compiled kernels' forward, where built)."""
    model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(SST2_SMALL))
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
    # MindSpore's own ops only (the plain model, never accelerated): the file runs where albert_min's kernels are not
    op_types = {node.op_type for node in proto.graph.node}
    assert any("MatMul" in t for t in op_types) and not any("Custom" in t for t in op_types), op_types


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
    with pytest.raises(OutputError, match="already exists"):
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


# ------------------------------------------------------- issue 24 and 27 (export)
def test_model_proto_field_table_matches_mindspore():
    """read_metadata walks ModelProto's top-level fields by a table of its own (it must not load MindSpore's
    parser, which reads the whole file): the table must be MindSpore's."""
    from mindspore.train.mind_ir_pb2 import ModelProto
    from albert_min import export
    wire = {ms_type: 0 for ms_type in (3, 8)} | {9: 2, 11: 2}    # int64, bool: varint; string, message: bytes
    assert {f.number: wire[f.type] for f in ModelProto.DESCRIPTOR.fields} == export.MODEL_PROTO_FIELDS
    assert ModelProto.DESCRIPTOR.fields_by_name["graph"].number == export.GRAPH_FIELD
    assert ModelProto.DESCRIPTOR.fields_by_name["user_info"].number == export.USER_INFO_FIELD


def test_metadata_reader_agrees_with_protobuf(classifier_mindir):
    from mindspore.train.mind_ir_pb2 import ModelProto
    proto = ModelProto()
    with open(classifier_mindir, "rb") as f:
        proto.ParseFromString(f.read())
    assert read_metadata(classifier_mindir) == dict(proto.user_info)


# The peak RSS of this process alone: VmHWM (getrusage's ru_maxrss carries over the forking parent's peak, which
# under pytest is MindSpore's half a gigabyte).
SPARSE_METADATA = """
import sys
sys.path.insert(0, {root!r})
from albert_min.export import read_metadata
info = read_metadata({path!r})
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(info.get("producer"), "mindspore" in sys.modules, peak_kb // 1024)
"""


def test_force_reads_only_the_headers_of_a_huge_target(tmp_path):
    """Issue 24 case 6: a 3 GB sparse .mindir took 3.55 GB of RSS to tell who wrote it."""
    import subprocess
    import sys
    path = str(tmp_path / "big.mindir")
    graph_length = 3 * 10 ** 9

    def varint(n):
        out = b""
        while n >= 0x80:
            out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
        return out + bytes([n])
    entry = b"\x0a" + varint(8) + b"producer" + b"\x12" + varint(10) + b"albert_min"
    with open(path, "wb") as f:
        f.write(b"\x3a" + varint(graph_length))                   # field 7 (graph): 3 GB of holes
        f.seek(graph_length, os.SEEK_CUR)
        f.write(b"\x72" + varint(len(entry)) + entry)            # field 14 (user_info), after the graph
    assert os.path.getsize(path) > graph_length
    done = subprocess.run([sys.executable, "-c", SPARSE_METADATA.format(root=ROOT, path=path)],
                          capture_output=True, text=True, timeout=120)
    producer, loaded_mindspore, peak_mb = done.stdout.split()
    assert (producer, loaded_mindspore) == ("albert_min", "False"), done.stderr
    assert int(peak_mb) < 200, f"peak RSS {peak_mb} MB to read the metadata of a 3 GB file"
    zeros = tmp_path / "zeros.mindir"                            # not a MindIR at all: refused at the first byte
    with open(zeros, "wb") as f:
        f.truncate(graph_length)
    with pytest.raises(ExportError, match="not a MindIR file"):
        read_metadata(str(zeros))


@pytest.mark.parametrize("name", ["sp ace/x.mindir", "é/x.mindir", "sub/naïve model.mindir"])
def test_export_to_any_path(tmp_path, name):
    """Issue 24 case 8: MindSpore's file-name regex refused these paths with a ValueError traceback."""
    path = str(tmp_path / name)
    main([SST2_SMALL, path, "--batch", "1", "--seq", "8"])
    assert read_metadata(path)["kind"] == "classifier"
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]   # no temporary left
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask():
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def test_export_never_replaces_an_input_or_a_symlink(tmp_path, classifier_mindir):
    model = tmp_path / "model"
    import shutil
    shutil.copytree(SST2_SMALL, model)
    with pytest.raises(OutputError, match=f"{model}/x.mindir: lies inside {model}, an input of this run"):
        export_mindir(str(model), str(model / "x.mindir"))
    link = tmp_path / "link.mindir"
    link.symlink_to(classifier_mindir)
    with pytest.raises(OutputError, match=f"{link}: is a symlink; refusing to replace it"):
        export_mindir(SST2_SMALL, str(link), force=True)
    assert os.path.islink(link)


def test_missing_parent_folders_are_created_and_removed_on_failure(tmp_path):
    """Issue 24 case 13: one rule for every output (albert_min.common.safe_output)."""
    with pytest.raises(ExportError, match="--seq 1000"):
        export_mindir(SST2_SMALL, str(tmp_path / "a" / "b" / "long.mindir"), seq=1000)
    assert os.listdir(tmp_path) == []
    path = export_mindir(SST2_SMALL, str(tmp_path / "a" / "b" / "ok.mindir"), batch=1, seq=8)
    assert os.listdir(tmp_path / "a" / "b") == ["ok.mindir"] and read_metadata(path)


def test_fixed_shapes_are_recorded_and_checked(tmp_path):
    """Issue 27 friction 2: a file exported with --batch 1 --seq 64 gave a raw Reshape error for a batch of 2."""
    from albert_min.export import check_inputs, make_inputs
    path = export_mindir(SST2_SMALL, str(tmp_path / "sst2-1x64.mindir"), batch=1, seq=64)
    assert json.loads(read_metadata(path)["input_shape"]) == [1, 64]
    graph = nn.GraphCell(ms.load(path))
    inputs = make_inputs(SST2_SMALL, ["a gorgeous , witty film"], mindir=path)
    assert [a.shape for a in inputs] == [(1, 64)] * 3 and all(a.dtype == np.int32 for a in inputs)
    model = AlbertForSequenceClassification.from_pretrained(SST2_SMALL)
    model.set_train(False)
    np.testing.assert_allclose(graph(*map(ms.Tensor, inputs)).asnumpy(),
                               model(*map(ms.Tensor, inputs)).asnumpy(), rtol=0, atol=1e-5)
    with pytest.raises(ExportError, match=r"input_ids has batch 2, but sst2-1x64.mindir was exported with a fixed "
                                          r"batch of 1 \(--batch 1\)"):
        make_inputs(SST2_SMALL, ["a gorgeous film", "a mess"], mindir=path)
    two = [np.zeros((1, 32), np.int32)] * 3
    with pytest.raises(ExportError, match=r"fixed length of 64 \(--seq 64\)"):
        check_inputs(path, *two)
    with pytest.raises(ExportError, match="input_ids is int64; sst2-1x64.mindir takes int32"):
        check_inputs(path, np.zeros((1, 64), np.int64), *two[:2])


def test_dynamic_inputs_from_texts_reproduce_the_model(classifier_mindir):
    from albert_min.export import check_inputs, make_inputs
    texts = ["a gorgeous , witty film", "a mess", "neither here nor there , but long enough to pad the others"]
    inputs = make_inputs(SST2_SMALL, texts, mindir=classifier_mindir)
    assert json.loads(read_metadata(classifier_mindir)["input_shape"]) == [None, None]
    assert inputs[0].shape[0] == 3 and inputs[2][1].sum() < inputs[2][2].sum()   # padded to the longest
    check_inputs(classifier_mindir, *inputs)
    model = AlbertForSequenceClassification.from_pretrained(SST2_SMALL)
    model.set_train(False)
    graph = nn.GraphCell(ms.load(classifier_mindir))
    np.testing.assert_allclose(graph(*map(ms.Tensor, inputs)).asnumpy(),
                               model(*map(ms.Tensor, inputs)).asnumpy(), rtol=0, atol=1e-5)


def test_a_backbone_without_backbone_suggests_the_flag(tmp_path):
    """Issue 27 friction 10: the error said only "fine-tune it with train.py --init first"."""
    pretrained = os.path.join(ROOT, "weights", "pretrained-small")
    with pytest.raises(SystemExit) as exit_:
        main([pretrained, str(tmp_path / "x.mindir")])
    message = str(exit_.value)
    assert message.startswith("error: ") and "\n" not in message
    assert "train.py --init" in message and message.endswith("or export the backbone as it is with --backbone")
    assert os.listdir(tmp_path) == []
