"""Export a model folder as MindIR, MindSpore's serialized graph for serving.

    python -m albert_min.export weights/sst2-small sst2.mindir               # the classifier
    python -m albert_min.export weights/sst2-small backbone.mindir --backbone
    python -m albert_min.export weights/sst2-small sst2-1x64.mindir --batch 1 --seq 64

Inputs (in this order): input_ids, token_type_ids, attention_mask, int32
``[B, S]``. B and S are dynamic (any batch, any length up to
max_position_embeddings) unless --batch / --seq fix them.
Outputs: the classifier's logits ``[B, num_labels]``, or the backbone's
(sequence_output ``[B, S, H]``, pooled_output ``[B, H]``). Load it with

    from albert_min.export import make_inputs
    graph = mindspore.nn.GraphCell(mindspore.load("sst2.mindir"))
    inputs = make_inputs("weights/sst2-small", ["a gorgeous film", "a mess"], mindir="sst2.mindir")
    logits = graph(*map(mindspore.Tensor, inputs))

``make_inputs`` tokenizes with the model folder's spiece.model and checks the
shapes against the file (``check_inputs``: a file exported with --batch 1
refuses a batch of 2 with an error naming --batch, not a Reshape error).

The shared layer is stored once: the L loops are unrolled in the graph (a few
kB of nodes each), but the parameters are graph inputs, stored one time each,
so the file is about the size of model.ckpt (or model.safetensors). The file also records, as MindIR
``user_info``, that albert_min wrote it, the config, the label names, the
training max_length and the fixed input shape (``read_metadata``).

The file is written as every albert_min output (albert_min.common.safe_output): to a
temporary name beside the target, renamed when complete; an existing target is
replaced only with --force, and only if it is a MindIR that albert_min wrote.
"""

import argparse
import contextlib
import glob
import json
import os
import re
import shutil

from .arguments import Help, use_device_flag
from .common.device import add_device_flag
from .common.errors import AlbertMinError, reported_errors

PRODUCER = "albert_min"


class ExportError(AlbertMinError):
    """An export that cannot be done as asked: the message names the file or flag."""


# ModelProto's top-level fields (mindspore/train/mind_ir.proto) -> protobuf wire type: 0 varint, 2 bytes.
# tests/scripts/test_export.py checks this against MindSpore's own descriptor.
MODEL_PROTO_FIELDS = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2, 10: 0, 11: 2, 12: 2, 13: 0, 14: 2}
GRAPH_FIELD, USER_INFO_FIELD = 7, 14
MAX_TOP_LEVEL_FIELDS = 1 << 16   # a MindIR has a graph, a few functions and a primitive per operator type
MAX_USER_INFO_BYTES = 1 << 20    # our metadata is a few kB (the config)


def _varint(read):
    value = shift = 0
    while shift < 64:
        byte = read(1)
        if not byte:
            raise ValueError("truncated")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
    raise ValueError("varint too long")


def _user_info_entry(data):
    """``(key, value)`` of one user_info map entry (a message: key = 1, value = 2, both strings)."""
    view, pos, entry = memoryview(data), 0, {}

    def read(n):
        nonlocal pos
        pos += n
        return bytes(view[pos - n:pos])
    while pos < len(data):
        tag = _varint(read)
        if tag not in (0x0A, 0x12):
            raise ValueError("not a string map entry")
        length = _varint(read)
        if pos + length > len(data):
            raise ValueError("truncated")
        entry[tag >> 3] = read(length).decode("utf-8")
    return entry.get(1, ""), entry.get(2, "")


def read_metadata(path):
    """The ``user_info`` that ``export_mindir`` stored: ``{"producer": "albert_min",
    "kind", "config", "labels", "max_length", "input_shape"}`` (JSON strings). ``{}``
    for a MindIR that albert_min did not write; ExportError if ``path`` is not a MindIR.

    Reads only the top-level field headers and user_info (the last field): the
    graph, which holds the weights, is skipped, so a file of any size costs a
    few kB of memory.
    """
    if not os.path.isfile(path):
        raise ExportError(f"{path}: not a file")
    info, has_graph = {}, False
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            for _ in range(MAX_TOP_LEVEL_FIELDS):
                if f.tell() >= size:
                    break
                tag = _varint(f.read)
                number, wire = tag >> 3, tag & 7
                if MODEL_PROTO_FIELDS.get(number) != wire:
                    raise ValueError(f"field {number} wire type {wire}")
                if wire == 0:
                    _varint(f.read)
                    continue
                length = _varint(f.read)
                if f.tell() + length > size:
                    raise ValueError("truncated")
                if number == USER_INFO_FIELD and length <= MAX_USER_INFO_BYTES:
                    key, value = _user_info_entry(f.read(length))
                    info[key] = value
                else:
                    has_graph |= number == GRAPH_FIELD and length > 0
                    f.seek(length, os.SEEK_CUR)
            else:
                raise ValueError("too many fields")
        except (ValueError, UnicodeDecodeError):
            has_graph = False
    if not has_graph:
        raise ExportError(f"{path}: not a MindIR file")
    return info if info.get("producer") == PRODUCER else {}


def _is_our_mindir(path):
    try:
        return bool(read_metadata(path))
    except ExportError:
        return False


def mindir_kind():
    """What ``--force`` may replace: a MindIR whose metadata names albert_min (see albert_min.common.safe_output)."""
    from .common.safe_output import FileKind
    return FileKind("a MindIR file albert_min wrote", _is_our_mindir)


MINDSPORE_FILE_NAME = re.compile(r"[0-9a-zA-Z@_\-.:/\\]+")   # mindspore.export refuses other file names


@contextlib.contextmanager
def _mindspore_file_name(path):
    """A name for ``path`` that mindspore.export accepts. It checks the name against
    ``MINDSPORE_FILE_NAME`` before resolving it, so a folder with a space or an "é"
    goes through /proc/self/fd/N, a descriptor of the folder (the file's own name
    is ASCII: safe_output.atomic_file makes it so); where there is no /proc (macOS,
    Windows), through the file's own name with the folder as the working directory
    for the write (this command's process does nothing else meanwhile)."""
    if MINDSPORE_FILE_NAME.fullmatch(path):
        yield path
        return
    if not os.path.isdir("/proc/self/fd"):
        cwd = os.getcwd()
        os.chdir(os.path.dirname(os.path.abspath(path)))
        try:
            yield os.path.basename(path)
        finally:
            os.chdir(cwd)
        return
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)


def check_arguments(output, batch, seq):
    if not output.endswith(".mindir"):
        raise ExportError(f"{output}: the output name must end in .mindir")
    for flag, value in (("--batch", batch), ("--seq", seq)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ExportError(f"{flag} must be a positive integer, got {value!r}")


def load_model(model_dir, backbone):
    """The model to export, plain (MindSpore's own ops; never ``kernels.accelerate``d): the graph must
    run where albert_min's compiled kernels are not."""
    from .model.folder import CheckpointError
    from .model.modeling import AlbertModel
    from .model.heads import AlbertForSequenceClassification
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"model folder not found: {model_dir}")
    try:
        model = (AlbertModel if backbone else AlbertForSequenceClassification).from_pretrained(model_dir)
    except CheckpointError as err:
        no_head = not backbone and "no sequence-classification head" in str(err)
        raise CheckpointError(f"{err}; or export the backbone as it is with --backbone" if no_head else err) from None
    model.set_train(False)   # dropout off: the graph is for inference
    return model


def export_mindir(model_dir, output, backbone=False, batch=None, seq=None, force=False, int8=False):
    """Write the classifier (or, with ``backbone``, ``AlbertModel``) of ``model_dir`` to ``output``.

    ``int8``: the Dense layers' weights stored as int8 with a float32 scale per output channel, each
    once (``kernels.quantize_int8(weights_only=True)``); the graph dequantizes them and computes in
    float32 (a MindIR holds MindSpore's ops only: docs/export.md).

    ``batch`` / ``seq``: fixed input dimensions; None leaves that dimension dynamic.
    ``output`` is written as every albert_min output is (``safe_output.atomic_file``):
    locked, atomically, replacing only a MindIR that albert_min wrote (with ``force``),
    under any name (a space or an "é" in it too). Returns ``output``.
    """
    import mindspore as ms
    from .model.folder import training_max_length
    from .predict.pipelines import label_names
    from .common.safe_output import atomic_file
    check_arguments(output, batch, seq)
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"model folder not found: {model_dir}")
    with atomic_file(output, mindir_kind(), force, protect=(model_dir,), suffix=".mindir") as tmp:
        model = load_model(model_dir, backbone)
        if int8:
            from .model import kernels
            kernels.quantize_int8(model, notice=False, weights_only=True)
        config = model.config
        if seq is not None and seq > config.max_position_embeddings:
            raise ExportError(f"--seq {seq} is longer than the model's max_position_embeddings "
                              f"({config.max_position_embeddings})")
        metadata = {
            "producer": PRODUCER,
            "kind": "backbone" if backbone else "classifier",
            "inputs": "input_ids,token_type_ids,attention_mask",
            "input_shape": json.dumps([batch, seq]),   # null: dynamic
            "config": json.dumps(config.to_dict(), sort_keys=True),
            "labels": json.dumps(label_names(model_dir, config.num_labels)),
            "max_length": str(min(training_max_length(model_dir), config.max_position_embeddings)),
        }
        if int8:
            metadata["dense_weights"] = "int8, a float32 scale per output channel, dequantized in the graph"

        def add_metadata(proto):   # mindspore.export hands us the ModelProto before writing it
            for key, value in metadata.items():
                proto.user_info[key] = value

        spec = ms.Tensor(shape=[batch, seq], dtype=ms.int32)   # None = dynamic
        split = tmp[:-len(".mindir")]   # over 1 GB MindSpore writes <name>_graph.mindir + <name>_variables/
        try:
            with _mindspore_file_name(tmp) as name:
                ms.export(model, spec, spec, spec, file_name=name, file_format="MINDIR", custom_func=add_metadata)
            if os.path.getsize(tmp) == 0:
                raise ExportError(f"{model_dir}: parameters over 1 GB; MindSpore would split the MindIR "
                                  f"into a graph file and a variables folder, which this tool does not write")
        finally:
            for leftover in glob.glob(glob.escape(split) + "_*"):
                if os.path.isdir(leftover):
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    os.remove(leftover)
    return output


# ------------------------------------------------------------ using the file
def check_inputs(mindir, input_ids, token_type_ids, attention_mask):
    """Raise ExportError unless the three inputs fit the MindIR ``mindir`` (its path, or its
    ``read_metadata``): int32 arrays (numpy or MindSpore) of one shape ``[B, S]``, with the
    batch and length it was exported with if they were fixed (--batch / --seq), and S no
    longer than the model's max_position_embeddings. The error names the fixed dimension."""
    info = read_metadata(mindir) if isinstance(mindir, str) else mindir
    name = os.path.basename(mindir) if isinstance(mindir, str) else "the MindIR"
    inputs = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
    shapes = {k: tuple(v.shape) for k, v in inputs.items()}
    for key, value in inputs.items():
        if "int32" not in str(value.dtype).lower():
            raise ExportError(f"{key} is {value.dtype}; {name} takes int32 inputs")
        if len(shapes[key]) != 2 or shapes[key] != shapes["input_ids"]:
            raise ExportError(f"inputs must be three [batch, length] arrays of one shape, got {shapes}")
    batch, length = shapes["input_ids"]
    fixed = json.loads(info.get("input_shape", "[null, null]"))
    for dim, got, flag, what in ((0, batch, "--batch", "batch"), (1, length, "--seq", "length")):
        if fixed[dim] is not None and got != fixed[dim]:
            raise ExportError(f"input_ids has {what} {got}, but {name} was exported with a fixed {what} of "
                              f"{fixed[dim]} ({flag} {fixed[dim]}); give it that {what}, or export without {flag}")
    limit = json.loads(info["config"])["max_position_embeddings"] if "config" in info else None
    if limit is not None and length > limit:
        raise ExportError(f"input_ids has length {length}, more than the model's max_position_embeddings ({limit})")


def make_inputs(model_dir, texts, text_pairs=None, mindir=None):
    """The three int32 inputs ``[B, S]`` (input_ids, token_type_ids, attention_mask), as numpy
    arrays, for ``texts`` (and ``text_pairs``), with ``model_dir``'s tokenizer (spiece.model):
    truncated to the length the model was trained with and padded to the longest text.
    With ``mindir`` (the exported file), to its fixed --seq if it has one."""
    from .model.config import load_config
    from .model.folder import folder_tokenizer, tokenizer_file, training_max_length
    tokenizer_file(model_dir)   # the folder has one, else how to add it
    tokenizer = folder_tokenizer(model_dir, load_config(model_dir).vocab_size)   # its ids fit the model's embeddings
    info = read_metadata(mindir) if mindir else {}
    seq = json.loads(info.get("input_shape", "[null, null]"))[1]
    max_length = seq or int(info.get("max_length", 0)) or training_max_length(model_dir)
    batch = tokenizer(texts, text_pairs, max_length=max_length, padding="max_length" if seq else "longest")
    inputs = tuple(batch[k] for k in ("input_ids", "token_type_ids", "attention_mask"))
    if mindir:
        check_inputs(mindir, *inputs)
    return inputs


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m albert_min.export", description=__doc__.split("\n\n")[0],
                                formatter_class=Help)
    p.add_argument("model_dir", help="model folder (config.json, model.ckpt or model.safetensors)")
    p.add_argument("output", help="the .mindir file to write")
    p.add_argument("--backbone", action="store_true",
                   help="export AlbertModel (sequence and pooled output) instead of the classifier")
    p.add_argument("--batch", type=int, help="fixed batch size (default: dynamic)")
    p.add_argument("--seq", type=int, help="fixed sequence length (default: dynamic)")
    p.add_argument("--force", action="store_true", help="replace an existing MindIR that albert_min wrote")
    p.add_argument("--int8", action="store_true",
                   help="store the Dense layers' weights as int8 (a scale per output channel, the shared layer's "
                        "once); the graph computes in float32 (docs/export.md) (default: float32 weights)")
    add_device_flag(p)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    use_device_flag(args.device)
    with reported_errors():
        export_mindir(args.model_dir, args.output, args.backbone, args.batch, args.seq, args.force, args.int8)
    from .model.folder import weights_file
    checkpoint = weights_file(args.model_dir)
    size = os.path.getsize(args.output)
    print(f"wrote {args.output} ({size / 1e6:.2f} MB; {os.path.basename(checkpoint)} "
          f"{os.path.getsize(checkpoint) / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
