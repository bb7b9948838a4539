"""RACE: the release's folders (reading), one sequence per option (features), multiple-choice loss
(loss), accuracy on middle/high/all (metric), the letters file (writing), the task (task).

The file names are the same in every family: ``albert_min/tasks/__init__.py``.
"""
