"""What a transformers + torch user runs instead of albert_min's scripts, for benchmarks/whole_process.py
(dev-time only: albert_min never imports torch or transformers).

    python benchmarks/hf_reference.py evaluate HF_DIR DEV.tsv
    python benchmarks/hf_reference.py train HF_DIR TRAIN.tsv OUT --steps 20 --batch-size 64 --max-length 64

HF_DIR is an albert_min model folder written by ``python -m albert_min.convert --to hf``.

* evaluate: transformers' ``pipeline("text-classification", batch_size=64)`` over the sentences of a
  GLUE-style TSV (sentence<TAB>label); prints the accuracy as JSON.
* train: the loop train.py runs, written with torch: the TSV tokenised, batches in a seeded random
  order, AdamW (eps 1e-6, weight decay 0.01 but not on biases and LayerNorm weights), linear warm-up
  (10%) and decay, global-norm clipping at 1, the config's dropout; the model saved with
  ``save_pretrained`` at the end; prints the mean loss as JSON.
"""

import argparse
import csv
import json
import sys

import numpy as np


def read_tsv(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = rows[0]
    column = header.index("sentence")
    return [r[column] for r in rows[1:]], [int(r[header.index("label")]) for r in rows[1:]]


def evaluate(args):
    from transformers import pipeline
    sentences, labels = read_tsv(args.data)
    classify = pipeline("text-classification", model=args.model, device="cpu", batch_size=64)
    label2id = classify.model.config.label2id
    predicted = [label2id[out["label"]] for out in classify(sentences, truncation=True)]
    print(json.dumps({"accuracy": float(np.mean(np.array(predicted) == np.array(labels)))}))


def train(args):
    import torch
    import transformers
    torch.manual_seed(42)
    sentences, labels = read_tsv(args.data)
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    model = transformers.AlbertForSequenceClassification.from_pretrained(args.model)
    encoded = tokenizer(sentences, truncation=True, max_length=args.max_length)
    order = np.random.default_rng(42).permutation(len(sentences))
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and "LayerNorm" not in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, max(1, round(0.1 * args.steps)), args.steps)
    model.train()
    losses = []
    for step in range(args.steps):
        rows = order[step * args.batch_size:(step + 1) * args.batch_size]
        batch = tokenizer.pad({key: [encoded[key][i] for i in rows] for key in encoded}, return_tensors="pt")
        loss = model(**batch, labels=torch.tensor([labels[i] for i in rows])).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss))
    model.save_pretrained(args.output)
    print(json.dumps({"loss": float(np.mean(losses)), "steps": args.steps}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("evaluate")
    e.add_argument("model")
    e.add_argument("data")
    t = sub.add_parser("train")
    t.add_argument("model")
    t.add_argument("data")
    t.add_argument("output")
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--max-length", type=int, default=64)
    t.add_argument("--lr", type=float, default=2e-5)
    args = p.parse_args()
    (evaluate if args.command == "evaluate" else train)(args)


if __name__ == "__main__":
    sys.exit(main())
