import os
import shutil
import sys
import tempfile

import numpy as np
import pytest

# tests/ itself on the path (whatever pytest's import mode), for the helpers package
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpers.paths import FIXTURES, ROOT, SST2_DIR  # noqa: E402,F401 (ROOT, SST2_DIR: for `from conftest import`)

sys.path.insert(0, ROOT)

import mindspore as ms  # noqa: E402

from albert_min.common.device import use_device  # noqa: E402
from albert_min.model import kernels  # noqa: E402

# evaluate.py keeps compiled graphs, and albert_min.kernels its library, in $ALBERT_MIN_CACHE: not the
# user's ~/.cache during tests. Set before use_device, which builds the kernels to choose the thread count.
COMPILE_CACHE = tempfile.mkdtemp(prefix="albert_min_test_cache_")
os.environ["ALBERT_MIN_CACHE"] = COMPILE_CACHE

# CPU whatever $ALBERT_MIN_DEVICE says, set up as train.py and evaluate.py set it (the kernels built,
# denormals as zero; 1 MindSpore thread, or $ALBERT_MIN_CPU_THREADS where the kernels are built).
use_device("CPU", cpu_setup=kernels.prepare_cpu)


@pytest.fixture(autouse=True, scope="session")
def _compile_cache_in_a_temporary_folder():
    yield
    os.environ["ALBERT_MIN_CACHE"] = COMPILE_CACHE
    shutil.rmtree(COMPILE_CACHE, ignore_errors=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long end-to-end runs; excluded by default, run with -m slow")
    config.addinivalue_line("markers", "readme: the README's examples run as written (tests/test_readme_examples.py); "
                                       "excluded by default, run with -m readme (.ci/run does, after the suite)")
    config.addinivalue_line("markers", "wheels: the wheel in clean environments of Python 3.10, 3.11 and 3.12 "
                                       "(tests/test_python_versions.py); run with -m wheels (.ci/run does, last)")


@pytest.fixture(scope="module")
def library():
    """The compiled kernels' library path; tests that need it are skipped where they cannot be built."""
    path = kernels.library()
    if path is None:
        pytest.skip("no C++ compiler or MindSpore's oneDNN here: the kernels cannot be built")
    return path


@pytest.fixture(scope="session")
def reference():
    return dict(np.load(os.path.join(FIXTURES, "reference.npz")))


@pytest.fixture(scope="session")
def hf_weights():
    """``{'pretraining': {hf name: array}, 'classifier': {...}}`` from the oracle."""
    raw = np.load(os.path.join(FIXTURES, "weights.npz"))
    out = {"pretraining": {}, "classifier": {}}
    for key in raw.files:
        kind, name = key.split("/", 1)
        out[kind][name] = raw[key]
    return out


def to_tensors(reference, *names):
    return [ms.Tensor(reference[n].astype(np.int32)) for n in names]
