"""The paper's ablations in miniature (issue 9): Table 3 (embedding size E), Table 4
(cross-layer sharing) and Table 5 (NSP vs SOP), every variant on one fixed small budget.

    python3 docs/make_ablations.py run sop e64 nsp     # each: pre-train, fine-tune SST-2, fine-tune MRPC
    python3 docs/make_ablations.py run sop --seed 7    # a second seed
    python3 docs/make_ablations.py run scratch         # the control: fine-tuning without pre-training
    python3 docs/make_ablations.py table               # the tables of docs/ablations.md, from the results

A variant is the baseline (E=128, one block shared by all L=4 loops, MLM+SOP) with one
flag changed. All use the same seed, steps and tokenizer (the committed pre-trained
model's spiece.model), so they differ only in what the paper's table varies. The
control ``scratch`` is the baseline's model fine-tuned from random weights with the
same fine-tuning budget: what the pre-training adds downstream. Each
finished variant is written to docs/ablations/<variant>-seed<seed>.json with its
commands, wall times and scores; the runs themselves go to runs/ablations/ (not
committed), and a variant interrupted mid-way continues where it stopped (train.py --resume).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "ablations")
DOC = os.path.join(ROOT, "docs", "ablations.md")
TOKENIZER = "weights/pretrained-small/spiece.model"

# The model's size and vocabulary, the same in every variant but the flag it changes.
MODEL = ["--tokenizer", TOKENIZER, "--hidden-size", "128", "--layers", "4", "--heads", "4", "--intermediate-size", "512"]
# The fixed budget: steps, not minutes, so a busy machine changes the wall time, not the result.
PRETRAIN = ["--text", "../shared/data/pretrain/movie_reviews.txt", *MODEL, "--dropout", "0",
            "--max-length", "64", "--batch-size", "64", "--lr", "1e-3", "--warmup", "0.02", "--epochs", "100",
            "--max-steps", "2000", "--eval-every", "500"]
SST2 = ["--train", "../shared/data/sst2/train.tsv", "--dev", "../shared/data/sst2/dev.tsv", "--dropout", "0.1",
        "--max-steps", "1000", "--eval-every", "250"]
MRPC = ["--train", "../shared/data/glue/MRPC/train.tsv", "--dev", "../shared/data/glue/MRPC/dev.tsv",
        "--dropout", "0.1", "--max-length", "128", "--batch-size", "32", "--epochs", "3"]

BASELINE = {"--task": "sop", "--embedding-size": "128", "--sharing": "all"}
VARIANTS = {   # name: (table, what it changes)
    "sop": ("3 4 5", {}),
    "e32": ("3", {"--embedding-size": "32"}),
    "e64": ("3", {"--embedding-size": "64"}),
    "attention": ("4", {"--sharing": "attention"}),
    "ffn": ("4", {"--sharing": "ffn"}),
    "none": ("4", {"--sharing": "none"}),
    "nsp": ("5", {"--task": "nsp"}),
    "mlm": ("5", {"--task": "mlm"}),
    "scratch": ("control", {}),     # no pre-training: the baseline fine-tuned from random weights
}
SCRATCH = "scratch"
DEFAULT_SEED = 42


def train(flags, out, log):
    """train.py into ``out`` (continuing an interrupted run), its stdout in ``log``; -> wall seconds."""
    extra = ["--resume"] if os.path.isdir(out + ".state") else ["--force"] if os.path.exists(out) else []
    command = [sys.executable, "train.py", *flags, "--output", out, "--quiet", *extra]
    start = time.time()
    with open(log, "a", encoding="utf-8") as f:
        print("$ " + " ".join(command[1:]), file=f, flush=True)
        if subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode:
            sys.exit(f"error: {' '.join(command[1:])} failed; see {log}")
    return time.time() - start


def kept_metrics(out):
    """The record of the model train.py kept in ``out`` (best held-out MLM / dev score)."""
    with open(os.path.join(out, "train_metrics.json"), encoding="utf-8") as f:
        return json.load(f)


def backbone_parameters(out):
    from albert_min.model.config import load_config
    return load_config(out).parameter_count()


def stages(name, seed, pretrained):
    """train.py's flags for each stage of a variant: pre-train, then fine-tune SST-2 and MRPC from it
    (the control: SST-2 and MRPC from random weights of the baseline's size and vocabulary)."""
    settings = {**BASELINE, **VARIANTS[name][1]}
    flags = [f for pair in settings.items() for f in pair]
    seed_flags = ["--seed", str(seed)]
    if name == SCRATCH:     # every flag but the pre-training task
        model = [f for pair in settings.items() if pair[0] != "--task" for f in pair] + MODEL
        return {"sst2": [*model, *SST2, *seed_flags], "mrpc": [*model, *MRPC, *seed_flags]}
    return {"pretrain": [*flags, *PRETRAIN, *seed_flags],
            "sst2": ["--init", pretrained, *SST2, *seed_flags],
            "mrpc": ["--init", pretrained, *MRPC, *seed_flags]}


def recorded_command(flags, stage):
    return "python3 train.py " + " ".join(flags) + f" --output {stage}"


def on_this_budget(result):
    """Whether a result was made with the budget this script runs now: the command of its first
    stage (the pre-training; the control's SST-2 fine-tuning), the one that names no earlier run."""
    first, expected = next(iter(stages(result["variant"], result["seed"], "pretrain").items()))
    return result[first]["command"] == recorded_command(expected, first)


def run_variant(name, seed, runs):
    result_path = os.path.join(RESULTS, f"{name}-seed{seed}.json")
    if os.path.exists(result_path):
        if not on_this_budget(read_result(result_path)):
            sys.exit(f"error: {os.path.relpath(result_path, ROOT)}: made with another budget; "
                     "move it aside to rerun this variant")
        print(f"{name} seed {seed}: done already ({os.path.relpath(result_path, ROOT)})")
        return
    folder = os.path.join(runs, f"{name}-seed{seed}")
    os.makedirs(folder, exist_ok=True)
    log = os.path.join(folder, "log.txt")
    pretrained = os.path.join(folder, "pretrain")
    result = {"variant": name, "tables": VARIANTS[name][0], "seed": seed, "changes": VARIANTS[name][1]}
    variant_stages = stages(name, seed, pretrained)
    for stage, flags in variant_stages.items():
        out = os.path.join(folder, stage)
        print(f"{name} seed {seed}: {stage} ...", flush=True)
        wall = train(flags, out, log)
        result[stage] = {"command": recorded_command(flags, stage), "wall_s": round(wall, 1), "kept": kept_metrics(out)}
    result["backbone_parameters"] = backbone_parameters(os.path.join(folder, next(iter(variant_stages))))
    os.makedirs(RESULTS, exist_ok=True)
    tmp = result_path + ".tmp-write"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, result_path)
    print(f"{name} seed {seed}: {json.dumps(summary(result))}", flush=True)


def summary(result):
    """The table's numbers (percent); None for the pre-training scores of the control, which has none."""
    sst2, mrpc = (result[s]["kept"] for s in ("sst2", "mrpc"))
    pre = result["pretrain"]["kept"] if result["variant"] != SCRATCH else {}
    held_out = {task: pre[f"heldout_{task}_accuracy"] * 100 if pre else None for task in ("mlm", "sop", "nsp")}
    return {"params_M": result["backbone_parameters"] / 1e6, **held_out,
            "sst2": sst2["dev_accuracy"] * 100, "mrpc_f1": mrpc["dev_f1"] * 100, "mrpc_acc": mrpc["dev_accuracy"] * 100}


# ---------------------------------------------------------------------- tables
COLUMNS = [("params", "params_M", "{:.2f}M"), ("held-out MLM", "mlm", "{:.1f}"), ("SOP", "sop", "{:.1f}"),
           ("NSP", "nsp", "{:.1f}"), ("SST-2 dev", "sst2", "{:.2f}"), ("MRPC dev F1 / acc", None, None)]
ROWS = {"3": [("e32", "E=32"), ("e64", "E=64"), ("sop", "E=128 (= H)")],
        "4": [("sop", "all-shared"), ("attention", "shared-attention"), ("ffn", "shared-FFN"), ("none", "not-shared")],
        "5": [("mlm", "none (MLM only)"), ("nsp", "NSP"), ("sop", "SOP")],
        "control": [("scratch", "no pre-training"), ("sop", "SOP (the baseline)")]}
TITLES = {"3": "Table 3 in miniature", "4": "Table 4 in miniature", "5": "Table 5 in miniature",
          "control": "Control: the baseline's model fine-tuned without pre-training"}


# The paper's ALBERT-base rows for the same variants (arXiv 1909.11942v6; Table 3's all-shared rows,
# Table 4's E=128 rows, Table 5): parameters, then its downstream SST-2 dev accuracy and the average
# over its five downstream scores, and for Table 5 the intrinsic MLM / NSP / SOP accuracies.
PAPER = {"3": {"e64": "10M · SST-2 89.4 · avg 79.0", "sop": "12M · SST-2 90.3 · avg 80.1"},
         "4": {"sop": "12M · SST-2 90.3 · avg 80.1", "attention": "64M · SST-2 91.9 · avg 81.7",
               "ffn": "38M · SST-2 91.7 · avg 80.2", "none": "89M · SST-2 91.5 · avg 81.6"},
         "5": {"mlm": "MLM 54.9 · NSP 52.4 · SOP 53.3 · SST-2 89.9 · avg 79.0",
               "nsp": "MLM 54.5 · NSP 90.5 · SOP 52.0 · SST-2 91.1 · avg 79.2",
               "sop": "MLM 54.0 · NSP 78.9 · SOP 86.5 · SST-2 90.3 · avg 80.1"},
         "control": {"sop": "12M · SST-2 90.3 · avg 80.1"}}


def seed_order(seed):
    """The default seed first (every variant has it), then the others by number: 42, 7, 11."""
    return (seed != DEFAULT_SEED, seed)


def load_results():
    """Each variant's results on this budget as (seed, summary) pairs, in seed_order."""
    results = {}
    for file in sorted(os.listdir(RESULTS)) if os.path.isdir(RESULTS) else []:
        if re.fullmatch(r"[a-z0-9]+-seed\d+\.json", file):
            path = os.path.join(RESULTS, file)
            result = read_result(path)
            if not on_this_budget(result):
                print(f"note: {os.path.relpath(path, ROOT)}: made with another budget; left out of the tables")
                continue
            results.setdefault(result["variant"], []).append((result["seed"], summary(result)))
    return {name: sorted(runs, key=lambda run: seed_order(run[0])) for name, runs in results.items()}


def read_result(path):
    """A result file as run_variant writes it, checked far enough for the budget test and the tables."""
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        if result["variant"] not in VARIANTS:
            raise KeyError(f"unknown variant {result['variant']!r}")
        if type(result["seed"]) is not int:     # the tables sort seeds as numbers
            raise TypeError(f"seed {result['seed']!r} is not a whole number")
        on_this_budget(result)
        summary(result)
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
        sys.exit(f"error: {path}: not a result as make_ablations.py writes it ({type(err).__name__}: {err})")
    return result


def cell(values, key, fmt):
    """One seed (or seeds that agree, as parameter counts do): the number; else their mean, then each seed's.
    A score the variant has not got (the control's pre-training scores) is "-"."""
    numbers = [v[key] for v in values]
    if None in numbers:
        return "-"
    if len({fmt.format(n) for n in numbers}) == 1:
        return fmt.format(numbers[0])
    mean = fmt.format(sum(numbers) / len(numbers))
    return f"{mean} ({', '.join(fmt.format(n) for n in numbers)})"


def tables(results):
    lines = []
    for table, rows in ROWS.items():
        lines += [f"**{TITLES[table]}**", "",
                  "| variant | seeds | " + " | ".join(c[0] for c in COLUMNS) + " | paper (ALBERT-base) |",
                  "| --- | ---: |" + " ---: |" * len(COLUMNS) + " --- |"]
        for name, label in rows:
            runs = results.get(name)
            paper = PAPER[table].get(name, "not in the paper")
            if not runs:
                lines.append(f"| {label} | - |" + " not run yet |" * len(COLUMNS) + f" {paper} |")
                continue
            seeds, values = [seed for seed, _ in runs], [scores for _, scores in runs]
            cells = [cell(values, key, fmt) for _, key, fmt in COLUMNS[:-1]]
            cells.append(cell(values, "mrpc_f1", "{:.2f}") + " / " + cell(values, "mrpc_acc", "{:.2f}"))
            lines.append(f"| {label} | {', '.join(map(str, seeds))} | " + " | ".join(cells) + f" | {paper} |")
        lines.append("")
    return "\n".join(lines)


BEGIN, END = "<!-- tables: written by docs/make_ablations.py table -->", "<!-- end of tables -->"


def write_tables():
    """Replace the generated block of docs/ablations.md; the prose around it is kept."""
    block = f"{BEGIN}\n{tables(load_results())}{END}"
    text = open(DOC, encoding="utf-8").read() if os.path.exists(DOC) else f"# Ablations in miniature\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        sys.exit(f"error: {DOC}: lacks the markers {BEGIN!r} ... {END!r}; put them back around the tables")
    head, rest = text.split(BEGIN, 1)
    text = head + block + rest.split(END, 1)[1]
    with open(DOC + ".tmp-write", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(DOC + ".tmp-write", DOC)
    print(f"wrote {os.path.relpath(DOC, ROOT)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="pre-train and fine-tune variants")
    run.add_argument("variants", nargs="+", choices=list(VARIANTS))
    run.add_argument("--seed", type=int, default=DEFAULT_SEED)
    run.add_argument("--runs", default=os.path.join(ROOT, "runs", "ablations"), help="where the runs go")
    sub.add_parser("table", help="write the tables of docs/ablations.md from docs/ablations/*.json")
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    if args.command == "run":
        if not os.path.exists(os.path.join(ROOT, TOKENIZER)):
            sys.exit(f"error: {TOKENIZER}: missing; the ablations use the committed pre-trained model's tokenizer")
        for name in args.variants:
            run_variant(name, args.seed, os.path.abspath(args.runs))
    write_tables()


if __name__ == "__main__":
    main()
