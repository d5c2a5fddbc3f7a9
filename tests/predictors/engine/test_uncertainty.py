"""The stated 80 % range of a prediction, from held-out measured steps."""
import numpy as np
import pytest
from paths import SCENARIOS

from predictors.engine.predict import predict
from predictors.engine.uncertainty import (
    error_quantiles,
    range_remark,
    start_quantiles,
    stated_range,
)
from predictors.profiles import resolve_profile
from predictors.scenario.format import load_scenario


def test_the_quantiles_are_the_order_statistics_of_expected_coverage():
    errors = np.arange(1, 10) / 100          # 9 errors: positions 1 and 9 of n + 1 = 10
    assert error_quantiles(errors) == pytest.approx((0.01, 0.09))
    grid = np.linspace(-0.2, 0.2, 99)            # positions 10 and 90 of n + 1 = 100
    assert error_quantiles(grid) == pytest.approx((grid[9], grid[89]))


def test_machine_starts_that_move_their_steps_widen_the_range():
    residuals = np.linspace(-0.05, 0.05, 11)
    alike = [residuals, residuals + 0.001, residuals - 0.001]
    apart = [residuals - 0.15, residuals, residuals + 0.15]
    lo, hi = start_quantiles(alike)
    assert (lo, hi) == pytest.approx(error_quantiles(np.concatenate(alike)), abs=0.01)
    lo, hi = start_quantiles(apart)
    # a new start may move further than the ones seen: wider than their pooled errors'
    pooled_lo, pooled_hi = error_quantiles(np.concatenate(apart))
    assert lo < pooled_lo - 0.03 and hi > pooled_hi + 0.03
    # one start: its own quantiles (taken on log(1 + error))
    assert start_quantiles([residuals]) == pytest.approx(error_quantiles(residuals), abs=1e-4)
    # the range stays positive however far the starts lie apart
    lo, _ = start_quantiles([[-0.5, -0.45], [0.5, 0.6], [-0.2]])
    assert lo > -1.0
    with pytest.raises(ValueError, match="no errors"):
        start_quantiles([[], []])


def test_a_calibrated_profile_states_the_range_of_its_own_validation():
    profile = resolve_profile("local-cpu-1t")
    rows = profile.validation["end_to_end"]["rows"]
    band = stated_range(10.0, profile, "cpu", "cpu")
    assert band["iteration_ms_low"] < band["iteration_ms_high"]
    assert "own validation" in band["basis"]
    # most of the profile's own measured steps lie in the range of their prediction
    inside = [stated_range(r["predicted_ms"], profile, "cpu", "cpu") for r in rows]
    share = np.mean([b["iteration_ms_low"] <= r["measured_ms"] <= b["iteration_ms_high"]
                     for b, r in zip(inside, rows)])
    assert share >= 0.75
    assert stated_range(10.0, None, "cpu", "cpu") is None   # the roofline: no validation


def test_a_gpu_profile_from_public_data_states_the_range_of_an_unseen_gpu():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "dgx-h100"}
    p = predict(doc)
    assert p.iteration_ms_low < p.iteration_ms_high
    assert any("fitted on public data" in n for n in p.notes)
    out = p.to_json()
    assert out["iteration_ms_low"] == p.iteration_ms_low


def test_a_range_that_leaves_out_the_prediction_says_why():
    """Host-bound steps predicted with a public-data profile all ran faster than
    predicted: the range lies below the prediction, and the note says so."""
    assert range_remark(7.0, 3.3, 5.2) == "steps like it ran faster than predicted"
    assert range_remark(7.0, 7.5, 9.0) == "steps like it ran slower than predicted"
    assert range_remark(7.0, 6.0, 8.0) == "" and range_remark(7.0, None, None) == ""
    p = predict(load_scenario(SCENARIOS / "small_dlrm.json"))   # one A100, host-bound
    note = next(n for n in p.notes if n.startswith("80 % range"))
    if p.iteration_ms_high < p.iteration_ms:
        assert note.endswith("ran faster than predicted, so the range leaves out the "
                             "prediction")
    else:
        assert "leaves out" not in note


def test_the_check_leaves_the_checked_machine_start_out_of_its_range(tmp_path):
    import importlib.util
    import json

    from paths import ROOT

    spec = importlib.util.spec_from_file_location("uncertainty_bench",
                                                  ROOT / "benchmarks" / "uncertainty.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    calm = {"host": [-0.02, 0.0, 0.01, 0.03]}
    per_start = {"public": {"a": calm, "b": calm, "wild": {"host": [0.9, 1.1, 1.3, 1.5]}}}
    ranges = {}
    for out in (None, "wild"):
        table = bench._table("NVIDIA H200", per_start, out)
        assert ("wild" in table["errors_per_start"]["public"]) == (out is None)
        path = tmp_path / f"{out}.json"
        path.write_text(json.dumps(table))
        ranges[out] = stated_range(10.0, None, "NVIDIA H200", "host", table=path)
    # without the wild start its range is far narrower
    assert (ranges["wild"]["iteration_ms_high"] - ranges["wild"]["iteration_ms_low"]
            < 0.5 * (ranges[None]["iteration_ms_high"] - ranges[None]["iteration_ms_low"]))
