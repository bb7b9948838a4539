"""The predict layer: a model folder as a function.

- ``pipelines``: ``pipeline(dir)`` and the text-classification pipeline;
- ``task_pipelines``: the question-answering and token-classification (NER) pipelines.

Imports ``albert_min.tasks`` and the layers below it; nothing here imports ``albert_min.training``.
"""
