"""TSV reading, batching, SOP pairs and MLM masking."""

import random

import numpy as np
import pytest

from albert_min.tasks.errors import DataError
from albert_min.tasks.text_files import check_labels, read_tsv
from albert_min.tasks.batching import eval_batches, pad_batch, train_batch_indices
from albert_min.tasks.pretraining.features import make_sop_examples, truncate_pair
from albert_min.tasks.pretraining.reading import read_documents


def write(tmp_path, text, name="data.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_reads_glue_tsv(tmp_path):
    path = write(tmp_path, "sentence\tlabel\nit 's good . \t1\nbad\t0\n\n")
    assert read_tsv(path) == (["it 's good .", "bad"], [1, 0])


@pytest.mark.parametrize("body, line, message", [
    ("good\t1\nno label here\n", 3, "expected 2 tab-separated fields"),
    ("good\t1\nbad\tnegative\n", 3, "is not an integer"),
    ("good\t1\n\t0\n", 3, "empty 'sentence'"),
    ("good\t1\tx\n", 2, "found 3"),
])
def test_malformed_rows_name_the_line(tmp_path, body, line, message):
    path = write(tmp_path, "sentence\tlabel\n" + body)
    with pytest.raises(DataError, match=f":{line}: .*{message}"):
        read_tsv(path)


def test_header_and_missing_file_errors(tmp_path):
    with pytest.raises(DataError, match=":1: .*no 'label' column"):
        read_tsv(write(tmp_path, "sentence\tscore\nx\t1\n"))
    with pytest.raises(DataError, match="no examples"):
        read_tsv(write(tmp_path, "sentence\tlabel\n"))
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        read_tsv(str(tmp_path / "nope.tsv"))
    with pytest.raises(DataError, match=r"labels \[2\]"):
        check_labels([0, 1, 2], 2, "x.tsv")


def test_pad_batch_pads_to_a_multiple_of_8():
    input_ids, token_type_ids, attention_mask = pad_batch([[2, 7, 3], [2, 5, 6, 8, 9, 3]], pad_id=0)
    assert input_ids.shape == (2, 8) and input_ids.dtype == np.int32
    assert input_ids[0].tolist() == [2, 7, 3, 0, 0, 0, 0, 0]
    assert attention_mask.sum(1).tolist() == [3, 6]
    assert not token_type_ids.any()


def test_eval_batches_cover_every_row_once_sorted_by_length():
    encoded = [[1] * n for n in (5, 2, 9, 3, 7)]
    seen = []
    for idx, rows in eval_batches(encoded, batch_size=2):
        assert [len(r) for r in rows] == [len(encoded[i]) for i in idx]
        seen += idx
    assert sorted(seen) == list(range(5))
    assert [len(encoded[i]) for i in seen] == sorted(len(e) for e in encoded)


def test_train_batches_are_a_seeded_permutation():
    lengths = [1 + i % 7 for i in range(100)]

    def epoch(seed):
        return [tuple(batch) for batch in train_batch_indices(lengths, 8, random.Random(seed), bucket_batches=4)]

    first = epoch(1)
    assert first == epoch(1) and first != epoch(2)
    assert sorted(i for batch in first for i in batch) == list(range(100))
    assert all(len(batch) <= 8 for batch in first)


def test_sop_pairs_keep_both_segments_and_swap_about_half(tmp_path):
    path = write(tmp_path, "".join(f"s{d}a\ns{d}b\ns{d}c\n\n" for d in range(400)), "corpus.txt")
    documents = read_documents(path)
    assert len(documents) == 400 and documents[0] == ["s0a", "s0b", "s0c"]
    docs_ids = [[[100 * d + 10 * i + j for j in range(3)] for i in range(3)] for d in range(400)]
    examples = make_sop_examples(docs_ids, max_length=64, rng=random.Random(0))
    assert len(examples) == 400
    swapped = 0
    for a, b, label in examples:
        first, second = (b, a) if label == 1 else (a, b)
        assert first[-1] < second[0]          # in original order once un-swapped
        assert len(a) + len(b) == 9
        swapped += label
    assert 150 < swapped < 250


def test_sop_pairs_respect_max_length():
    docs_ids = [[[1] * 30, [2] * 30, [3] * 30]]
    for a, b, _ in make_sop_examples(docs_ids, max_length=40, rng=random.Random(0)):
        assert len(a) + len(b) <= 37 and a and b


def test_a_lone_long_sentence_is_split_in_its_middle():
    examples = make_sop_examples([[list(range(100))]], max_length=23, rng=random.Random(0))
    (a, b, label), = examples
    first, second = (b, a) if label else (a, b)
    assert first == list(range(10))
    assert len(second) == 10 and second == list(range(second[0], second[0] + 10)) and second[0] >= 10


def test_pairs_are_trimmed_at_random_ends_so_punctuation_does_not_give_the_order_away():
    """Google's truncate_seq_pair: the longer segment loses pieces at its front or back at
    random. (Trimming A always at its front and B at its back let a model read the order
    off whether the first segment ends a sentence.)"""
    rng = random.Random(0)
    fronts = backs = 0
    for _ in range(200):
        a, b = list(range(0, 30)), list(range(30, 40))
        truncate_pair(a, b, 25, rng)
        assert len(a) + len(b) == 25 and b == list(range(30, 40))
        assert a == list(range(a[0], a[0] + 15))           # one contiguous run of A
        fronts += a[0] > 0
        backs += a[-1] < 29
    assert fronts > 150 and backs > 150                    # both ends trimmed, ~ half the pieces each
