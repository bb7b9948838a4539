"""Issues 45 and 46's cases: one error line for a missing folder in every command; what a newcomer tries first."""

import os
import pathlib

# error_cases.inputs first: it puts the repository and tests/ on sys.path
from error_cases.inputs import copy, DEV, ends_listing, FIXTURES, p, ROOT, SST2_SMALL, write


def issue_45_one_error_line(add):
    """Issue 45: every command ends on bad input through one wrapper (common/errors.py): the same missing
    model folder given to each, one error line naming it, exit 1, nothing written."""
    missing = p("45", "no-such")
    add("45a", "evaluate --model: a missing folder", ["evaluate.py", "--model", missing], names=[missing])
    add("45b", "train --init: the missing folder",
        ["train.py", "--train", DEV, "--init", missing, "--output", p("45b", "out")], names=[missing],
        check=ends_listing(p("45b", mkdir=True), []))
    add("45c", "convert: the missing folder", ["convert", missing, p("45c", "out")], names=[missing],
        check=ends_listing(p("45c", mkdir=True), []))
    add("45d", "export: the missing folder", ["export", missing, p("45d", "m.mindir")], names=[missing],
        check=ends_listing(p("45d", mkdir=True), []))
    add("45e", "fingerprint: the missing folder", ["fingerprint", missing], names=[missing])


def issue_46_newcomer(add, train, evaluate):
    """What a newcomer meets: a checkpoint not converted, a --max-length past the positions, a CSV."""
    hf, tf = os.path.join(FIXTURES, "tiny_sst2_hf"), copy(os.path.join(FIXTURES, "tiny_classifier_tf"), "46b", "tf")
    add("46a", "evaluate --model: a Hugging Face download (pytorch_model.bin, not converted)", evaluate(hf),
        names=["pytorch_model.bin", "python -m albert_min.convert"])
    add("46b", "train --init: a Google TF release (albert_config.json, model.ckpt-30.*)",
        ["train.py", "--train", DEV, "--init", tf, "--output", p("46b", "out")],
        names=["albert_config.json", "python -m albert_min.convert"])
    add("46c", "train --max-length 100000 (a new model: 512 positions)",
        ["train.py", "--train", DEV, "--max-length", "100000", "--output", p("46c", "out")], expect="usage",
        names=["--max-length 100000", "512"])
    add("46d", "train --init weights/pretrained-small --max-length 129 (its 128 positions)",
        ["train.py", "--train", DEV, "--init", os.path.join(ROOT, "weights", "pretrained-small"), "--max-length", "129",
         "--output", p("46d", "out")], expect="usage", names=["--max-length 129", "128"])
    csv = write(p("46e", "reviews.csv"), "sentence,label\na gorgeous film,1\n")
    add("46e", "evaluate --data: a comma-separated file", evaluate(SST2_SMALL, "--data", csv),
        names=[csv, "tab-separated"])


def issue_46_convert_and_vocabulary(add, evaluate):
    """convert's missing or unreadable SRC before MindSpore is imported; a model folder whose spiece.model
    has more pieces than its config's vocab_size (written by albert_min's writer, so its fingerprint is right)."""
    from test_vocab_and_convert_messages import folder_with_a_bigger_tokenizer
    add("46f", "convert: SRC missing", ["convert", p("46f", "no-such"), p("46f", "out")], names=[p("46f", "no-such")],
        cost=True, check=ends_listing(p("46f", mkdir=True), []))
    empty = p("46g", "src", mkdir=True)
    add("46g", "convert: SRC a folder holding no checkpoint", ["convert", empty, p("46g", "out")], names=[empty],
        cost=True, check=ends_listing(p("46g"), ["src"]))
    model = folder_with_a_bigger_tokenizer(pathlib.Path(p("46h", mkdir=True)))
    names = [model, "2000 pieces", "vocab_size 120", "python -m albert_min.fingerprint"]
    add("46h", "evaluate: spiece.model of 2000 pieces, vocab_size 120", evaluate(model), names=names)
    add("46i", "train --init: the same folder", ["train.py", "--train", DEV, "--init", model, "--max-steps", "1",
                                                  "--output", p("46i", "out")], names=names)
    add("46j", "export: the same folder", ["export", model, p("46j", "m.mindir")], names=names)
    add("46k", "convert --to hf: the same folder", ["convert", "--to", "hf", model, p("46k", "hf")], names=names)
