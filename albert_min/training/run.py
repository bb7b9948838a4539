"""A training run from its ``RunConfig``, as train.py runs it: check the outputs, read the
task's files, get a tokenizer (the given one, the --init model's, the resumed run's, or a
new one), build the model, and hand everything to the ``Trainer``.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import contextlib
import os
import sys
import tempfile

from ..model.config import AlbertConfig, ConfigError, load_config
from ..tasks.text_files import read_tsv, text_lines
from ..common.safe_output import OutputError, check_replaceable, output_lock, recover_directory
from ..tasks import get_task
from ..common.json_files import Field, check_fields
from ..common.checksums import file_fingerprint
from .metrics_log import tensorboard_writer_class
from .state import TOKENIZER_FILE, read_state


def model_config_from_flags(settings, vocab_size=None):
    """The model config a run trains (before its tokenizer is known: ``vocab_size`` None takes
    --vocab-size), checked before any work; ConfigError names the flags or file."""
    if settings.init:
        config = load_config(settings.init)
    elif settings.config:
        config = AlbertConfig.from_json_file(settings.config)
    else:
        if settings.hidden_size % settings.heads:
            raise ConfigError(f"--heads {settings.heads} must divide --hidden-size {settings.hidden_size} "
                              "(each head gets hidden-size / heads dimensions)")
        config = AlbertConfig(
            vocab_size=vocab_size or settings.vocab_size, embedding_size=settings.embedding_size,
            hidden_size=settings.hidden_size, num_hidden_layers=settings.layers,
            num_attention_heads=settings.heads, intermediate_size=settings.intermediate_size,
            hidden_act="gelu_new", max_position_embeddings=max(128, settings.max_length),
            cross_layer_sharing=settings.sharing)
    dropout = settings.dropout
    if dropout is None and not (settings.init or settings.config):
        dropout = 0.1   # from scratch; an --init / --config model keeps its own unless --dropout is given
    if dropout is not None:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = config.classifier_dropout_prob = dropout
    if settings.max_length > config.max_position_embeddings:
        raise ConfigError(f"--max-length {settings.max_length} exceeds the model's max_position_embeddings "
                          f"{config.max_position_embeddings}")
    config.validate()
    return config


def prepare_outputs(settings, resume, force, writes=True):
    """Before any long work: the model and state folders can be written and replace nothing
    albert_min did not write (``safe_output.check_replaceable``); on --resume, a save a
    crash interrupted is completed or rolled back first. ``writes=False``: the same checks for
    a data-parallel worker that never writes."""
    output, state = settings.training.output, settings.training.state_dir
    protect = settings.input_files() + [p for p in (settings.init,) if p]
    if resume and writes:
        for folder in (output, state):
            recovered = recover_directory(folder)
            if recovered:
                print(recovered, flush=True)
    if resume:
        if not os.path.isdir(state):
            raise OutputError(f"no training state to resume in {state}")
    elif not force:
        if os.path.exists(output):
            raise OutputError(f"{output} exists; pass --force to overwrite it or --resume to continue")
        if os.path.exists(state):
            raise OutputError(f"{state} holds an unfinished run; pass --resume to continue it or --force to restart")
    for path in (output, state):
        check_replaceable(path, overwrite=True, protect=protect)
        if not writes:
            continue
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(13, "folder not writable", parent)


def tokenizer_sentences(task, examples, extra_files):
    """The text a new tokenizer is trained on: the task's training text plus ``extra_files``."""
    extra = []
    for path in extra_files:
        if path.endswith(".tsv"):
            extra += read_tsv(path, require_labels=False)[0]
        else:   # text_lines: a line that is not UTF-8 is an error naming path:line
            extra += [line.strip() for _, line in text_lines(path) if line.strip()]
    return list(task.tokenizer_text(examples)) + extra


def build_tokenizer(settings, task, examples, workdir, resume):
    """(tokenizer, its file): the resumed run's own copy, --tokenizer, --init's, or a new one."""
    from tokenizer import AlbertTokenizer, TokenizerError, train_sentencepiece
    saved = os.path.join(settings.training.state_dir, TOKENIZER_FILE)
    if resume and os.path.isfile(saved):
        return AlbertTokenizer(saved), saved
    path = settings.tokenizer or (os.path.join(settings.init, "spiece.model") if settings.init else None)
    if path is None:
        sentences = tokenizer_sentences(task, examples, settings.tokenizer_text)
        try:
            path = train_sentencepiece(sentences, os.path.join(workdir, "spiece"), settings.vocab_size)
        except TokenizerError as err:
            raise TokenizerError(f"{settings.train or settings.text}: {err}") from None
        tokenizer = AlbertTokenizer(path)
        trained = tokenizer.vocab_size
        why = ("" if trained >= settings.vocab_size else
               f" (asked for {settings.vocab_size}; SentencePiece stops when the text has no more pieces to "
               "merge: more text, or --tokenizer-text, gives more)")
        print(f"trained a {trained}-piece SentencePiece tokenizer on {len(sentences)} lines{why}", flush=True)
        return tokenizer, path
    return AlbertTokenizer(path), path


def too_many_pieces_for(settings, pieces, vocab_size):
    """The message for a tokenizer whose ids run past the embeddings of the model --init or --config gives."""
    from ..model.folder import too_many_pieces
    if settings.init and not settings.tokenizer:   # the --init folder's own spiece.model
        return too_many_pieces(settings.init, pieces, vocab_size)
    model = f"--init {settings.init}" if settings.init else f"--config {settings.config}"
    if settings.tokenizer:
        return (f"--tokenizer {settings.tokenizer} has {pieces} pieces, more than the vocab_size {vocab_size} of "
                f"{model}: ids from {vocab_size} on would have no embedding; "
                + ("pass the tokenizer that model was trained with" if settings.init else
                   f"pass a tokenizer of at most {vocab_size} pieces, or a --config with vocab_size {pieces}"))
    return (f"the tokenizer trained here has {pieces} pieces, more than the vocab_size {vocab_size} of {model}: "
            f"pass --vocab-size {vocab_size}")


def build_model(task, config, settings):
    from ..model import heads
    cls = getattr(heads, task.model_class)
    if settings.init:
        return cls.from_pretrained(settings.init, config=config, allow_missing=task.head_prefixes)
    return cls(config)


def train_run(settings, resume=False, force=False):
    """Run ``settings`` (a RunConfig) to the end; returns the Trainer's final state."""
    if settings.training.report_to == "tensorboard":
        tensorboard_writer_class()   # before the slow work: without tensorboardX, the pip command that installs it
    from ..common.device import use_device
    from ..model import kernels
    # before msrun's init(); on CPU the kernels built and 1 MindSpore thread, or $ALBERT_MIN_CPU_THREADS
    # where the kernels' dropout makes any count give the same run
    use_device(settings.device, cpu_setup=kernels.prepare_cpu)
    import mindspore as ms
    from .mixed_precision import check_device
    check_device(settings.training.amp, settings.training.amp_dtype, ms.get_context("device_target"))
    from ..common.parallel import SingleProcess
    from .step import seed_everything
    with contextlib.ExitStack() as stack:
        parallel = SingleProcess()
        if settings.data_parallel:
            parallel = start_data_parallel(settings, resume, force, stack)
        seed_everything(settings.training.seed)
        workdir = stack.enter_context(tempfile.TemporaryDirectory())
        state = run_task(settings, resume, parallel, workdir)
    best = state["best"]
    if best is None:
        print(f"done: no dev set given, so nothing was scored; the last model (step {state['step']}) is in "
              f"{settings.training.output}")
    else:
        from .trainer import shown_score
        undefined = [r for r in state["history"] if shown_score(best, r).startswith("score undefined")]
        print(f"done: best {shown_score(best, undefined[-1] if undefined else {})}, model in "
              f"{settings.training.output}")
    return state


def run_task(settings, resume, parallel, workdir):
    from ..model.modeling import count_parameters
    from .trainer import Trainer
    task = get_task(settings.task, **settings.task_options())
    model_config = model_config_from_flags(settings)   # checked before the slow work (tokenizer, features)
    train_examples = task.read(settings.train if "train" in task.inputs else settings.text)
    dev_examples = task.read(settings.dev) if settings.dev and "dev" in task.inputs else None
    if dev_examples is not None or "train" in task.inputs:
        print(f"task {task.name}: {len(train_examples)} training examples"
              + (f", {len(dev_examples)} dev" if dev_examples is not None else ", no dev set (the last model is kept)"),
              flush=True)
    for line in task.training_notes(train_examples):
        print(line, flush=True)
    tokenizer, tokenizer_file = build_tokenizer(settings, task, train_examples, workdir, resume)
    if (settings.init or settings.config) and model_config.vocab_size < tokenizer.vocab_size:
        raise ConfigError(too_many_pieces_for(settings, tokenizer.vocab_size, model_config.vocab_size))
    if not (settings.init or settings.config):
        model_config.vocab_size = tokenizer.vocab_size
    task.configure_model(model_config, train_examples)
    model_config.validate()
    task.check_model(model_config, train_examples, settings.train or settings.text)
    if dev_examples is not None:
        task.check_model(model_config, dev_examples, settings.dev)
    model = build_model(task, model_config, settings)
    c = model.config
    print(f"model: {count_parameters(model) / 1e6:.2f}M parameters, E={c.embedding_size} H={c.hidden_size} "
          f"L={c.num_hidden_layers} sharing={c.cross_layer_sharing}, vocab {c.vocab_size}", flush=True)
    train, dev = task.training_sets(train_examples, dev_examples, tokenizer, settings.max_length,
                                    seed=settings.training.seed, batch_size=settings.training.batch_size)
    inputs = {"files": settings.fingerprints(), "tokenizer": file_fingerprint(tokenizer_file)}
    trainer = Trainer(settings.training, model, task, train, dev, tokenizer_file=tokenizer_file, parallel=parallel,
                      protect=settings.input_files(), settings={"run": settings.run_settings()}, inputs=inputs,
                      lock_output=False)
    if resume:
        trainer.resume()
    return trainer.run()


SAVED_SETTINGS = {"run": Field(dict), "training": Field(dict)}
SAVED_INPUTS = {"files": Field(dict), "tokenizer": Field(dict, required=False)}


def saved_run(state_dir):
    """(the saved run's settings in ``RunConfig.flat`` form, or None for a state older albert_min
    wrote; its input fingerprints {path: fingerprint}, the tokenizer's included; the state's path)."""
    state = read_state(state_dir)
    path = os.path.join(state_dir, "state.json")
    if "settings" not in state:
        return None, {}, path
    settings = check_fields(path, state["settings"], SAVED_SETTINGS, where="settings")
    inputs = check_fields(path, state.get("inputs", {}), SAVED_INPUTS, where="inputs")
    files = dict(inputs["files"])
    if "tokenizer" in inputs:
        files[os.path.join(state_dir, TOKENIZER_FILE)] = inputs["tokenizer"]
    return {**settings["run"], **settings["training"]}, files, path


def start_data_parallel(settings, resume, force, stack):
    """Join the msrun job; rank 0 locks the output; every worker checks the outputs (on --resume
    after rank 0, which alone completes or rolls back a save a crash interrupted)."""
    from ..common.parallel import DataParallel, WorkersLost
    try:
        parallel = DataParallel()
    except WorkersLost as err:   # on msrun's scheduler, which runs this script too and outlives the workers
        state_dir = settings.training.state_dir
        hint = (f"continue from the last saved state ({state_dir}) with the same msrun command and --resume"
                if os.path.isfile(os.path.join(state_dir, "state.json"))
                else "nothing was saved yet: run the same msrun command again")
        raise WorkersLost(err.ranks, err.first, hint) from None
    if parallel.writes:
        stack.enter_context(output_lock(settings.training.output))
    if parallel.writes or not resume:
        prepare_outputs(settings, resume, force, writes=parallel.writes)
    if resume:
        parallel.barrier()
        if not parallel.writes:
            prepare_outputs(settings, resume, force, writes=False)
    if not parallel.writes:
        settings.training.quiet = True
        sys.stdout = open(os.devnull, "w")   # only rank 0 reports (to the end of the process); errors reach stderr
    return parallel


__all__ = ["build_model", "build_tokenizer", "model_config_from_flags", "prepare_outputs", "saved_run", "train_run"]
