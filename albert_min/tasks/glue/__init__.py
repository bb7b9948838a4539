"""GLUE classification and regression (and albert_min's generic sentence<TAB>label TSV): the
table of tasks and their file layouts (reading), GLUE's metrics (metric), the task (task).

The file names are the same in every family: ``albert_min/tasks/__init__.py``.
"""
