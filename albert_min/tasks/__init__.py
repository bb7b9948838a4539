"""The paper's other benchmarks, one module per task family: SQuAD v1.1/v2.0 (squad,
squad_metric, squad_decode), RACE (race) and CoNLL-2003 NER (conll, conlleval).

Each module is pure functions on plain Python and numpy values: readers whose errors
name the file and line (or question id), features and padded batches for the heads of
``albert_min.modeling``, decoding of the heads' outputs, the official metric, and
writers of the official prediction formats.
"""
