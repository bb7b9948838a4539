"""The model layer: ALBERT itself and its folder on disk.

- ``config``: ``AlbertConfig`` (Hugging Face's ``config.json`` field names, the paper's presets);
- ``modeling``: the backbone, top to bottom: embeddings, attention, the shared layer looped L times,
  the encoder, the pooler;
- ``heads``: the task models on the backbone (pre-training, classification, QA, tagging, choice);
- ``kernels``: the compiled CPU kernels, and ``kernels.accelerate(model)``, the step that swaps them into a
  built model (``modeling`` and ``heads`` compute with MindSpore's ops and import no kernels; README.md);
- ``folder``: the model folder (``config.json`` + ``model.ckpt`` or ``model.safetensors`` +
  ``spiece.model``), read by ``from_pretrained``, which is why it sits in this layer.

Imports only ``albert_min.common`` from below. Importing this package imports nothing:
``config`` needs only numpy, ``modeling`` imports MindSpore.
"""
