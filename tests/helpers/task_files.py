"""Small hand-written GLUE, SQuAD, RACE and CoNLL-2003 files for the task tests, and a tiny model."""
import json
import os

import mindspore as ms

from albert_min.model.config import AlbertConfig

CONTEXT_1 = "The old cat sat on the red mat near the door. It was happy there, and it slept all day long."
CONTEXT_2 = "Paris is the capital of France. The river Seine runs through the city from east to west."
CONTEXT_3 = "A small boat left the harbour at dawn. Three fishermen were on board, and they came back at noon."


# A few rows of GLUE's layouts and the generic cls TSV: task -> (the GLUE release's folder name, lines).
GLUE_FILES = {
    "sst2": ("SST-2", ["sentence\tlabel", "a fine film\t1", "dull\t0", "a joy\t1"]),
    "stsb": ("STS-B", ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
                       "0\tg\tf\t2012\t1\tn\tn\tA man plays.\tA man is playing.\t4.5",
                       "1\tg\tf\t2012\t2\tn\tn\tA cat.\tA dog runs.\t0.5",
                       "2\tg\tf\t2012\t3\tn\tn\tIt rains.\tRain falls.\t4.0"]),
    "mrpc": ("MRPC", ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "1\t1\t2\tHe said \"yes\".\tHe agreed.",
                      "0\t3\t4\tA b.\tC d.", "1\t5\t6\tE f.\tE f g."]),
    "cola": ("CoLA", ["gj04\t1\t\tFine.", "gj04\t0\t*\tFine not.", "gj04\t1\t\tGood."]),
    "rte": ("RTE", ["index\tsentence1\tsentence2\tlabel", "0\tA man.\tA person.\tentailment",
                    "1\tA b.\tC d.\tnot_entailment", "2\tE.\tF.\tentailment"]),
    "sentence_label": ("mine", ["sentence\tlabel", "good\t1", "bad\t0", "fine\t1"]),
}


def squad_json(version_2=False):
    """Two articles, three paragraphs, five answerable questions (+ two unanswerable for v2.0)."""
    def qa(qid, question, context, answer, impossible=False):
        item = {"id": qid, "question": question,
                "answers": [] if impossible else [{"text": answer, "answer_start": context.index(answer)}]}
        if version_2:
            item["is_impossible"] = impossible
        return item
    paragraphs_1 = [
        {"context": CONTEXT_1, "qas": [qa("q1", "Where did the cat sit?", CONTEXT_1, "on the red mat"),
                                       qa("q2", "How long did it sleep?", CONTEXT_1, "all day long")]},
        {"context": CONTEXT_3, "qas": [qa("q3", "When did the boat leave?", CONTEXT_3, "at dawn")]}]
    paragraphs_2 = [{"context": CONTEXT_2, "qas": [qa("q4", "What is the capital of France?", CONTEXT_2, "Paris"),
                                                   qa("q5", "Which river runs through the city?", CONTEXT_2,
                                                      "Seine")]}]
    if version_2:
        paragraphs_1[0]["qas"].append(qa("n1", "What colour was the dog?", CONTEXT_1, None, impossible=True))
        paragraphs_2[0]["qas"].append(qa("n2", "Who founded the city?", CONTEXT_2, None, impossible=True))
    return {"version": "v2.0" if version_2 else "1.1",
            "data": [{"title": "Animals", "paragraphs": paragraphs_1}, {"title": "Places", "paragraphs": paragraphs_2}]}


def write_squad(tmp_path, version_2=False):
    path = str(tmp_path / ("v2.json" if version_2 else "v1.json"))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(squad_json(version_2), f)
    return path


RACE_FILES = {
    ("middle", "1.txt"): {"article": CONTEXT_1, "questions": ["The cat sat on the _ mat.", "Where was the cat?"],
                          "options": [["red", "blue", "green", "black"], ["in the sea", "near the door", "on a tree",
                                                                             "at school"]],
                          "answers": ["A", "B"]},
    ("high", "10.txt"): {"article": CONTEXT_2, "questions": ["Which river runs through Paris?"],
                         "options": [["the Thames", "the Rhine", "the Seine", "the Nile"]], "answers": ["C"]},
    ("high", "2.txt"): {"article": CONTEXT_3, "questions": ["How many fishermen were on board?"],
                        "options": [["one", "two", "five", "three"]], "answers": ["D"]},
}


def write_race(tmp_path):
    """RACE/dev with middle/1.txt (2 questions), high/2.txt and high/10.txt (one each)."""
    split = tmp_path / "RACE" / "dev"
    for (level, name), data in RACE_FILES.items():
        os.makedirs(split / level, exist_ok=True)
        with open(split / level / name, "w", encoding="utf-8") as f:
            json.dump(data, f)
    return str(split)


CONLL = """-DOCSTART- -X- -X- O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
went VBD B-VP O
to TO B-PP O
Paris NNP B-NP I-LOC
. . O O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

-DOCSTART- -X- -X- O

Bonn NNP B-NP I-LOC
Berlin NNP I-NP B-LOC
and CC O O
the DT B-NP O
United NNP I-NP I-ORG
Nations NNP I-NP I-ORG
met VBD B-VP O
"""


def write_conll(tmp_path, text=CONLL, name="eng.testa"):
    path = str(tmp_path / name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def tiny_model(cls, vocab_size, **extra):
    """A tiny random model of ``cls`` (no dropout, so a memorising run is deterministic)."""
    ms.set_seed(0)
    config = AlbertConfig(vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                          classifier_dropout_prob=0.0, **extra)
    return cls(config)


def read_columns(path):
    """conlleval's input back: [(words, gold tags, predicted tags)] per sentence."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                current.append(line.split())
            elif current:
                sentences.append(tuple(list(col) for col in zip(*current)))
                current = []
    return sentences
