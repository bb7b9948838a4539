"""train.py in a clone: the same command as `python -m albert_min.train` or `albert-min-train` of
an installed albert_min, whose code and documentation are in albert_min/train.py."""

from albert_min.train import *  # noqa: F401,F403  (train.main, train.parse_args, ... for code that imports this file)
from albert_min.train import main

if __name__ == "__main__":
    main()
