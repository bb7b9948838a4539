"""The tiny pre-training model with the transformers reference's weights (fixtures/weights.npz) and the reference
inputs: what the per-layer tests of tests/model/ compare against fixtures/reference.npz. The fixtures are
imported into each test module (module scope: one model per module).

``accelerated`` runs every test that asks for it twice: on the plain model (MindSpore's ops, as
``albert_min.model`` builds it) and on the same model after ``kernels.accelerate`` (the compiled kernels;
skipped where they cannot be built). ``build`` applies it to a model a test builds itself."""

import os

import numpy as np
import pytest

from albert_min.model import kernels
from albert_min.model.folder import load_arrays
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForPreTraining, AlbertForSequenceClassification
from conftest import to_tensors
from helpers.paths import FIXTURES

TOL = 1e-5


def max_diff(ours, ref):
    return float(np.abs(ours.asnumpy() - ref).max())


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "accelerated"])
def accelerated(request):
    """False: the plain model; True: the model after ``kernels.accelerate`` (skipped without the kernels)."""
    if request.param and kernels.library() is None:
        pytest.skip("no C++ compiler or MindSpore's oneDNN here: the kernels cannot be built")
    return request.param


@pytest.fixture(scope="module")
def build(accelerated):
    """``build(model)``: ``model`` as the test asked for it, plain or accelerated (in place), in prediction mode."""
    def built(model):
        if accelerated:
            kernels.accelerate(model)
            assert kernels.uses_kernels(model)
        else:
            assert not kernels.uses_kernels(model)
        model.set_train(False)
        return model
    return built


@pytest.fixture(scope="module")
def pretraining(hf_weights, build):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, "tiny_pretraining", "config.json"))
    model = AlbertForPreTraining(config)
    load_arrays(model, hf_weights["pretraining"], "weights.npz")
    return build(model)


@pytest.fixture(scope="module")
def inputs(reference):
    return to_tensors(reference, "input_ids", "token_type_ids", "attention_mask")


def tiny_classifier(hidden_act="gelu_new"):
    """A small random classifier, plain, for what ``kernels.accelerate`` does to it."""
    return AlbertForSequenceClassification(AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=16,
                                                        num_hidden_layers=2, num_attention_heads=2,
                                                        intermediate_size=24, hidden_act=hidden_act))


def accelerates():
    """Does ``kernels.accelerate`` put the kernels into a model in this process (False: it stays plain)?"""
    return kernels.uses_kernels(kernels.accelerate(tiny_classifier()))
