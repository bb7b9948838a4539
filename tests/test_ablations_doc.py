"""docs/make_ablations.py's tables: only results made with the current budget go into them."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def ablations(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_ablations", os.path.join(ROOT, "docs", "make_ablations.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(module, "DOC", str(tmp_path / "ablations.md"))
    os.makedirs(module.RESULTS)
    return module


def write_result(module, variant, seed, sst2, pretrain_flags=None):
    stages = module.stages(variant, seed, "pretrain")
    kept = {"heldout_mlm_accuracy": 0.2, "heldout_sop_accuracy": 0.7, "heldout_nsp_accuracy": 0.5}
    result = {"variant": variant, "seed": seed, "backbone_parameters": 1_270_000,
              "sst2": {"command": module.recorded_command(stages["sst2"], "sst2"), "kept": {"dev_accuracy": sst2}},
              "mrpc": {"kept": {"dev_f1": 0.8, "dev_accuracy": 0.7}}}
    if "pretrain" in stages:
        flags = pretrain_flags or stages["pretrain"]
        result["pretrain"] = {"command": module.recorded_command(flags, "pretrain"), "kept": kept}
    with open(os.path.join(module.RESULTS, f"{variant}-seed{seed}.json"), "w") as f:
        json.dump(result, f)


def test_tables_average_seeds_and_leave_out_other_budgets(ablations, capsys):
    write_result(ablations, "sop", 42, 0.81)
    write_result(ablations, "sop", 7, 0.83)
    other_budget = ablations.stages("nsp", 42, "pretrain")["pretrain"]
    steps = other_budget.index("--max-steps") + 1
    other_budget[steps] = str(int(other_budget[steps]) - 500)
    write_result(ablations, "nsp", 42, 0.99, pretrain_flags=other_budget)
    ablations.write_tables()
    doc = open(ablations.DOC).read()
    assert "| SOP | 42, 7 | 1.27M | 20.0 | 70.0 | 50.0 | 82.00 (81.00, 83.00) | 80.00 / 70.00 |" in doc
    assert "99.00" not in doc                                            # the other budget's row is not shown
    assert "| NSP | - | not run yet |" in doc
    assert "nsp-seed42.json: made with another budget" in capsys.readouterr().out


def test_each_seeds_number_stands_where_the_seeds_column_names_it(ablations):
    # file names sort "seed11" < "seed42" < "seed7"; the table puts the default seed first, then by number
    for seed, sst2 in ((11, 0.79), (42, 0.81), (7, 0.83)):
        write_result(ablations, "sop", seed, sst2)
    ablations.write_tables()
    assert "| SOP | 42, 7, 11 | 1.27M | 20.0 | 70.0 | 50.0 | 81.00 (81.00, 83.00, 79.00) |" in open(ablations.DOC).read()


def test_a_broken_result_file_is_an_error_line(ablations):
    with open(os.path.join(ablations.RESULTS, "sop-seed42.json"), "w") as f:
        f.write('{"variant": "sop"')
    with pytest.raises(SystemExit, match=r"^error: .*sop-seed42.json: not a result"):
        ablations.write_tables()


def test_a_seed_that_is_not_a_whole_number_is_an_error_line(ablations):
    for seed in (42, 7, 11):
        write_result(ablations, "sop", seed, 0.81)
    path = os.path.join(ablations.RESULTS, "sop-seed7.json")
    with open(path) as f:
        result = json.load(f)
    result["seed"] = "7"                                                 # a hand edit; the command still says 7
    with open(path, "w") as f:
        json.dump(result, f)
    with pytest.raises(SystemExit, match=r"^error: .*sop-seed7.json: not a result .*seed '7' is not a whole number"):
        ablations.write_tables()


def test_rerunning_a_variant_whose_result_is_broken_is_an_error_line(ablations, tmp_path):
    with open(os.path.join(ablations.RESULTS, "nsp-seed42.json"), "w") as f:
        f.write('{"variant": "nsp", "seed": 42}')
    with pytest.raises(SystemExit, match=r"^error: .*nsp-seed42.json: not a result"):
        ablations.run_variant("nsp", 42, str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()                              # nothing started


def test_doc_markers_missing_is_an_error_line(ablations):
    with open(ablations.DOC, "w") as f:
        f.write("# hand-written\n")
    with pytest.raises(SystemExit, match="lacks the markers"):
        ablations.write_tables()


def test_the_control_fine_tunes_the_baselines_model_from_random_weights(ablations):
    baseline = ablations.stages("sop", 42, "runs/sop-seed42/pretrain")
    control = ablations.stages("scratch", 42, "runs/scratch-seed42/pretrain")
    assert list(control) == ["sst2", "mrpc"]                              # no pre-training stage
    pretrain = baseline["pretrain"]
    model_flags = {f: pretrain[pretrain.index(f) + 1] for f in pretrain
                   if f in ("--embedding-size", "--sharing", "--tokenizer", "--hidden-size", "--layers", "--heads",
                            "--intermediate-size")}
    for stage in control:
        assert "--init" not in control[stage] and "--task" not in control[stage]
        assert {f: control[stage][control[stage].index(f) + 1] for f in model_flags} == model_flags
        # the same fine-tuning budget as the pre-trained variants: their flags after "--init <folder>"
        assert baseline[stage][0] == "--init"
        assert control[stage][-len(baseline[stage][2:]):] == baseline[stage][2:]


def test_the_control_row_has_no_pretraining_scores(ablations):
    write_result(ablations, "scratch", 42, 0.80)
    write_result(ablations, "sop", 42, 0.82)
    ablations.write_tables()
    doc = open(ablations.DOC).read()
    assert "| no pre-training | 42 | 1.27M | - | - | - | 80.00 | 80.00 / 70.00 | not in the paper |" in doc
    assert "| SOP (the baseline) | 42 | 1.27M | 20.0 | 70.0 | 50.0 | 82.00 |" in doc
