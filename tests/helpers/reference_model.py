"""The tiny pre-training model with the transformers reference's weights (fixtures/weights.npz) and the reference
inputs: what the per-layer tests of tests/model/ compare against fixtures/reference.npz. The fixtures are
imported into each test module (module scope: one model per module)."""

import os

import numpy as np
import pytest

from albert_min.model.folder import load_arrays
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForPreTraining
from conftest import to_tensors
from helpers.paths import FIXTURES

TOL = 1e-5


def max_diff(ours, ref):
    return float(np.abs(ours.asnumpy() - ref).max())


@pytest.fixture(scope="module")
def pretraining(hf_weights):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, "tiny_pretraining", "config.json"))
    model = AlbertForPreTraining(config)
    load_arrays(model, hf_weights["pretraining"], "weights.npz")
    model.set_train(False)
    return model


@pytest.fixture(scope="module")
def inputs(reference):
    return to_tensors(reference, "input_ids", "token_type_ids", "attention_mask")
