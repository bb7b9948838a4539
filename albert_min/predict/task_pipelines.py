"""Question answering and named entities as pipelines: a model folder as a function.

    from albert_min import pipeline
    qa = pipeline("weights/squad-small")
    qa({"question": "Where did the cat sit?", "context": "The cat sat on the mat."})
    # {'answer': 'on the mat', 'score': 0.93, 'start': 12, 'end': 22}
    ner = pipeline("weights/conll-small")
    ner("Peter Blackburn went to Paris")
    # [{'type': 'PER', 'text': 'Peter Blackburn', 'start': 0, 'end': 15}, {'type': 'LOC', ...}]

``pipeline(dir)`` picks the pipeline by the head the folder's weights carry (``model_head``).
Both run the task classes' own path (``SquadTask`` windows and decoding, ``ConllTask``
word tags), so a pipeline answers exactly as evaluate.py scores; a NER text longer than one
window is tagged whole, in overlapping windows (``tasks.conll.windows``). Character offsets
index the text as given.

Layer: ``albert_min.predict``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import os

from ..model.folder import checkpoint_format, tokenizer_file, training_max_length, weights_file
from .pipelines import PipelineError, check_pipeline_text

HEAD_PREFIXES = ("qa_outputs.", "classifier.", "albert.pooler.")


def model_head(model_dir):
    """"qa" (``qa_outputs.*``), "token" (a classifier without a pooler, as
    AlbertForTokenClassification saves it) or "sequence" (anything else: the text classifier,
    whose own loading reports a folder it cannot read)."""
    import mindspore as ms
    try:
        path = weights_file(model_dir)   # model.ckpt or model.safetensors (integrity: checked when loaded)
        names = set(ms.load_checkpoint(path, format=checkpoint_format(path),
                                       choice_func=lambda name: name.startswith(HEAD_PREFIXES)))
    except Exception:   # noqa: BLE001 - MindSpore's C++ errors; from_pretrained names the problem
        return "sequence"
    if any(n.startswith("qa_outputs.") for n in names):
        return "qa"
    if "classifier.weight" in names and not any(n.startswith("albert.pooler.") for n in names):
        return "token"
    return "sequence"


def task_pipeline(model_dir, batch_size=64, max_length=None, use_jit=True, **options):
    """The QA or NER pipeline of ``model_dir``, or None for a text classifier (which takes no
    ``options``)."""
    kind = model_head(model_dir) if os.path.isdir(model_dir) else "sequence"
    if kind == "qa":
        return QuestionAnsweringPipeline(model_dir, batch_size, max_length, use_jit, **options)
    if options:
        raise PipelineError(f"{model_dir}: options {sorted(options)} are for question answering models; "
                            "this one is a classifier")
    if kind == "token":
        return TokenClassificationPipeline(model_dir, batch_size, max_length, use_jit)
    return None


def _load(model_dir, cls, batch_size):
    from tokenizer import AlbertTokenizer
    from ..model import kernels
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise PipelineError(f"batch_size must be a positive integer, got {batch_size!r}")
    tokenizer_file(model_dir, PipelineError)
    model = kernels.accelerate(cls.from_pretrained(model_dir))   # the compiled kernels, where they run
    model.set_train(False)
    return model, AlbertTokenizer.from_pretrained(model_dir)


class QuestionAnsweringPipeline:
    """``{"question": ..., "context": ...}`` (or a list of them) -> ``{"answer", "score",
    "start", "end"}``: the best span over the context's windows, ``score`` its probability
    among the n-best, ``context[start:end] == answer`` ("" and 0, 0 when no span fits).

    ``max_length``: window length (default: what training used, else 384, never past the
    model's positions); ``doc_stride``, ``max_query_length``, ``max_answer_length``, ``n_best``:
    as ``SquadTask``'s options (default: what training used, else the task's defaults).
    """

    def __init__(self, model_dir, batch_size=64, max_length=None, use_jit=True, **options):
        from ..model.heads import AlbertForQuestionAnswering
        from ..tasks.squad.task import SquadTask, options_for
        self.model, self.tokenizer = _load(model_dir, AlbertForQuestionAnswering, batch_size)
        n_best = {"n_best": options.pop("n_best")} if "n_best" in options else {}
        self.task = SquadTask("squad", **options_for(model_dir, **options), **n_best)
        self.max_length = min(max_length or training_max_length(model_dir, default=SquadTask.default_max_length),
                              self.model.config.max_position_embeddings)
        self.task.window_config(self.max_length)   # a stride that does not fit: an error now
        self.batch_size, self.use_jit = batch_size, use_jit

    def __call__(self, inputs):
        from ..tasks.squad.reading import SquadExample
        from ..tasks.squad.task import SquadFile
        single = isinstance(inputs, dict)
        items = [inputs] if single else inputs
        if not isinstance(items, list):
            raise PipelineError(f"expected a {{'question', 'context'}} dict or a list of them, "
                                f"got {type(inputs).__name__}")
        examples = []
        for i, item in enumerate(items):
            where = "input" if single else f"input {i}"
            if not isinstance(item, dict) or set(item) != {"question", "context"}:
                raise PipelineError(f"{where}: expected a dict with the keys 'question' and 'context'")
            check_pipeline_text(item["question"], f"{where} (question)")
            check_pipeline_text(item["context"], f"{where} (context)")
            examples.append(SquadExample(str(i), item["question"], item["context"], []))
        if not examples:
            return []
        prepared = self.task.prepare(SquadFile("input", examples), self.tokenizer, self.max_length)
        outputs = self.task.predict(self.model, prepared, batch_size=self.batch_size, use_jit=self.use_jit)
        results = []
        for prediction in self.task.answers(prepared, outputs):
            best = prediction.nbest[0]
            results.append({"answer": best["text"], "score": best["probability"], "start": best["start"],
                            "end": best["end"]})
        return results[0] if single else results


class TokenClassificationPipeline:
    """A text (or a list) -> its entities ``[{"type", "text", "start", "end"}]``, read from the
    words' tags (words split at white space, each tagged by its first piece) as conlleval
    reads chunks. Tag names come from config.json's ``id2label``.

    A text longer than ``max_length`` pieces is tagged whole, in overlapping windows of half
    a window's stride, each word by the window where it has the most context
    (``tasks.conll.windows``); a text that fits one window is tagged as evaluate.py tags it.
    """

    def __init__(self, model_dir, batch_size=64, max_length=None, use_jit=True):
        from ..model.heads import AlbertForTokenClassification
        from ..tasks.conll.task import ConllTask
        self.model, self.tokenizer = _load(model_dir, AlbertForTokenClassification, batch_size)
        self.task = ConllTask()
        try:
            self.task.check_model(self.model.config, [], model_dir)
        except Exception as err:   # the DataError naming id2label, as the pipeline's own error
            raise PipelineError(str(err)) from None
        self.max_length = min(max_length or training_max_length(model_dir), self.model.config.max_position_embeddings)
        self.batch_size, self.use_jit = batch_size, use_jit

    def __call__(self, inputs):
        from ..tasks.conll.features import entity_spans, split_words
        from ..tasks.conll.windows import prepare_windows, text_tags
        single = isinstance(inputs, str)
        texts = [inputs] if single else inputs
        if not isinstance(texts, list):
            raise PipelineError(f"expected a text or a list of texts, got {type(inputs).__name__}")
        for i, text in enumerate(texts):
            check_pipeline_text(text, "input" if single else f"input {i}")
        if not texts:
            return []
        split = [split_words(text) for text in texts]
        prepared = prepare_windows([words for words, _ in split], self.tokenizer, self.task.label_names,
                                   self.max_length)
        tags = text_tags(prepared, self.task.predict(self.model, prepared, batch_size=self.batch_size,
                                                     use_jit=self.use_jit))
        results = [entity_spans(text, spans, tagged) for text, (_, spans), tagged in zip(texts, split, tags)]
        return results[0] if single else results
