"""Fuzz the .bin, safetensors and TF readers, and the SQuAD and RACE readers (hypothesis), in a
memory-limited subprocess.

Mutations of the committed fixtures (byte flips, nasty integers over size
fields, truncation) and well-formed files declaring hostile sizes must each give
a result or a ConversionError, never another exception, and must not need more
than ~2 GB of address space (RLIMIT_AS). SQuAD and RACE files (mutated, or built
from hostile values) must each give a result that goes through features, the
metric and the prediction file, or one AlbertMinError naming the file; so must GLUE TSV files
(SST-2, STS-B, MRPC, CoLA, cls), mutated also with bytes that are not UTF-8, NUL bytes, lone and
CR-only line ends and a byte-order mark, whose errors must name the line the reader's rules say
(fuzz_task_readers_worker.py). ``ALBERT_MIN_FUZZ_EXAMPLES`` raises the number
of examples for a longer run.
"""

import os
import subprocess
import sys

import pytest

from helpers.paths import HELPERS

pytest.importorskip("hypothesis")

WORKER = os.path.join(HELPERS, "fuzz_readers_worker.py")
TASK_WORKER = os.path.join(HELPERS, "fuzz_task_readers_worker.py")
EXAMPLES = int(os.environ.get("ALBERT_MIN_FUZZ_EXAMPLES", "300"))


@pytest.mark.parametrize("fmt", ["pytorch", "safetensors", "tf"])
def test_reader_survives_fuzzing_with_bounded_memory(fmt):
    done = subprocess.run([sys.executable, WORKER, fmt, str(EXAMPLES)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "all clean" in done.stdout


@pytest.mark.parametrize("task", ["squad", "race", "glue"])
def test_task_reader_survives_fuzzing_and_what_it_accepts_goes_the_whole_way(task):
    examples = max(1, EXAMPLES // 3)   # each input is also tokenized, scored and written
    done = subprocess.run([sys.executable, TASK_WORKER, task, str(examples)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "all clean" in done.stdout
