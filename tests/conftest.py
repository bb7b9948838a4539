import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SST2_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2")
sys.path.insert(0, ROOT)

import mindspore as ms  # noqa: E402

from albert_min.common.device import use_device  # noqa: E402

# CPU whatever $ALBERT_MIN_DEVICE says, with one kernel thread as train.py and evaluate.py use there:
# MindSpore's CPU dropout masks depend on how threads split the work; the tests want the same numbers every run.
use_device("CPU")


@pytest.fixture(autouse=True, scope="session")
def _compile_cache_in_a_temporary_folder(tmp_path_factory):
    """evaluate.py keeps compiled graphs in $ALBERT_MIN_CACHE: not the user's ~/.cache during tests."""
    os.environ["ALBERT_MIN_CACHE"] = str(tmp_path_factory.mktemp("compile_cache"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long end-to-end runs; excluded by default, run with -m slow")
    config.addinivalue_line("markers", "readme: the README's examples run as written (tests/test_readme_examples.py); "
                                       "excluded by default, run with -m readme (.ci/run does, after the suite)")


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
