"""SQuAD EM/F1 against values computed by hand from the official scripts' definitions."""
import pytest

from albert_min.tasks.squad.metric import evaluate_v1, evaluate_v2, exact_match, f1_v1, f1_v2, normalize_answer


@pytest.mark.parametrize("text, normal", [
    ("The  Quick, Brown-Fox!", "quick brownfox"),      # article, punctuation (hyphen joins), spaces
    ("an apple a day", "apple day"),
    ("Theater of the Absurd", "theater of absurd"),    # "the" only as a whole word
    ("  A\tB\n", "b"),                                 # "a" is an article even in capitals
    ("1,000.5 km", "10005 km"),
    ("", ""),
])
def test_normalize_answer(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_after_normalising():
    assert exact_match("The Eiffel Tower", "eiffel tower.") == 1
    assert exact_match("Eiffel Towers", "eiffel tower") == 0


def test_f1_counts_shared_tokens_with_multiplicity():
    # pred [cat, sat, on, mat], gold [cat, on, mat]: P 3/4, R 1 -> 6/7
    assert f1_v1("the cat sat on the mat", "cat on mat") == pytest.approx(6 / 7)
    # pred [x, x, y], gold [x, y, y]: 2 shared -> P = R = 2/3
    assert f1_v1("x x y", "x y y") == pytest.approx(2 / 3)
    assert f1_v1("a", "b") == 0.0


def test_empty_answers_differ_between_versions():
    assert f1_v1("", "") == 0.0            # v1.1: nothing shared is 0
    assert f1_v2("", "") == 1.0            # v2.0: both empty agree
    assert f1_v2("the", "") == 1.0         # "the" normalises to empty
    assert f1_v2("Paris", "") == 0.0


def test_v1_takes_the_best_gold_answer_and_counts_missing_as_zero():
    gold = {"q1": ["Denver Broncos"], "q2": ["Broncos", "Denver Broncos team"], "q3": ["x"]}
    preds = {"q1": "the Denver Broncos!", "q2": "Denver Broncos"}
    # q1: 1 / 1.  q2: EM 0; F1 max(P 1/2 R 1 -> 2/3, P 1 R 2/3 -> 0.8) = 0.8.  q3: missing, 0.
    out = evaluate_v1(gold, preds)
    assert out["exact_match"] == pytest.approx(100 / 3)
    assert out["f1"] == pytest.approx(180 / 3)
    assert (out["total"], out["missing"]) == (3, 1)


def test_v1_refuses_a_question_without_gold_answers():
    with pytest.raises(ValueError, match="q9"):
        evaluate_v1({"q9": []}, {"q9": ""})


GOLD2 = {"q1": ["Paris"], "q2": ["big red dog"], "q3": [], "q4": []}
PREDS2 = {"q1": "Paris", "q2": "red dog", "q3": "something", "q4": ""}
# q2: P 1, R 2/3 -> F1 0.8


def test_v2_without_null_odds():
    out = evaluate_v2(GOLD2, PREDS2)
    assert out["exact"] == pytest.approx(50) and out["f1"] == pytest.approx(70) and out["total"] == 4
    assert (out["HasAns_exact"], out["HasAns_f1"], out["HasAns_total"]) == (pytest.approx(50), pytest.approx(90), 2)
    assert (out["NoAns_exact"], out["NoAns_f1"], out["NoAns_total"]) == (50, 50, 2)
    assert "best_exact" not in out


def test_v2_best_thresholds_follow_the_official_sweep():
    na = {"q1": 0.2, "q2": 0.3, "q3": 0.4, "q4": 0.9}
    out = evaluate_v2(GOLD2, PREDS2, na)
    # all "no answer": 2 right.  Answer in na order: q1 +1 = 3 (best, 0.2); q2 EM +0 / F1 +0.8 = 3.8
    # (F1 best, 0.3); q3 answered "something" for no answer -1; q4 answered "" +0.
    assert (out["best_exact"], out["best_exact_thresh"]) == (75.0, 0.2)
    assert out["best_f1"] == pytest.approx(95.0) and out["best_f1_thresh"] == 0.3
    assert out["exact"] == 50 and out["f1"] == pytest.approx(70)   # the default threshold 1.0 changes nothing


def test_v2_threshold_turns_answers_into_no_answer():
    na = {"q1": 0.2, "q2": 0.3, "q3": 0.4, "q4": 0.9}
    # above 0.25: q2 (has an answer) -> 0, q3 and q4 (none) -> 1; q1 stays 1
    out = evaluate_v2(GOLD2, PREDS2, na, na_prob_thresh=0.25)
    assert out["exact"] == 75 and out["f1"] == 75


def test_v2_drops_gold_answers_that_normalise_to_nothing():
    # gold "the" is dropped, so only "" counts as right
    assert evaluate_v2({"q": ["the"]}, {"q": ""})["exact"] == 100
    assert evaluate_v2({"q": ["the", "Paris"]}, {"q": "paris"})["exact"] == 100


def test_v2_leaves_questions_without_prediction_out_of_the_average():
    out = evaluate_v2(GOLD2, {"q1": "Paris", "q3": ""})
    assert out["total"] == 2 and out["exact"] == 100
