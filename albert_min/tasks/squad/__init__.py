"""SQuAD v1.1 / v2.0: the official JSON (reading), sliding windows (features), the QA loss (loss),
n-best decoding and the official files (decode), the official EM/F1 (metric), the task (task).

The file names are the same in every family: ``albert_min/tasks/__init__.py``.
"""
