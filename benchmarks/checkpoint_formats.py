"""model.ckpt against MindSpore's model.safetensors: file size, save and load time, side by side in one run.

    python3 benchmarks/checkpoint_formats.py               # weights/sst2-small and an albert-base-v2-sized model
    python3 benchmarks/checkpoint_formats.py --repeats 9

For each model the same float32 arrays are written as a model folder in both formats
(``checkpoint.write_model_dir``, as train.py --format and convert --format write them) into a
temporary folder that is removed afterwards, then read back with ``checkpoint.read_checkpoint``,
what every ``from_pretrained`` does before copying the arrays into the model: parsing, the
integrity check (``.ckpt``: MindSpore's CRC; ``.safetensors``: the sha256 recorded in the
manifest) and the non-finite check. "sha256" is the share of the safetensors load spent
hashing; "ms load" is ``mindspore.load_checkpoint`` alone, with the check albert_min asks of it.

The base-sized model (vocabulary 30000, E=128, H=768, 12 loops, intermediate 3072, with a
classifier head: 11.7M parameters, as albert-base-v2) is built in memory with random weights;
nothing big is committed. Each time is the median of --repeats runs, the two formats
alternating so both see the same machine load (``uptime`` printed before and after). The
files are read from the page cache (just written): this compares parsing, not disks.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mindspore as ms  # noqa: E402

from albert_min.model.folder import (FORMATS, WEIGHTS_FILES, checkpoint_format, model_arrays,  # noqa: E402
                                     read_checkpoint, weights_file, write_model_dir)
from albert_min.model.config import AlbertConfig, load_config  # noqa: E402
from albert_min.common.checksums import sha256_of  # noqa: E402

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")


def base_sized():
    """(config, arrays) of a random albert-base-v2-sized classifier."""
    from albert_min.model.heads import AlbertForSequenceClassification
    config = AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
                          num_attention_heads=12, intermediate_size=3072, hidden_act="gelu_new")
    return config, model_arrays(AlbertForSequenceClassification(config))


def timed(function, *args):
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def measure(config, arrays, workdir, repeats):
    """{format: {"MB", "save_s", "load_s", "ms_load_s", "sha256_s"}} for one model."""
    times = {fmt: {"save_s": [], "load_s": [], "ms_load_s": [], "sha256_s": []} for fmt in FORMATS}
    folders = {fmt: os.path.join(workdir, fmt) for fmt in FORMATS}
    for _ in range(repeats):
        for fmt in FORMATS:   # alternating: both formats see the same load
            times[fmt]["save_s"].append(timed(write_model_dir, config, arrays, folders[fmt], fmt, None, True))
            path = weights_file(folders[fmt])
            times[fmt]["load_s"].append(timed(read_checkpoint, path))
            # the check albert_min asks of MindSpore: the CRC for .ckpt; none for .safetensors (sha256 instead)
            times[fmt]["ms_load_s"].append(timed(lambda: ms.load_checkpoint(path, crc_check=fmt == "ckpt",
                                                                           format=checkpoint_format(path))))
            times[fmt]["sha256_s"].append(timed(sha256_of, path) if fmt == "safetensors" else 0.0)
    return {fmt: {"MB": os.path.getsize(os.path.join(folders[fmt], WEIGHTS_FILES[fmt])) / 1e6,
                  **{k: statistics.median(v) for k, v in times[fmt].items()}} for fmt in FORMATS}


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="runs per format and model; the median is shown")
    args = p.parse_args(argv)
    from albert_min.common.device import use_device
    use_device("CPU")
    print(f"uptime before: {uptime()}")
    models = [("weights/sst2-small", lambda: (load_config(SST2_SMALL), read_checkpoint(weights_file(SST2_SMALL)))),
              ("albert-base-v2-sized (random)", base_sized)]
    print(f"{'model':<30} {'format':<12} {'MB':>8} {'save s':>8} {'load s':>8} {'ms load s':>10} {'sha256 s':>9}")
    for name, make in models:
        config, arrays = make()
        with tempfile.TemporaryDirectory() as workdir:
            result = measure(config, arrays, workdir, args.repeats)
        for fmt in FORMATS:
            r = result[fmt]
            print(f"{name:<30} {fmt:<12} {r['MB']:>8.2f} {r['save_s']:>8.3f} {r['load_s']:>8.3f} "
                  f"{r['ms_load_s']:>10.3f} {r['sha256_s']:>9.3f}")
        ckpt, st = result["ckpt"], result["safetensors"]
        print(f"{name:<30} {'st / ckpt':<12} {st['MB'] / ckpt['MB']:>8.3f} {st['save_s'] / ckpt['save_s']:>8.2f} "
              f"{st['load_s'] / ckpt['load_s']:>8.2f} {st['ms_load_s'] / ckpt['ms_load_s']:>10.2f}")
    print(f"uptime after:  {uptime()}")
    print(f"(median of {args.repeats} runs per cell, formats alternating; files read from the page cache)")


if __name__ == "__main__":
    main()
