"""The predict layer: a model folder as a function, ``pipeline(dir)`` (below).

- ``pipelines``: the text-classification pipeline, and the errors and checks every pipeline shares;
- ``task_pipelines``: the question-answering and token-classification (NER) pipelines.

``pipeline`` picks one of them, so it lives here, above both: in ``pipelines`` it imported
``task_pipelines``, which imports ``pipelines`` (a circle). Importing this package imports no
MindSpore; building a pipeline does.

Imports ``albert_min.tasks`` and the layers below it; nothing here imports ``albert_min.training``.
"""

from .pipelines import TextClassificationPipeline


def pipeline(model_dir, batch_size=64, max_length=None, use_jit=True, device=None, int8=False, **options):
    """The model in ``model_dir`` (a folder with config.json, model.ckpt or model.safetensors, spiece.model) as a
    function: a classifier (see :class:`TextClassificationPipeline`), or a question-answering
    or token-classification model (``albert_min.predict.task_pipelines``; ``options`` for QA windows).

    ``device``: CPU, GPU or Ascend (None: $ALBERT_MIN_DEVICE, else CPU), set for the whole
    process (``albert_min.common.device.use_device``): one device per process.

    ``int8``: its Dense layers computed in int8 (``kernels.quantize_int8``: each weight quantized once,
    ALBERT's shared layer once for all its loops); where int8 cannot run, one notice line on stderr
    and float32."""
    from ..common.device import use_device
    from ..model import kernels
    use_device(device, cpu_setup=kernels.prepare_cpu)
    from .task_pipelines import task_pipeline
    found = task_pipeline(model_dir, batch_size, max_length, use_jit, **options)
    found = found or TextClassificationPipeline(model_dir, batch_size, max_length, use_jit)
    if int8:
        kernels.quantize_int8(found.model)
    return found
