"""Export a model folder as MindIR, MindSpore's serialized graph for serving.

    python -m albert_min.export weights/sst2-small sst2.mindir               # the classifier
    python -m albert_min.export weights/sst2-small backbone.mindir --backbone
    python -m albert_min.export weights/sst2-small sst2-1x64.mindir --batch 1 --seq 64

Inputs (in this order): input_ids, token_type_ids, attention_mask, int32
``[B, S]``. B and S are dynamic (any batch, any length up to
max_position_embeddings) unless --batch / --seq fix them.
Outputs: the classifier's logits ``[B, num_labels]``, or the backbone's
(sequence_output ``[B, S, H]``, pooled_output ``[B, H]``). Load it with

    graph = mindspore.nn.GraphCell(mindspore.load("sst2.mindir"))
    logits = graph(input_ids, token_type_ids, attention_mask)

The shared layer is stored once: the L loops are unrolled in the graph (a few
kB of nodes each), but the parameters are graph inputs, stored one time each,
so the file is about the size of model.ckpt. The file also records, as MindIR
``user_info``, that albert_min wrote it, the config, the label names and the
training max_length (``read_metadata``).

The file is written to a temporary name beside the target and renamed when
complete. An existing target is replaced only with --force, and only if it is
a MindIR that albert_min wrote; nothing else is ever overwritten.
"""

import argparse
import glob
import json
import os
import shutil
import sys

from .errors import AlbertMinError

PRODUCER = "albert_min"


class ExportError(AlbertMinError):
    """An export that cannot be done as asked: the message names the file or flag."""


def read_metadata(path):
    """The ``user_info`` that ``export_mindir`` stored: ``{"producer": "albert_min",
    "kind", "config", "labels", "max_length"}`` (JSON strings). ``{}`` for a MindIR
    that albert_min did not write; ExportError if ``path`` is not a MindIR file."""
    from mindspore.train.mind_ir_pb2 import ModelProto
    from google.protobuf.message import DecodeError
    if not os.path.isfile(path):
        raise ExportError(f"{path}: not a file")
    proto = ModelProto()
    try:
        with open(path, "rb") as f:
            proto.ParseFromString(f.read())
    except DecodeError:
        raise ExportError(f"{path}: not a MindIR file") from None
    if not proto.graph.name and not proto.graph.node:
        raise ExportError(f"{path}: not a MindIR file")
    info = dict(proto.user_info)
    return info if info.get("producer") == PRODUCER else {}


def check_target(output, force):
    """Refuse to write over anything but a MindIR that albert_min wrote (and that only with force)."""
    if not output.endswith(".mindir"):
        raise ExportError(f"{output}: the output name must end in .mindir")
    if not os.path.lexists(output):
        return
    if not force:
        raise ExportError(f"{output} already exists (pass --force to replace a MindIR that albert_min wrote)")
    try:
        ours = os.path.isfile(output) and not os.path.islink(output) and bool(read_metadata(output))
    except ExportError:
        ours = False
    if not ours:
        raise ExportError(f"{output}: refusing to replace it, it is not a MindIR written by albert_min")


def export_mindir(model_dir, output, backbone=False, batch=None, seq=None, force=False):
    """Write the classifier (or, with ``backbone``, ``AlbertModel``) of ``model_dir`` to ``output``.

    ``batch`` / ``seq``: fixed input dimensions; None leaves that dimension dynamic.
    Returns ``output``.
    """
    import mindspore as ms
    from .modeling import AlbertForSequenceClassification, AlbertModel
    from .checkpoint import training_max_length
    from .pipelines import label_names
    check_target(output, force)
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"model folder not found: {model_dir}")
    model = (AlbertModel if backbone else AlbertForSequenceClassification).from_pretrained(model_dir)
    model.set_train(False)   # dropout off: the graph is for inference
    config = model.config
    for flag, value in (("--batch", batch), ("--seq", seq)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ExportError(f"{flag} must be a positive integer, got {value!r}")
    if seq is not None and seq > config.max_position_embeddings:
        raise ExportError(f"--seq {seq} is longer than the model's max_position_embeddings "
                          f"({config.max_position_embeddings})")
    metadata = {
        "producer": PRODUCER,
        "kind": "backbone" if backbone else "classifier",
        "inputs": "input_ids,token_type_ids,attention_mask",
        "config": json.dumps(config.to_dict(), sort_keys=True),
        "labels": json.dumps(label_names(model_dir, config.num_labels)),
        "max_length": str(min(training_max_length(model_dir), config.max_position_embeddings)),
    }

    def add_metadata(proto):   # mindspore.export hands us the ModelProto before writing it
        for key, value in metadata.items():
            proto.user_info[key] = value

    spec = ms.Tensor(shape=[batch, seq], dtype=ms.int32)   # None = dynamic
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    prefix = os.path.join(parent, f".{os.path.basename(output)}.tmp-{os.getpid()}")
    tmp = prefix + ".mindir"
    try:
        ms.export(model, spec, spec, spec, file_name=tmp, file_format="MINDIR", custom_func=add_metadata)
        if not os.path.isfile(tmp):
            # Over 1 GB of parameters MindSpore writes <name>_graph.mindir + <name>_variables/ instead.
            raise ExportError(f"{model_dir}: parameters over 1 GB; MindSpore would split the MindIR "
                              f"into a graph file and a variables folder, which this tool does not write")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mindspore.export leaves it read-only; make it an ordinary file
        os.replace(tmp, output)
    finally:
        for leftover in glob.glob(glob.escape(prefix) + "*"):
            if os.path.isdir(leftover):
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                os.remove(leftover)
    return output


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m albert_min.export", description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", help="model folder (config.json, model.ckpt)")
    p.add_argument("output", help="the .mindir file to write")
    p.add_argument("--backbone", action="store_true",
                   help="export AlbertModel (sequence and pooled output) instead of the classifier")
    p.add_argument("--batch", type=int, help="fixed batch size (default: dynamic)")
    p.add_argument("--seq", type=int, help="fixed sequence length (default: dynamic)")
    p.add_argument("--force", action="store_true", help="replace an existing MindIR that albert_min wrote")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        import mindspore as ms
        ms.set_device("CPU")
        export_mindir(args.model_dir, args.output, args.backbone, args.batch, args.seq, args.force)
    except (AlbertMinError, OSError) as err:
        sys.exit(f"error: {err}")
    checkpoint = os.path.join(args.model_dir, "model.ckpt")
    size = os.path.getsize(args.output)
    print(f"wrote {args.output} ({size / 1e6:.2f} MB; model.ckpt {os.path.getsize(checkpoint) / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
