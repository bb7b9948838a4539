"""The training layer: how a model is trained, resumed and saved.

- ``config``: ``TrainingConfig``, how the Trainer trains (schedule, optimizer, cadence, budget);
- ``run_config``: ``RunConfig``, everything train.py's flags decide, and what a resume checks;
- ``run``: a training run from its ``RunConfig``, as train.py runs it;
- ``trainer``: the ``Trainer``, the epoch loop for every task;
- ``step``: the learning-rate schedule, AdamW / LAMB, the compiled train step, dropout reseeding;
- ``lamb``: LAMB for CPU;
- ``mixed_precision``: float16 / bfloat16 training and its loss scale;
- ``state``: the resumable training state ``<output>.state``;
- ``metrics_log``: the run's curve, ``<output>/metrics.jsonl`` and optionally TensorBoard's event files.

Imports ``albert_min.tasks`` and the layers below it; nothing here imports ``albert_min.predict``.
"""
