"""The verdict names what bounds a step from its critical path."""
import copy

import pytest
from paths import SCENARIOS

from predictors.engine.predict import predict
from predictors.engine.verdict import path_shares
from predictors.scenario.format import load_scenario


@pytest.fixture(scope="module")
def bert():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    doc["platform"] = {"preset": "dgx-a100"}
    return doc


def test_a_small_batch_is_host_bound_and_a_large_one_device_bound(bert):
    small = predict(bert)
    assert small.verdict["bound"] == "host"
    assert "the CPU's dispatch of" in small.verdict["text"]
    assert any("larger per-GPU batch" in w for w in small.verdict["what_if"])
    big = copy.deepcopy(bert)
    big["training"]["batch_size"] = 512
    large = predict(big)
    assert large.verdict["bound"] == "device"
    shares = large.verdict["shares"]
    assert shares["device"] > 0.9 and sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
    assert large.to_json()["verdict"] == large.verdict


def test_shares_add_up_to_the_step_and_follow_the_critical_path(bert):
    p = predict(bert)
    shares = path_shares(p.timeline)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert 0.0 <= shares["device"] < 0.1   # the host runs ahead of few kernels


def test_per_table_lookups_suggest_fused_ones_and_cpu_steps_say_cpu():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "dgx-a100"}
    gpu = predict(doc)
    assert gpu.verdict["bound"] == "host"
    assert any("fused embedding lookups" in w for w in gpu.verdict["what_if"])
    doc["platform"] = {"preset": "local-cpu"}
    assert predict(doc).verdict["bound"] == "cpu"


def test_a_step_that_does_not_fit_is_memory_bound(bert):
    huge = copy.deepcopy(bert)
    huge["training"]["batch_size"] = 16384
    p = predict(huge)
    assert p.verdict["bound"] == "memory"
    assert "do not fit" in p.verdict["text"]
