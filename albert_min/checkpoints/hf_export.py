"""Write an albert_min model folder as a Hugging Face folder that transformers loads.

    python -m albert_min.convert --to hf weights/DIR out/

The folder holds what ``save_pretrained`` writes for ALBERT:

* ``config.json``: transformers' keys only (``model_type: albert``, the token ids
  of ALBERT's vocabulary, ``id2label``/``label2id``) and ``architectures``, the
  classes of the heads the checkpoint holds;
* ``model.safetensors`` (``safetensors.numpy``, metadata ``format: pt``): the
  tensors under transformers' names, which are albert_min's names (a folder
  without heads is an ``AlbertModel``, whose names have no ``albert.`` prefix).
  The MLM decoder is tied to the word embeddings and ``predictions.bias``, so,
  as ``save_pretrained`` does, it is left out and transformers ties it on load;
* ``spiece.model``, when the folder has one.

What transformers cannot represent is refused by name: ``cross_layer_sharing``
other than ``all`` (transformers' ALBERT shares whole layers only), and Google's
loop -> group formula where it runs a loop with another group than transformers'
formula would (``modeling.loop_group``). The folder is written atomically, with
the same rules as every albert_min output (``safe_output``).

Layer: ``albert_min.checkpoints``, above ``model`` (the layers: ``albert_min/__init__.py``).
"""

import json
import os
import shutil

from ..model.config import load_config
from ..common.errors import OutputExistsError
from .formats import ConversionError

HF_WEIGHTS_FILE = "model.safetensors"
# ALBERT's SentencePiece vocabulary: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3 (transformers' AlbertConfig defaults).
_TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
# albert_min's config fields that transformers' AlbertConfig has under the same name.
_HF_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
              "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
              "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
              "initializer_range", "classifier_dropout_prob")


def check_representable(config, source):
    """Refuse, by name, a model transformers' ALBERT would run differently."""
    from ..model.modeling import loop_group
    if config.cross_layer_sharing != "all":
        raise ConversionError(f"{source}: cross_layer_sharing {config.cross_layer_sharing!r} cannot be written "
                              "for transformers, whose ALBERT shares whole layers only ('all')")
    if config.group_mapping == "google":
        L, G = config.num_hidden_layers, config.num_hidden_groups
        moved = [i for i in range(L) if loop_group(i, L, G, "google") != loop_group(i, L, G, "hf")]
        if moved:
            raise ConversionError(
                f"{source}: group_mapping 'google' runs loop(s) {moved} with another group than transformers' "
                f"formula does (L={L}, G={G}); transformers cannot represent this model")


def hf_config(config, architectures) -> dict:
    """transformers' config.json for ``config`` (an AlbertConfig) and the given classes."""
    data = {name: getattr(config, name) for name in _HF_FIELDS}
    names = config.id2label or {i: f"LABEL_{i}" for i in range(config.num_labels)}
    data.update(_TOKEN_IDS, model_type="albert", architectures=list(architectures),
                position_embedding_type="absolute",
                id2label={str(i): names[i] for i in range(config.num_labels)},
                label2id={names[i]: i for i in range(config.num_labels)})
    if config.problem_type is not None:
        data["problem_type"] = config.problem_type
    return data


def hf_tensors(arrays, architectures) -> dict:
    """transformers' names: ours, but without ``albert.`` when the model is a bare ``AlbertModel``."""
    if list(architectures) == ["AlbertModel"]:
        return {name[len("albert."):]: a for name, a in arrays.items()}
    return dict(arrays)


def export_hf(model_dir, dst, force=False, classifier_class=None) -> dict:
    """Write the albert_min model folder ``model_dir`` as a transformers folder ``dst``.

    ``classifier_class``: which transformers class a ``classifier.*`` head belongs to
    (its tensors look the same for sequence, token and multiple-choice
    classification); default ``AlbertForSequenceClassification``.
    Returns a report: source, dst, architectures, tensors, parameters, spiece.
    """
    import numpy as np
    from safetensors.numpy import save_file
    from ..model.folder import (CONFIG_FILE, SPIECE_FILE, check_recorded_sha256, folder_tokenizer, read_checkpoint,
                                weights_file)
    from .names import CLASSIFIER_CLASSES, HEADS, model_classes
    from ..common.safe_output import atomic_directory
    if os.path.exists(dst) and not force:
        raise OutputExistsError(dst)
    if os.path.realpath(dst).startswith(os.path.realpath(model_dir).rstrip(os.sep) + os.sep):
        raise ConversionError(f"{dst}: refusing to write here, inside the model folder {model_dir}")
    if classifier_class is not None and classifier_class not in CLASSIFIER_CLASSES:
        raise ConversionError(f"classifier class {classifier_class!r} is not one of {CLASSIFIER_CLASSES}")
    config = load_config(os.path.join(model_dir, CONFIG_FILE))
    check_representable(config, os.path.join(model_dir, CONFIG_FILE))
    arrays = read_checkpoint(weights_file(model_dir))   # model.ckpt or MindSpore's model.safetensors
    heads = [h for h, prefix in HEADS.items() if any(n.startswith(prefix) for n in arrays)]
    architectures = [c.__name__ for c in model_classes(heads, [classifier_class] if classifier_class else [])]
    tensors = {n: np.ascontiguousarray(a, dtype=np.float32) for n, a in hf_tensors(arrays, architectures).items()}
    spiece = os.path.join(model_dir, SPIECE_FILE)
    spiece = spiece if os.path.isfile(spiece) else None
    if spiece:
        check_recorded_sha256(spiece)   # the tokenizer albert_min wrote with these weights, not another model's
        folder_tokenizer(model_dir, config.vocab_size, ConversionError)   # and its ids fit the embeddings
    with atomic_directory(dst, overwrite=force, protect=(model_dir,), kind="hf-model") as tmp:
        with open(os.path.join(tmp, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(hf_config(config, architectures), f, indent=2, sort_keys=True)
            f.write("\n")
        save_file(tensors, os.path.join(tmp, HF_WEIGHTS_FILE), metadata={"format": "pt"})
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(os.path.join(tmp, HF_WEIGHTS_FILE), 0o666 & ~umask)   # the package writes it private (0600)
        if spiece:
            shutil.copyfile(spiece, os.path.join(tmp, SPIECE_FILE))
    return {"source": model_dir, "dst": dst, "architectures": architectures, "tensors": len(tensors),
            "parameters": sum(a.size for a in tensors.values()), "spiece": spiece}


def summary(report) -> str:
    tied = {"AlbertForMaskedLM", "AlbertForPreTraining"} & set(report["architectures"])
    return "\n".join([
        f"exported {report['source']} -> {report['dst']} (Hugging Face layout)",
        f"  architectures: {', '.join(report['architectures'])}",
        f"  tensors:       {report['tensors']} ({report['parameters']:,} parameters"
        + ("; the MLM decoder is tied to the word embeddings, not stored)" if tied else ")"),
        f"  tokenizer:     {report['spiece'] or 'none (the model folder has no spiece.model)'}",
        f"  load with:     transformers.{report['architectures'][0]}.from_pretrained({report['dst']!r})",
    ])
