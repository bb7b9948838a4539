"""evaluate.py in a clone: the same command as `python -m albert_min.evaluate` or `albert-min-evaluate`
of an installed albert_min, whose code and documentation are in albert_min/evaluate.py."""

from albert_min.evaluate import *  # noqa: F401,F403  (evaluate.main, evaluate.build_parser, ... for code that imports this file)
from albert_min.evaluate import main

if __name__ == "__main__":
    main()
