"""validate-sharding's tasks and scores, and predicting measured runs again (--rescore)."""
import json
import random

import numpy as np
import pytest

from predictors.calibrate.sharding_validation import (
    _self_tau,
    choose_plans,
    plan_kind,
    random_sharding_task,
    rescore,
)
from predictors.cli import main
from predictors.engine.parallel import RankGraphs
from predictors.engine.predict import prepare
from predictors.model.sharding import Plan


def test_tasks_are_skewed_dlrms_on_cpu_ranks():
    rng = np.random.default_rng(0)
    for _ in range(5):
        doc = random_sharding_task(rng, 3)
        tables = doc["model"]["nodes"][2]["params"]["tables"]
        assert 4 <= len(tables) <= 12 and doc["platform"]["ranks"] == 3
        assert {t["distribution"]["kind"] for t in tables} <= {"uniform", "zipf"}
        prepare(doc, None)   # a valid scenario


def test_plan_kinds():
    assert plan_kind({"t/0": 0, "t/1": 1}) == "tw"
    assert plan_kind({"t/0": "rw", "t/1": {"kind": "cw", "ranks": [0, 1]},
                      "t/2": {"kind": "tw", "rank": 0}}) == "cw+rw"


def test_the_measurements_own_tau_splits_the_rounds():
    """Odd against even rounds: 1 when every round orders the plans alike, -1 when the
    two halves order them the other way round, None with one round."""
    steady = [[10.0, 10.1, 10.0, 10.1], [12.0, 12.1, 12.0, 12.1], [11.0, 11.2, 11.1, 11.0]]
    assert _self_tau(steady) == 1.0
    swapped = [[10.0, 12.0, 10.0, 12.0], [12.0, 10.0, 12.0, 10.0], [11.0, 11.0, 11.0, 11.0]]
    assert _self_tau(swapped) == -1.0
    assert _self_tau([[10.0], [11.0]]) is None


def test_the_plans_measured_are_the_top_five_and_three_others_or_a_ladder():
    """Without spacing: the five best distinct times, then three random ones.  With it:
    every two plans chosen are at least the spacing apart, the best among them, and a
    ranking too narrow for eight rungs gives fewer plans."""
    ranked = [(f"p{i}", t) for i, t in enumerate(
        [10.0, 10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 11.0, 12.0, 13.0, 14.0, 20.0])]
    top = choose_plans(ranked, random.Random(0))
    assert [t for _, t in top[:5]] == [10.0, 10.1, 10.2, 10.3, 10.4] and len(top) == 8
    assert all(t >= 10.5 for _, t in top[5:])
    ladder = choose_plans(ranked, random.Random(0), spacing=0.05)
    times = [t for _, t in ladder]
    assert times[0] == 10.0 and times == sorted(times)
    assert all(b >= a * 1.05 for a, b in zip(times, times[1:]))
    assert times == [10.0, 10.5, 12.0, 13.0, 14.0, 20.0]   # 11.0 is within 5 % of 10.5
    ladder = choose_plans([(f"p{i}", 10.0 * 1.01 ** i) for i in range(200)],
                          random.Random(1), spacing=0.05)
    assert len(ladder) == 8


@pytest.fixture(scope="module")
def measured_result():
    """Three plans of one task, 'measured' as the prediction orders them."""
    doc, platform, prof = prepare(random_sharding_task(np.random.default_rng(3), 2), None)
    keys = [f"tables/{j}" for j in range(len(doc["model"]["nodes"][2]["params"]["tables"]))]
    plans = [{k: j % 2 for j, k in enumerate(keys)},
             {k: "rw" for k in keys},
             {**{k: 0 for k in keys}, keys[-1]: "dp"}]
    graphs = RankGraphs(doc, platform, prof)
    predicted = [max(graphs.rank_spans_ms(Plan("p", 2, p))) for p in plans]
    return {"summary": {"ranks": 2, "left_out_as_ties": 0, "seed": 3, "elapsed_s": 1.0},
            "tasks": [{"task": doc["name"], "scenario": doc, "assignments": plans,
                       "measured_ms": predicted, "predicted_ms": [0.0] * 3,
                       "noise": 0.01}]}, predicted


def test_rescore_predicts_the_measured_plans_again(measured_result):
    result, predicted = measured_result
    again = rescore(result)
    row = again["tasks"][0]
    assert row["predicted_ms"] == pytest.approx(predicted, rel=1e-4)
    assert row["kendall_tau"] == 1.0 and row["top1"]
    assert again["summary"]["top1"] == 1.0 and again["summary"]["rescored"]
    # a result without rounds (measured before they were kept) has no self tau
    assert again["summary"]["measured_self_tau_mean"] is None
    assert set(again["summary"]["by_kind"]) == {"tw", "rw", "dp"}
    # the same plans measured in the reverse order: the ranking is wrong
    flipped = json.loads(json.dumps(result))
    order = np.argsort(predicted)
    m = np.array(predicted)
    m[order] = m[order][::-1]
    flipped["tasks"][0]["measured_ms"] = m.tolist()
    row = rescore(flipped)["tasks"][0]
    assert row["kendall_tau"] == -1.0 and not row["top1"]


def test_rescore_refuses_a_file_that_is_no_result(tmp_path, capsys):
    bad = tmp_path / "runs.json"
    bad.write_text(json.dumps({"tasks": [{"task": "x"}]}))
    assert main(["validate-sharding", "--rescore", str(bad)]) == 2
    assert "not the JSON of `validate-sharding --json`" in capsys.readouterr().err
