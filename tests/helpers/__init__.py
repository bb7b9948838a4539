"""What several test folders share: the repository's paths (paths.py), tiny training runs' flags and data
(tiny_runs.py), hand-written checkpoint and task files, the README examples' runner, and the worker scripts
that tests run in a fresh process (*_worker.py). Nothing here is collected as a test."""
