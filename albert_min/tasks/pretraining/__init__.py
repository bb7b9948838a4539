"""Pre-training on raw text: documents (reading), sentence pairs and n-gram masks (features),
masked LM + sentence-objective loss (loss), held-out MLM/SOP/NSP accuracy (metric), the task (task).

The file names are the same in every family: ``albert_min/tasks/__init__.py``.
"""
