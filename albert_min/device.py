"""Where MindSpore runs: CPU, GPU or Ascend, and the one place that calls ``mindspore.set_device``.

    from albert_min.device import use_device
    use_device("GPU")        # before the first model or tensor; None: $ALBERT_MIN_DEVICE, else CPU

The scripts' ``--device`` flag and ``pipeline(device=...)`` come here. A device this MindSpore
package cannot run on (a CPU-only build asked for GPU, a GPU build on a machine without CUDA) is
refused before any work, naming the device and the installed build.

Some of albert_min is for MindSpore's CPU backend only (``applies_cpu_only_parts``): the number of
MindSpore kernel threads (``default_cpu_threads``), the compile cache evaluate.py keeps
(``classify.compile_cache``) and the compiled kernels (``albert_min.kernels``, CPU code called
through ``ops.Custom``). Elsewhere MindSpore's own kernels and defaults run.

MindSpore's CPU kernels run on 2 threads where the compiled kernels are built (their dropout's
masks are the same at any thread count), set by $ALBERT_MIN_CPU_THREADS if given; on 1 where
they are not (``ALBERT_MIN_KERNELS=off``, no compiler): MindSpore's own Dropout draws masks
that depend on how its threads split the work. Where they are built, denormal numbers are read and
written as zero on every thread (``kernels.flush_denormals``), as MindSpore's own kernel threads do
already: otherwise a step's bits depend on which thread runs which part of it.

The device is where a process runs, not a setting of the training run: a run saved on one
device resumes on another (train.py records no device in the state).
"""

import argparse
import os

from .errors import AlbertMinError

DEVICES = ("CPU", "GPU", "Ascend")   # as mindspore.set_device spells them
ENVIRONMENT = "ALBERT_MIN_DEVICE"    # the device when none is given
DEFAULT = "CPU"                      # ... and when that is not set either
THREADS_ENVIRONMENT = "ALBERT_MIN_CPU_THREADS"   # MindSpore's CPU kernel threads, where the kernels are built


class DeviceError(AlbertMinError):
    """A device that is not one of DEVICES, or that this MindSpore package cannot run on."""


def canonical_name(text):
    """``text`` as mindspore.set_device spells it ("gpu" -> "GPU", "ascend" -> "Ascend"), or None."""
    if not isinstance(text, str):
        return None
    return next((name for name in DEVICES if name.lower() == text.strip().lower()), None)


def device_flag(text):
    """argparse type of ``--device``: an unknown name is a usage error naming the flag."""
    name = canonical_name(text)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}: choose {', '.join(DEVICES)} "
                                         "(any case)")
    return name


def add_device_flag(parser):
    parser.add_argument("--device", type=device_flag, metavar="{CPU,GPU,Ascend}",
                        help=f"where MindSpore runs (default: ${ENVIRONMENT}, else {DEFAULT}); the MindSpore "
                             "package installed must be built for it")


def chosen_device(name=None, flag="device"):
    """(device, how it was chosen, for messages): ``name`` (any case; ``flag`` names it in
    messages), else $ALBERT_MIN_DEVICE, else CPU."""
    if name is not None:
        device = canonical_name(name)
        if device is None:
            raise DeviceError(f"{flag} {name!r}: unknown device; choose {', '.join(DEVICES)}")
        return device, f"{flag} {device}"
    if os.environ.get(ENVIRONMENT, "").strip():
        text = os.environ[ENVIRONMENT]
        device = canonical_name(text)
        if device is None:
            raise DeviceError(f"{ENVIRONMENT}={text}: unknown device; choose {', '.join(DEVICES)} "
                              f"(or unset {ENVIRONMENT} for {DEFAULT})")
        return device, f"{ENVIRONMENT}={text}"
    return DEFAULT, f"device {DEFAULT} (the default)"


def applies_cpu_only_parts(device) -> bool:
    """Whether the thread count, the compile cache and the compiled kernels apply on ``device``."""
    return device == "CPU"


def available_devices():
    """The devices this MindSpore package can run on here (its backends that loaded)."""
    from mindspore._c_expression import MSContext    # what ms.device_context.*.is_available asks, minus its warnings
    context = MSContext.get_instance()
    return [name for name in DEVICES if context.is_pkg_support_device(name)]


def installed_build():
    """The installed MindSpore in words, e.g. "MindSpore 2.10.0 (backends here: CPU)"."""
    import mindspore as ms
    return f"MindSpore {ms.__version__} (backends here: {', '.join(available_devices()) or 'none'})"


def current_device():
    """The device MindSpore runs on in this process: the one set, else the package's default."""
    import mindspore as ms
    return ms.get_context("device_target")


def default_cpu_threads():
    """MindSpore's CPU kernel threads for this process: 1 where the compiled kernels are not built
    (MindSpore's Dropout then decides the masks, and they depend on the thread split); else
    $ALBERT_MIN_CPU_THREADS, or 2 (1 on a one-core machine). Call after the device is set."""
    from . import kernels
    if kernels.built() is None:
        return 1
    text = os.environ.get(THREADS_ENVIRONMENT, "").strip()
    if not text:
        return min(2, len(os.sched_getaffinity(0)))
    if not text.isdigit() or not 1 <= int(text) <= 256:
        raise DeviceError(f"{THREADS_ENVIRONMENT}={text}: not a thread count; give a whole number from 1 to 256 "
                          f"(or unset {THREADS_ENVIRONMENT} for 2)")
    return int(text)


def use_device(name=None, cpu_threads=None, flag="device"):
    """Run MindSpore on ``name`` (CPU, GPU or Ascend, any case; None: $ALBERT_MIN_DEVICE, else CPU),
    with the CPU-only parts on CPU (``cpu_threads`` kernel threads; None: ``default_cpu_threads()``).
    Returns the device.
    ``flag`` names ``name`` in messages (a script's "--device").

    Call it before the first model or tensor. DeviceError for an unknown device, one this
    MindSpore cannot run on, or another device than the one this process already set.
    """
    device, given = chosen_device(name, flag)
    if device not in available_devices():
        reason = _plugin_error(device)
        raise DeviceError(f"{given}: the installed {installed_build()} cannot run on {device}"
                          + (f" ({reason})" if reason else "")
                          + f"; {device} needs a MindSpore package built for it and the device's drivers; "
                          f"or use {DEFAULT}")
    import mindspore as ms
    try:
        ms.set_device(device)
    except RuntimeError:   # MindSpore fixes a process's device when it is set or the first kernel runs
        raise DeviceError(f"{given}: MindSpore's device is already fixed in this process ({current_device()}); "
                          "choose it before the first model or tensor, once per process") from None
    if applies_cpu_only_parts(device):
        from . import kernels
        from .training import set_cpu_threads
        threads = default_cpu_threads() if cpu_threads is None else cpu_threads
        kernels.flush_denormals()   # before MindSpore's threads start: they inherit it (kernels/backward.cc)
        set_cpu_threads(threads)
    return device


def _plugin_error(device):
    """MindSpore's first reason why ``device``'s backend did not load, on one line ("" when it gives none:
    its loader names only the libraries it tried, e.g. Ascend's, and skips GPU's without libcuda)."""
    from mindspore._c_expression import MSContext
    lines = [" ".join(line.split()) for line in MSContext.get_instance().load_plugin_error().splitlines()]
    text = next((line for line in lines if device.lower() in line.lower()), "")
    return text if len(text) <= 200 else text[:197] + "..."
