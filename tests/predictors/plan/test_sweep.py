"""Sweeps: one setting, many values, a prediction (or the reason there is none) for each."""
import json
import subprocess
import sys

import pytest
from paths import ROOT, SCENARIOS

from predictors.model.capture import capture_scenario
from predictors.plan.sweep import parse_values, sweep
from predictors.scenario.format import load_scenario
from predictors.utils.progress import Cancelled


@pytest.fixture
def dlrm():
    return load_scenario(SCENARIOS / "small_dlrm.json")


def test_batch_sweep_predicts_each_value_in_order(dlrm):
    result = sweep(dlrm, "batch_size", [128, 1024, 8192])
    assert [r.value for r in result.rows] == [128, 1024, 8192]
    for row in result.rows:
        assert not row.error and row.iteration_ms > 0 and row.ranks == 1
        assert row.records_per_s == pytest.approx(row.value / (row.iteration_ms / 1e3))
    assert result.rows[2].device_active_ms > result.rows[0].device_active_ms  # more work
    assert result.best() is max(result.rows, key=lambda r: r.records_per_s)
    json.dumps(result.to_json())


def test_a_value_that_cannot_run_is_reported_in_its_row(dlrm):
    result = sweep(dlrm, "platform", ["a100-1", "no-such-preset", "dgx-a100"])
    ok, bad, multi = result.rows
    assert ok.iteration_ms and multi.ranks == 8
    assert bad.iteration_ms is None and "unknown preset" in bad.error


def test_sweep_cancels_and_rejects_bad_input(dlrm):
    with pytest.raises(Cancelled):
        sweep(dlrm, "batch_size", [128, 256], cancelled=lambda: True)
    with pytest.raises(ValueError, match="cannot sweep"):
        sweep(dlrm, "lr", [0.1])
    assert parse_values("batch_size", " 256, 512,") == [256, 512]
    with pytest.raises(ValueError, match="'x' is not a whole number"):
        parse_values("batch_size", "256,x")


def test_captures_are_reused_across_platforms(dlrm):
    a = capture_scenario(dlrm, gpu=True)
    other = dict(dlrm, platform={"preset": "h100-1"}, layout={"moved": True})
    assert capture_scenario(other, gpu=True) is a  # the platform does not change the step
    assert capture_scenario(dlrm, gpu=False) is not a


@pytest.mark.slow   # a subprocess of the CLI; `make test-full`
def test_sweep_cli(tmp_path):
    out = subprocess.run([sys.executable, "-m", "predictors", "sweep",
                          str(SCENARIOS / "small_dlrm.json"), "--param", "batch_size",
                          "--values", "256,512", "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["value"] for r in rows] == [256, 512] and all(r["iteration_ms"] for r in rows)
    bad = subprocess.run([sys.executable, "-m", "predictors", "sweep",
                          str(SCENARIOS / "small_dlrm.json"), "--param", "batch_size",
                          "--values", "abc"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert bad.returncode == 2 and "'abc'" in bad.stderr


def test_sweeping_the_optimizer_shows_adams_time_and_memory():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    doc["training"]["batch_size"] = 4
    result = sweep(doc, "optimizer", ["sgd", "adamw"])
    sgd, adamw = result.rows
    assert not sgd.error and not adamw.error
    assert adamw.iteration_ms > sgd.iteration_ms   # the moments' update
    params = sgd.prediction.per_rank[0]["memory"]["resident_bytes"]["parameters"]
    assert adamw.peak_memory_bytes - sgd.peak_memory_bytes >= 2 * params * 0.99


def test_sweeping_the_input_pipeline_shows_what_torchrecs_costs(dlrm):
    dlrm["platform"] = {"preset": "dgx-a100"}
    result = sweep(dlrm, "input_pipeline", parse_values("input_pipeline", "resident,torchrec"))
    resident, torchrec = result.rows
    assert not resident.error and not torchrec.error
    assert torchrec.iteration_ms > resident.iteration_ms   # the copy and the input dist
    bad = sweep(dlrm, "input_pipeline", ["dali"]).rows[0]
    assert "training.input_pipeline" in bad.error
