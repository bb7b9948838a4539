"""How closely int8 prediction follows float32 on real text: issue 43's check on a random albert-base-sized model.

    python3 benchmarks/int8_agreement.py                    # SST-2 dev, base preset, random weights (seed 0)
    python3 benchmarks/int8_agreement.py --rows 200         # the first 200 sentences only

One process builds the classifier with random weights (the preset, 2 labels), accelerated as evaluate.py
runs it, and a copy with the same weights after ``kernels.quantize_int8``; both predict SST-2 dev through
evaluate.py's path (``prediction_engine.predict_logits``, weights/sst2-small's tokenizer, length 128).
Printed: the share of sentences whose argmax agrees, the cosine of the two logit matrices (all
sentences' logits as one vector), the largest difference, and the smallest float32 margin among the
sentences that disagree (a random model's two logits are close, so its argmax is the hardest case).
"""

import argparse
import os
import subprocess
import sys

import numpy as np

os.environ.setdefault("GLOG_v", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # int8_speed
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="base", help="preset name (default: %(default)s)")
    p.add_argument("--data", default=DEV, help="an SST-2 layout TSV (default: SST-2 dev)")
    p.add_argument("--rows", type=int, default=0, help="the first N sentences only (0: all)")
    args = p.parse_args()
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    from albert_min import get_task
    from albert_min.model.config import AlbertConfig
    from albert_min.tasks.prediction_engine import predict_logits
    from int8_speed import paired_models
    from tokenizer import AlbertTokenizer

    plain, quantized, _ = paired_models(AlbertConfig.preset(args.config))
    texts = get_task("sst2").read(args.data).texts
    texts = texts[:args.rows] if args.rows else texts
    tokenizer = AlbertTokenizer.from_pretrained(os.path.join(ROOT, "weights", "sst2-small"))
    logits = {name: predict_logits(model, tokenizer, texts, max_length=128, progress=False)[0]
              for name, model in (("float32", plain), ("int8", quantized))}
    f, q = logits["float32"], logits["int8"]
    agree = f.argmax(-1) == q.argmax(-1)
    cosine = float((f * q).sum() / np.linalg.norm(f) / np.linalg.norm(q))
    margins = np.abs(f[:, 0] - f[:, 1])
    print(f"{args.config}-sized random classifier, {len(texts)} sentences of {os.path.relpath(args.data)}:")
    print(f"  argmax agrees on {agree.mean() * 100:.2f}% ({int(agree.sum())} of {len(texts)}), goal >= 99%")
    print(f"  cosine of the logits {cosine:.6f}, goal >= 0.999; largest difference {np.abs(f - q).max():.4g}")
    print(f"  float32 margin |l0 - l1|: median {np.median(margins):.4g}"
          + (f"; smallest where they disagree {margins[~agree].min():.4g}" if (~agree).any() else ""))
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
