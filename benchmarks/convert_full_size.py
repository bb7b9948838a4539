"""Convert full-size ALBERT checkpoints (random weights at the real shapes): time, memory, equality.

    python benchmarks/convert_full_size.py                  # base v2 and xxlarge v2
    python benchmarks/convert_full_size.py --sizes base

For each size it writes, under a temporary folder in /tmp (deleted afterwards),
an HF-style folder (config.json + pytorch_model.bin, then model.safetensors)
holding albert.* + predictions.* like the HF albert-*-v2 releases, and a Google
TF bundle with Adam slots (weights + adam_m + adam_v: about 3x the weights). The
files are written by tests/helpers/checkpoint_writers.py (no torch or TF needed).
Each is converted by ``python -m albert_min.convert`` in a subprocess; printed:
wall time, the subprocess's peak RSS (``getrusage(RUSAGE_CHILDREN).ru_maxrss``),
that peak minus the peak of converting a tiny fixture (interpreter + MindSpore),
and its ratio to the weights' float32 size. The converted model.ckpt is then
compared with the source weights, exactly. Finally crc32c speed, C vs pure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from helpers.checkpoint_writers import write_safetensors, write_tf_bundle, write_torch_bin  # noqa: E402

SIZES = {   # albert-base-v2 and albert-xxlarge-v2 config.json values
    "base": dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    "xxlarge": dict(hidden_size=4096, num_attention_heads=64, intermediate_size=16384),
}
COMMON = dict(vocab_size=30000, embedding_size=128, num_hidden_layers=12, num_hidden_groups=1, inner_group_num=1,
              hidden_act="gelu_new", max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, model_type="albert",
              architectures=["AlbertForMaskedLM"])
LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0."
TF_LAYER = "bert/encoder/transformer/group_0/inner_group_0/"


def hf_and_tf_names(c):
    """[(HF name, TF name or None, HF shape)] of AlbertForMaskedLM; TF kernels are the transpose."""
    V, E, H, I, P, T = (c["vocab_size"], c["embedding_size"], c["hidden_size"], c["intermediate_size"],
                        c["max_position_embeddings"], c["type_vocab_size"])
    out = [("albert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", (V, E)),
           ("albert.embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", (P, E)),
           ("albert.embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", (T, E))]
    def dense(hf, tf, n_out, n_in):
        return [(hf + ".weight", tf + "/kernel", (n_out, n_in)), (hf + ".bias", tf + "/bias", (n_out,))]
    def norm(hf, tf, n):
        return [(hf + ".weight", tf + "/gamma", (n,)), (hf + ".bias", tf + "/beta", (n,))]
    out += norm("albert.embeddings.LayerNorm", "bert/embeddings/LayerNorm", E)
    out += dense("albert.encoder.embedding_hidden_mapping_in", "bert/encoder/embedding_hidden_mapping_in", H, E)
    for part in ("query", "key", "value"):
        out += dense(LAYER + "attention." + part, TF_LAYER + "attention_1/self/" + part, H, H)
    out += dense(LAYER + "attention.dense", TF_LAYER + "attention_1/output/dense", H, H)
    out += norm(LAYER + "attention.LayerNorm", TF_LAYER + "LayerNorm", H)
    out += dense(LAYER + "ffn", TF_LAYER + "ffn_1/intermediate/dense", I, H)
    out += dense(LAYER + "ffn_output", TF_LAYER + "ffn_1/intermediate/output/dense", H, I)
    out += norm(LAYER + "full_layer_layer_norm", TF_LAYER + "LayerNorm_1", H)
    out += dense("albert.pooler", "bert/pooler/dense", H, H)
    out += dense("predictions.dense", "cls/predictions/transform/dense", E, H)
    out += norm("predictions.LayerNorm", "cls/predictions/transform/LayerNorm", E)
    out += [("predictions.bias", "cls/predictions/output_bias", (V,))]
    return out


def random_weights(names, seed=0):
    rng = np.random.default_rng(seed)
    return {hf: (rng.standard_normal(shape, dtype=np.float32) * 0.02) for hf, _, shape in names}


def run_convert(src, dst):
    """(wall s, peak RSS MB, stderr) of ``python -m albert_min.convert`` in a fresh subprocess."""
    probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "
             "r.returncode); sys.stderr.write(r.stderr + r.stdout)")
    done = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "albert_min.convert", src, dst,
                           "--allow-missing-heads"], cwd=ROOT, capture_output=True, text=True)
    wall, rss, code = done.stdout.split()
    if code != "0":
        raise SystemExit(f"conversion of {src} failed:\n{done.stderr}")
    return float(wall), float(rss)


def check_equal(dst, weights):
    import mindspore as ms
    params = ms.load_checkpoint(os.path.join(dst, "model.ckpt"))
    for name, array in weights.items():
        if not np.array_equal(params[name].asnumpy(), array):
            raise SystemExit(f"{dst}: {name} differs from the source")
    extra = set(params) - set(weights)
    if extra:
        raise SystemExit(f"{dst}: unexpected tensors {sorted(extra)[:5]}")


def crc_speed():
    from albert_min.checkpoints.formats import crc32c as crc
    data = np.random.default_rng(1).integers(0, 256, 256 << 20, dtype=np.uint8).tobytes()
    rows = []
    for label, fn in (("google-crc32c (C)", crc._EXTEND_C and (lambda d: crc.crc32c(d))),
                      ("pure Python/numpy", crc.crc32c_python)):
        if not fn:
            rows.append((label, None))
            continue
        t = time.perf_counter()
        fn(data)
        rows.append((label, len(data) / (time.perf_counter() - t) / 1e6))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    p.add_argument("--formats", nargs="+", default=["pytorch", "safetensors", "tf"])
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="albert_min_fullsize_")
    rows = []
    try:
        base_wall, base_rss = run_convert(os.path.join(ROOT, "tests", "fixtures", "tiny_classifier"),
                                          os.path.join(tmp, "tiny_out"))
        shutil.rmtree(os.path.join(tmp, "tiny_out"))
        print(f"baseline (tiny fixture: interpreter + MindSpore): {base_wall:.1f} s, {base_rss:.0f} MB")
        for size in args.sizes:
            config = dict(COMMON, **SIZES[size])
            names = hf_and_tf_names(config)
            weights = random_weights(names)
            mb = sum(a.nbytes for a in weights.values()) / 2 ** 20
            for fmt in args.formats:
                src = os.path.join(tmp, f"{size}_{fmt}")
                os.makedirs(src)
                if fmt == "tf":
                    with open(os.path.join(src, "albert_config.json"), "w") as f:
                        json.dump({k: v for k, v in config.items() if k not in ("model_type", "architectures")}, f)
                    tf = {}
                    for hf, tf_name, _ in names:
                        array = weights[hf].T if tf_name.endswith("/kernel") else weights[hf]
                        tf[tf_name] = tf[tf_name + "/adam_m"] = tf[tf_name + "/adam_v"] = array
                    tf["global_step"] = np.array(100000, np.int64)
                    write_tf_bundle(tf, os.path.join(src, "model.ckpt-100000"))
                    del tf
                else:
                    with open(os.path.join(src, "config.json"), "w") as f:
                        json.dump(config, f)
                    if fmt == "pytorch":
                        tied = dict(weights, **{"predictions.decoder.weight":
                                                weights["albert.embeddings.word_embeddings.weight"],
                                                "predictions.decoder.bias": weights["predictions.bias"]})
                        write_torch_bin(tied, os.path.join(src, "pytorch_model.bin"))
                    else:
                        write_safetensors(weights, os.path.join(src, "model.safetensors"))
                file_mb = sum(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)) / 2 ** 20
                dst = os.path.join(tmp, f"{size}_{fmt}_out")
                wall, rss = run_convert(src, dst)
                check_equal(dst, weights)
                shutil.rmtree(src)
                shutil.rmtree(dst)
                row = (size, fmt, mb, file_mb, wall, rss, rss - base_rss, (rss - base_rss) / mb, rss / mb)
                rows.append(row)
                print("{:8s} {:12s} weights {:6.0f} MB  file {:6.0f} MB  {:6.1f} s  peak RSS {:6.0f} MB  "
                      "(+{:.0f} MB over baseline = {:.2f}x weights; raw {:.2f}x)  equal: yes".format(*row), flush=True)
            del weights
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\ncrc32c on 256 MB:")
    for label, speed in crc_speed():
        print(f"  {label:20s} " + (f"{speed:8.0f} MB/s  (2.7 GB TF bundle: {2700 / speed:6.1f} s)"
                                   if speed else "not installed"))


if __name__ == "__main__":
    main()
