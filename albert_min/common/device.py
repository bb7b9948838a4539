"""Where MindSpore runs: CPU, GPU or Ascend, and the one place that calls ``mindspore.set_device``.

    from albert_min.common.device import use_device
    use_device("GPU")        # before the first model or tensor; None: $ALBERT_MIN_DEVICE, else CPU

The scripts' ``--device`` flag and ``pipeline(device=...)`` come here. A device this MindSpore
package cannot run on (a CPU-only build asked for GPU, a GPU build on a machine without CUDA) is
refused before any work, naming the device and the installed build.

Some of albert_min is for MindSpore's CPU backend only (``applies_cpu_only_parts``): the number of
MindSpore kernel threads (``default_cpu_threads``), its memory pool's blocks
(``set_cpu_memory_pool``), the compile cache evaluate.py keeps
(``prediction_engine.compile_cache``) and the compiled kernels (``albert_min.model.kernels``, CPU code called
through ``ops.Custom``). Elsewhere MindSpore's own kernels and defaults run.

MindSpore's CPU kernels run on 1 thread by default: a second one was measured slower on the
shared 2-core machine under load (benchmarks/cpu_threads.py: train step 0.72-0.86x, evaluate.py
7.8-9.4 s against 6.0-8.3 s). $ALBERT_MIN_CPU_THREADS sets another count where the compiled kernels
are built: their dropout's masks are the same at any thread count, so a run gives the same bits.
Where they are not (``ALBERT_MIN_KERNELS=off``, no compiler) it stays 1: MindSpore's own Dropout
draws masks that depend on how its threads split the work. At 2+ threads, denormal numbers are read
and written as zero on every thread (``kernels.prepare_cpu``), as MindSpore's own kernel threads do
already: otherwise a step's bits depend on which thread runs which part of it. At 1 thread the
process's floating-point mode is left as it was (a user's numpy sees subnormals).

The kernels are in ``albert_min.model``, above this layer, so ``use_device`` does not import them:
the callers above (``arguments.use_device_flag``, ``training.run``, ``predict.pipeline``) hand
``kernels.prepare_cpu`` in as ``cpu_setup``.

The device is where a process runs, not a setting of the training run: a run saved on one
device resumes on another (train.py records no device in the state).

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
``set_cpu_threads`` (from ``training.step``) and ``default_compile_cache`` (from ``tasks.prediction_engine``)
moved down into this module: ``use_device`` sets the threads, and the kernels (``albert_min.model``)
build under the cache folder, so neither has to reach up a layer for them.
"""

import argparse
import os
import sys

from .environment import variable, whole_number
from .errors import AlbertMinError

DEVICES = ("CPU", "GPU", "Ascend")   # as mindspore.set_device spells them
ENVIRONMENT = "ALBERT_MIN_DEVICE"    # the device when none is given
DEFAULT = "CPU"                      # ... and when that is not set either
THREADS_ENVIRONMENT = "ALBERT_MIN_CPU_THREADS"   # MindSpore's CPU kernel threads, where the kernels are built
CACHE_ENVIRONMENT = "ALBERT_MIN_CACHE"          # the compile cache and the kernels' builds
POOL_STEP = "0.25GB"                 # MindSpore's CPU memory pool starts at this and grows by it (see set_cpu_memory_pool)
# MindSpore's runtime runs a graph on its own threads; by default the calling (Python) thread then
# busy-waits for it (AsyncRQueue::Wait), a third thread spinning on 2 cores beside the kernels' two.
# "1": it sleeps while it waits instead (see host_blocking_run).
HOST_BLOCKING = "MS_DEV_HOST_BLOCKING_RUN"


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
    device = variable(ENVIRONMENT, _device_name, unset_means=DEFAULT, wrong="unknown device", error=DeviceError)
    if device is not None:
        return device, f"{ENVIRONMENT}={os.environ[ENVIRONMENT].strip()}"
    return DEFAULT, f"device {DEFAULT} (the default)"


def _device_name(text):
    """The parser of $ALBERT_MIN_DEVICE (``environment.variable``)."""
    device = canonical_name(text)
    if device is None:
        raise ValueError(f"choose {', '.join(DEVICES)}")
    return device


def applies_cpu_only_parts(device) -> bool:
    """Whether the thread count, the memory pool's blocks, the compile cache and the compiled kernels
    apply on ``device``."""
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


def default_cpu_threads(any_count_repeats=False):
    """MindSpore's CPU kernel threads for this process: $ALBERT_MIN_CPU_THREADS where
    ``any_count_repeats`` (the compiled kernels are built: their dropout's masks do not depend on the
    thread split), else 1; 1 when the variable is not set (a second thread measured slower on the
    shared 2-core machine: see the module docstring). A malformed count is a DeviceError."""
    threads = variable(THREADS_ENVIRONMENT, whole_number(1, 256), default=1, unset_means="1",
                       wrong="not a thread count", error=DeviceError)
    return threads if any_count_repeats else 1


def use_device(name=None, cpu_threads=None, flag="device", cpu_setup=None):
    """Run MindSpore on ``name`` (CPU, GPU or Ascend, any case; None: $ALBERT_MIN_DEVICE, else CPU),
    with the CPU-only parts on CPU (``cpu_threads`` kernel threads; None: ``default_cpu_threads``).
    Returns the device.
    ``flag`` names ``name`` in messages (a script's "--device").
    ``cpu_setup``: on CPU, called with ``cpu_threads`` on this thread before MindSpore's kernel threads
    are set (they inherit its floating-point mode); returns whether a run gives the same bits at any MindSpore
    thread count. ``albert_min.model.kernels.prepare_cpu`` (builds the kernels, denormals as zero);
    None: nothing, and 1 thread unless ``cpu_threads`` says otherwise.

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
        host_blocking_run()
        set_cpu_memory_pool()
        launch_on_calling_thread()
        any_count_repeats = bool(cpu_setup(cpu_threads)) if cpu_setup is not None else False   # before MindSpore's threads
        set_cpu_threads(default_cpu_threads(any_count_repeats) if cpu_threads is None else cpu_threads)
    return device


def _plugin_error(device):
    """MindSpore's first reason why ``device``'s backend did not load, on one line ("" when it gives none:
    its loader names only the libraries it tried, e.g. Ascend's, and skips GPU's without libcuda)."""
    from mindspore._c_expression import MSContext
    lines = [" ".join(line.split()) for line in MSContext.get_instance().load_plugin_error().splitlines()]
    text = next((line for line in lines if device.lower() in line.lower()), "")
    return text if len(text) <= 200 else text[:197] + "..."


def host_blocking_run():
    """On CPU, the Python thread that runs a step or a prediction waits for MindSpore's graph without
    spinning: $MS_DEV_HOST_BLOCKING_RUN=1 unless the caller set it. By default MindSpore's caller spins
    in AsyncRQueue::Wait while the graph runs (perf, base train step: a third of the process's CPU
    samples), and on 2 cores that spinning thread takes its share from the kernels' two threads
    (benchmarks/amp_speed.py --base-vs-torch: docs/mixed-precision.md). It changes which thread waits
    how, never what is computed: the same bits. Before the first graph runs (``use_device``)."""
    os.environ.setdefault(HOST_BLOCKING, "1")


def launch_on_calling_thread():
    """MindSpore's ops launched on the thread that calls the graph, not handed to its launch queue.

    The dynamic-shape graph (``prediction_engine.dynamic_graph``: evaluate.py, ``pipeline``, the speed
    rows) and PyNative push each op to a queue thread while the calling thread busy-waits for it
    (``AsyncRQueue::Wait``): on this 2-core machine that spinning took a whole core from the kernels'
    second thread. perf over a chain of Tanh ops on [16, 128, 768]: the wait 23% of all samples, as
    much as the Tanh work; launched here, none, and 0.86 against 2.04 ms per op (load ~3). The int8
    base forward at batch 16 x 128 ran 1.25 s in the dynamic graph against 0.84 s in a static one
    (load 0.4; benchmarks/int8_profile.py). On CPU a kernel runs on the host anyway: nothing overlaps."""
    import mindspore as ms
    ms.runtime.launch_blocking()


def set_cpu_threads(threads=1):
    """Number of MindSpore CPU kernel threads; once per process, later calls are ignored
    (``cpu_threads()`` tells the count that holds). ``use_device`` chooses it.

    MindSpore's CPU dropout masks depend on how kernel threads split the work, so
    without the kernels' dropout a run needs one thread to repeat. On 2 cores one
    thread was measured no slower (small model train step 2.52 vs 2.33 steps/s
    with MindSpore's default of 25 threads; base encoder 5.4 sentences/s either way),
    and with the kernels' dropout faster than 2 under load (benchmarks/cpu_threads.py).
    """
    import mindspore as ms
    global _THREADS
    if _THREADS is None:
        ms.device_context.cpu.op_tuning.threads_num(threads)
        _THREADS = int(threads)


def set_cpu_memory_pool(step=POOL_STEP):
    """MindSpore's CPU memory pool starts at ``step`` and grows by ``step`` when full ("0.25GB";
    MindSpore's own: a first block of 1 GB, then 2 GB ones). Once per process, before the first
    tensor; a pool set already (``mindspore.runtime.set_memory`` by the caller) is kept.

    Why: the pool never gives memory back, and its best-fit allocator moves tensors around inside
    its blocks from step to step, so over a long run every page of every block gets used once and
    stays resident: the resident pool tends to the blocks' size, not to what the run needs. In
    MindSpore's blocks, the README's SQuAD example (--max-length 384) had used 1.56 GB of a 2.3 GB
    mapping after 28 steps and 2.24 GB by step 200: 4.09 GB peak at 12 steps, 4.91 at 200. In
    0.25 GB blocks, as big as the run needs, 3.81 and 4.03 GB (docs/training.md, "Memory and batch
    shapes").
    """
    import mindspore as ms
    from mindspore._c_expression import RuntimeConf   # what set_memory asks before refusing a second call
    if not RuntimeConf.get_instance().is_memory_configured():   # else the caller's setting holds
        ms.runtime.set_memory(init_size=step, increase_size=step)


def cpu_threads():
    """The MindSpore CPU kernel threads ``set_cpu_threads`` set in this process (None: not set)."""
    return _THREADS


_THREADS = None


def default_compile_cache():
    """Where evaluate.py keeps compiled graphs: $ALBERT_MIN_CACHE (any path; ``~`` is the home folder; a folder
    that cannot be used is a notice where it is used), else ~/.cache/albert_min/compile."""
    default = os.path.join(os.path.expanduser("~"), ".cache", "albert_min", "compile")
    return variable(CACHE_ENVIRONMENT, os.path.expanduser, default=default)


def under(path, root) -> bool:
    """Whether ``path`` is ``root`` or a path inside it (None: no)."""
    if not path:
        return False
    path, root = os.path.abspath(os.fsdecode(path)), os.path.abspath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


_UNUSABLE_CACHES = set()   # the cache folders this process has said it cannot use


def cache_not_usable(root, err, what):
    """One stderr line per process and cache folder that cannot be used (``err``, an OSError naming a
    path under ``root``), saying ``what`` goes without it; True when it was said before (the kernels and
    the compile cache both live under $ALBERT_MIN_CACHE: a bad one is reported once, not by each)."""
    from .errors import os_error_text
    if root in _UNUSABLE_CACHES:
        return True
    _UNUSABLE_CACHES.add(root)
    print(f"albert_min: cache folder {root} not usable ({os_error_text(err)}): {what}", file=sys.stderr)
    return False
