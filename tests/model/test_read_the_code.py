"""albert_min/model/README.md's "Read the code" path: every `file:line` it lists holds what it names there."""

import os
import re

from helpers.paths import ROOT

PLACE = re.compile(r"`(albert_min/[\w/]+\.py):(\d+)` `([^`]+)`")


def test_every_listed_line_holds_what_it_names():
    with open(os.path.join(ROOT, "albert_min", "model", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    places = PLACE.findall(readme.split("## Read the code", 1)[1].split("\n## ", 1)[0])
    named = {what.split()[-1] for _, _, what in places}
    assert {"AlbertConfig", "AlbertEmbeddings", "AlbertAttention", "AlbertLayer", "AlbertEncoder",
            "AlbertMLMHead", "accelerate"} <= named                 # config -> embeddings -> ... -> heads
    for path, line, what in places:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            lines = f.read().splitlines()
        assert what in lines[int(line) - 1], f"{path}:{line} does not hold {what!r}: {lines[int(line) - 1]!r}"
