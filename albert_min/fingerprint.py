"""Record a model folder's fingerprint again, after a change made on purpose.

    python -m albert_min.fingerprint weights/DIR [DIR ...]

albert_min records the sha256 of every file it writes into a model folder, and the content of
its config.json, in the folder's ``.albert_min.json`` (``albert_min.model.folder``); every load
refuses weights or a ``spiece.model`` that are not the ones written, and names each key of an
edited config.json. After you put a file in on purpose (weights trained elsewhere, another
tokenizer) or edited config.json and want it kept, this records the folder as it is now; a folder
written before albert_min recorded fingerprints gets one. docs/conversion.md says more.

Layer: the commands, at the top (the layers: ``albert_min/__init__.py``).
"""

import argparse
import sys

from .common.errors import reported_errors, returns_status


@returns_status
def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m albert_min.fingerprint", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", metavar="DIR",
                        help="model folder (config.json, model.ckpt or model.safetensors, spiece.model) to record")
    args = parser.parse_args(argv)
    from .model.folder import record_model_dir
    for folder in args.folders:
        with reported_errors():
            recorded = record_model_dir(folder)
        print(f"recorded {folder}: " + ", ".join(f"{name} ({what})" for name, what in recorded.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
