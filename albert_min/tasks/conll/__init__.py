"""CoNLL-2003 NER: the column files (reading), word-level features (features), the token loss
(loss), conlleval's scores (metric), conlleval's columns file (writing), long texts in windows
(windows), the task (task).

The file names are the same in every family: ``albert_min/tasks/__init__.py``.
"""
