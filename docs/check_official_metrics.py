"""Run the official scoring scripts on files albert_min writes and compare with its own metrics.

    python3 docs/check_official_metrics.py --squad-v1 evaluate-v1.1.py --squad-v2 evaluate-v2.0.py \
        --conlleval conlleval.pl            # any of the three; about 30 s on 2 cores

The scripts are not in this repository (download them from the SQuAD site and the CoNLL
shared task); give their paths. Predictions are made up but varied: gold answers, gold
answers with other case and punctuation, and the longest-overlap sentence heuristics of
task_baselines.py for SQuAD (2% of questions left out for v1.1; for v2.0 a third of dev-v1.1
turned unanswerable, 30% "" predictions, random null odds, thresholds 1.0 and 0.5); the
per-word majority tagger with 5% random tags (B- ones included) for CoNLL eng.testb.
albert_min writes the official files (predictions.json, null_odds.json, the conlleval
column file), the official script reads them, and every number must be equal. Prints
"agree" per script, or the first difference and exits 1.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "docs")]
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")

from albert_min.tasks.conll import metric as conll_metric  # noqa: E402
from albert_min.tasks.conll import reading as conll_reading  # noqa: E402
from albert_min.tasks.conll import writing as conll_writing  # noqa: E402
from albert_min.tasks.squad import decode as squad_decode  # noqa: E402
from albert_min.tasks.squad import metric as squad_metric  # noqa: E402
from albert_min.tasks.squad import reading as squad_reading  # noqa: E402
from task_baselines import overlap_answers  # noqa: E402


def made_up_answers(examples, rng):
    preds = {}
    for e in examples:
        r = rng.random()
        if not e.answers:   # v2.0's unanswerable ones: the heuristics
            preds[e.qid] = overlap_answers(e)[r < 0.5]
        elif r < 0.3:
            preds[e.qid] = e.answers[0][0]
        elif r < 0.4:
            preds[e.qid] = e.answers[-1][0].upper() + "."
        else:
            preds[e.qid] = overlap_answers(e)[0 if r < 0.7 else 1]
    return preds


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])


def compare(name, official, ours):
    for key, value in official.items():
        if ours.get(key) != value:
            sys.exit(f"{name}: {key} official {value!r}, albert_min {ours.get(key)!r}")
    print(f"{name}: agree ({', '.join(f'{k} {v:.4f}' for k, v in official.items() if isinstance(v, float))})")


def check_squad_v1(script, data, out, rng):
    path = os.path.join(data, "squad", "dev-v1.1.json")
    examples, _ = squad_reading.read_squad(path)
    preds = {q: t for q, t in made_up_answers(examples, rng).items() if rng.random() < 0.98}
    squad_decode.write_predictions(out, [squad_decode.Prediction(q, t, 0.0, []) for q, t in preds.items()])
    official = run_json([sys.executable, script, path, os.path.join(out, "predictions.json")])
    compare("SQuAD v1.1", official, squad_metric.evaluate_v1(squad_reading.gold_answers(examples), preds))


def check_squad_v2(script, data, out, rng):
    with open(os.path.join(data, "squad", "dev-v1.1.json"), encoding="utf-8") as f:
        dataset = json.load(f)
    dataset["version"] = "v2.0"
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if rng.random() < 0.33:
                    qa["answers"], qa["is_impossible"] = [], True
    path = os.path.join(out, "dev-v2.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dataset, f)
    examples, _ = squad_reading.read_squad(path)
    preds = [squad_decode.Prediction(q, "" if rng.random() < 0.3 else t, round(rng.uniform(-5, 5), 1), [])
             for q, t in made_up_answers(examples, rng).items()]
    squad_decode.write_predictions(out, preds, version_2=True)
    for threshold in (1.0, 0.5):
        official = run_json([sys.executable, script, path, os.path.join(out, "predictions.json"),
                             "--na-prob-file", os.path.join(out, "null_odds.json"), "--na-prob-thresh", str(threshold)])
        ours = squad_metric.evaluate_v2(squad_reading.gold_answers(examples), {p.qid: p.text for p in preds},
                                        {p.qid: p.null_odds for p in preds}, threshold)
        compare(f"SQuAD v2.0 (threshold {threshold})", official, ours)


def check_conlleval(script, data, out, rng):
    folder = os.path.join(data, "conll2003")
    train = conll_reading.read_conll(os.path.join(folder, "eng.train"))
    tagger, labels = conll_metric.majority_tagger(train), conll_reading.label_names_of(train)
    rows = []
    for s in conll_reading.read_conll(os.path.join(folder, "eng.testb")):
        rows.append((s.words, s.tags, [rng.choice(labels) if rng.random() < 0.05 else t for t in tagger(s.words)]))
    path = os.path.join(out, "conll.txt")
    conll_writing.write_columns(path, rows)
    with open(path, encoding="utf-8") as f:
        official = subprocess.run(["perl", script], stdin=f, capture_output=True, text=True, check=True).stdout.strip()
    ours = conll_metric.format_report(conll_metric.evaluate([(gold, pred) for _, gold, pred in rows]))
    if official != ours:
        sys.exit(f"conlleval differs:\n{official}\n--- albert_min:\n{ours}")
    print("conlleval: agree (its whole report, character for character)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--squad-v1", help="path of the official evaluate-v1.1.py")
    p.add_argument("--squad-v2", help="path of the official evaluate-v2.0.py")
    p.add_argument("--conlleval", help="path of conlleval (the Perl script)")
    p.add_argument("--data", default=DATA, help="the folder holding squad/ and conll2003/")
    args = p.parse_args()
    if not (args.squad_v1 or args.squad_v2 or args.conlleval):
        p.error("give at least one of --squad-v1, --squad-v2, --conlleval")
    with tempfile.TemporaryDirectory(prefix="albert_min_official_") as out:
        for script, check in ((args.squad_v1, check_squad_v1), (args.squad_v2, check_squad_v2),
                              (args.conlleval, check_conlleval)):
            if script:
                check(script, args.data, out, random.Random(1))


if __name__ == "__main__":
    main()
