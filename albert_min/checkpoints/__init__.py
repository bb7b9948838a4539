"""The checkpoints layer: other libraries' checkpoints, in and out.

- ``formats``: readers of PyTorch ``.bin``, ``.safetensors`` and TensorFlow checkpoints (numpy only);
- ``names``: their tensor names -> albert_min's (Hugging Face's), Google's TF names and layouts;
- ``hf_export``: an albert_min model folder -> a Hugging Face folder transformers loads.

``python -m albert_min.convert`` (the package top) drives them. Imports ``albert_min.model`` and
``albert_min.common`` from below.
"""
