"""argparse value types for the scripts' numeric flags: a bad number is a one-line
usage error (exit 2) naming the flag, never a run that silently does something else.
Also the flags train.py and evaluate.py share (SQuAD's windows and decoding), and the scripts'
side of --device (``use_device_flag``)."""

import argparse
import math
import os
import shutil
import sys

HELP_WIDTH = 100   # --help wraps at the terminal's width, but no wider: 140-column lines are hard to read


def command_name(module):
    """The name --help and usage errors give the command: ``python -m albert_min.train`` when run
    so (``module`` is the command module's ``__spec__.name``), else argparse's own (train.py in a
    clone, albert-min-train installed)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == module:
        return f"python -m {module}"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else None


class Help(argparse.HelpFormatter):
    """argparse's help, at most ``HELP_WIDTH`` columns wide."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        width = min(width or shutil.get_terminal_size().columns - 2, HELP_WIDTH)
        super().__init__(prog, indent_increment, max_help_position, width)


class DefaultsHelp(Help, argparse.ArgumentDefaultsHelpFormatter):
    """--help shows every default value; flags whose default is "not given" (None, [], a switch) say
    what that means in their own help."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, (bool, list)):
            return action.help
        return super()._get_help_string(action)


def _number(text, kind):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def int_at_least(low, high=None):
    """An integer type ``low <= n`` (``<= high`` if given)."""
    def parse(text):
        value = _number(text, int)
        if value < low or (high is not None and value > high):
            wanted = f"between {low} and {high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be an integer {wanted}, got {text!r}")
        return value
    parse.__name__ = "integer"
    return parse


def float_in(low, high, low_open=False, high_open=False):
    """A finite float in the interval given: ``(``/``[`` per ``low_open``, ``)``/``]`` per ``high_open``;
    ``high=None`` means no upper bound."""
    def parse(text):
        value = _number(text, float)
        if (value < low or (low_open and value == low)
                or (high is not None and (value > high or (high_open and value == high)))):
            interval = f"{'(' if low_open else '['}{low}, {'inf)' if high is None else str(high) + (')' if high_open else ']')}"
            raise argparse.ArgumentTypeError(f"must be a number in {interval}, got {text!r}")
        return value
    parse.__name__ = "number"
    return parse


positive_int = int_at_least(1)
positive_float = float_in(0.0, None, low_open=True)
non_negative_float = float_in(0.0, None)
probability = float_in(0.0, 1.0, high_open=True)     # a dropout rate: 0 <= p < 1
fraction = float_in(0.0, 1.0)                        # e.g. the warm-up share of the steps
seed = int_at_least(0, 2**31 - 1)
max_length = int_at_least(3, 1 << 20)                # [CLS] + at least one piece + [SEP]
finite_float = float_in(-math.inf, None)


def add_squad_flags(parser, default_from):
    """SQuAD's options (``tasks.squad.task.OPTION_DEFAULTS``) as flags, all defaulting to None:
    the script fills in the defaults ``default_from`` says (a phrase with ``{}`` for the task's
    default: train.py's "{}", evaluate.py's "what train.py used, else {}") and refuses them for
    another task."""
    from .tasks.squad.task import OPTION_DEFAULTS as d
    group = parser.add_argument_group("SQuAD (--task squad / squad_v2)")
    group.add_argument("--doc-stride", type=positive_int,
                       help=f"context pieces from one window's start to the next (default: "
                            f"{default_from.format(d['doc_stride'])}); at most --max-length - --max-query-length - 3")
    group.add_argument("--max-query-length", type=positive_int,
                       help=f"question pieces kept (default: {default_from.format(d['max_query_length'])})")
    group.add_argument("--max-answer-length", type=positive_int,
                       help=f"longest answer in pieces (default: {default_from.format(d['max_answer_length'])})")
    group.add_argument("--null-score-diff-threshold", type=finite_float,
                       help="v2.0: answer 'no answer' when its score beats the best span's by more "
                            f"(default: {default_from.format(d['null_score_diff_threshold'])})")


def use_device_flag(device):
    """A script's ``--device`` value (None: $ALBERT_MIN_DEVICE, else CPU) set for this process
    before any work (``device.use_device``); returns the device. A device this MindSpore cannot run
    on, or a bad value of an environment variable it reads ($ALBERT_MIN_DEVICE, $ALBERT_MIN_CPU_THREADS,
    $ALBERT_MIN_KERNELS: ``common.environment``), is one ``error:`` line and exit 2, as a bad flag."""
    from .common.device import DeviceError, use_device
    from .common.environment import SettingError
    from .common.errors import EXIT_USAGE, fail
    from .model import kernels
    try:
        return use_device(device, flag="--device", cpu_setup=kernels.prepare_cpu)
    except (DeviceError, SettingError) as err:
        fail(str(err), EXIT_USAGE)
