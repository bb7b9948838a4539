"""Tiny training runs that tests in several folders share: the size flags of a tiny model, generated
sentiment and pre-training data, a tiny AlbertConfig, and the environment msrun gives a worker."""

import random

from albert_min.model.config import AlbertConfig

TINY_MODEL = ["--embedding-size", "16", "--hidden-size", "32", "--layers", "2", "--heads", "2",
              "--intermediate-size", "48", "--vocab-size", "40", "--max-length", "24", "--quiet"]

POSITIVE = ["good", "great", "fine", "lovely", "superb", "nice"]
NEGATIVE = ["bad", "awful", "poor", "dull", "boring", "weak"]
FILLER = ["the", "movie", "film", "plot", "was", "really", "quite", "a", "story", "acting"]


def sentiment_tsv(path, n, seed):
    """Sentences whose label is given by one sentiment word among filler words."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write("sentence\tlabel\n")
        for _ in range(n):
            label = rng.randint(0, 1)
            words = rng.sample(FILLER, 4) + [rng.choice(POSITIVE if label else NEGATIVE)]
            rng.shuffle(words)
            f.write(f"{' '.join(words)} .\t{label}\n")
    return str(path)


def corpus(path, n_docs=40, seed=0):
    rng = random.Random(seed)
    words = "the movie film plot was really quite a story acting good bad great dull".split()
    with open(path, "w") as f:
        for _ in range(n_docs):
            for i in range(5):
                f.write(" ".join(rng.sample(words, 6)) + f" part {i} .\n")
            f.write("\n")
    return str(path)


def tiny(embedding_size=16, hidden=32):
    return ["--embedding-size", str(embedding_size), "--hidden-size", str(hidden), "--layers", "2", "--heads", "2",
            "--intermediate-size", "48", "--vocab-size", "60", "--max-length", "32", "--batch-size", "8", "--quiet"]


def tiny_config(**overrides):
    return AlbertConfig(**{**dict(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=48, max_position_embeddings=64),
                           **overrides})


MSRUN_ENV = {"MS_WORKER_NUM": "2", "MS_SCHED_HOST": "127.0.0.1", "MS_SCHED_PORT": "1", "MS_ROLE": "MS_WORKER"}
