"""The largest batch that fits: found with a few captures, and right at the boundary."""
import copy
import json
import subprocess
import sys

import pytest
from paths import ROOT, SCENARIOS

import predictors.plan.capacity as capacity
from predictors.engine.predict import device_memory
from predictors.hardware.platforms import resolve_platform
from predictors.model.capture import capture_training_step
from predictors.model.workload import build_workload
from predictors.plan.capacity import largest_batch
from predictors.scenario.format import ScenarioError, load_scenario


def peak(doc, batch):
    doc = copy.deepcopy(doc)
    doc["training"]["batch_size"] = batch
    return capture_training_step(build_workload(doc), gpu=True).graph["memory"].peak


def test_the_answer_sits_at_the_boundary_of_one_gpu():
    doc = load_scenario(SCENARIOS / "bert_base.json")   # one A100-40GB
    cap = largest_batch(doc)
    memory = device_memory(resolve_platform(doc["platform"]))
    assert cap.device_bytes == memory and cap.over_batch == cap.batch_size + 1
    assert peak(doc, cap.batch_size) == cap.peak_bytes <= memory < peak(doc, cap.over_batch)
    assert cap.peak_op.startswith("aten::") and cap.probes <= 10   # aimed, not bisected


@pytest.mark.slow   # a search over batch sizes twice; `make test-full`
def test_adam_moments_leave_room_for_fewer_samples():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    sgd = largest_batch(doc).batch_size
    doc["training"]["optimizer"] = "adamw"
    assert largest_batch(doc).batch_size < sgd


def test_several_gpus_and_multiples():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}
    cap = largest_batch(doc, multiple=1024)
    assert cap.batch_size % 1024 == 0 and cap.over_batch == cap.batch_size + 1024
    assert cap.peak_bytes <= cap.device_bytes < cap.over_peak_bytes


def test_when_not_even_the_first_multiple_fits():
    cap = largest_batch(load_scenario(SCENARIOS / "bert_base.json"), multiple=1_000_000)
    assert cap.batch_size is None and cap.over_batch == 1_000_000
    assert cap.peak_bytes > cap.device_bytes


def test_on_the_cpu_the_hosts_memory_is_the_limit(monkeypatch):
    import os

    import predictors.plan.capacity as capacity

    doc = load_scenario(SCENARIOS / "bert_base.json")
    doc["platform"] = {"preset": "local-cpu"}
    cap = largest_batch(doc)
    assert cap.device_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert cap.peak_bytes <= cap.device_bytes < cap.over_peak_bytes
    monkeypatch.setattr(capacity, "device_memory", lambda platform: 0.0)
    with pytest.raises(ScenarioError, match="memory is unknown"):
        largest_batch(doc)


@pytest.mark.slow   # a subprocess of the CLI; `make test-full`
def test_fit_command_prints_json():
    out = subprocess.run([sys.executable, "-m", "predictors", "fit",
                          str(SCENARIOS / "small_dlrm.json"), "--multiple", "8", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["batch_size"] % 8 == 0 and result["over_batch"] == result["batch_size"] + 8
    assert result["peak_memory_bytes"] <= result["device_bytes"]


def test_the_search_stops_at_its_cap_on_a_multiple(monkeypatch):

    monkeypatch.setattr(capacity, "MAX_BATCH", 1000)
    cap = largest_batch(load_scenario(SCENARIOS / "small_dlrm.json"), multiple=3)
    assert cap.capped and cap.batch_size == 999 and cap.over_batch is None
    with pytest.raises(ValueError, match="multiple"):
        largest_batch(load_scenario(SCENARIOS / "small_dlrm.json"), multiple=1001)
