"""The host's CPU overheads, shared by every GPU of the host (predictors/costs/host_overheads)."""
import copy
import json
from pathlib import Path

import pytest

from predictors.calibrate.gpu_profiles import profile_for_device
from predictors.costs.host_overheads import (
    DEFAULT_HOST,
    LAUNCH_US,
    gpu_generation,
    host_names,
    launch_us,
    load_host,
    overheads_on,
    profile_on_host,
)
from predictors.engine.predict import predict
from predictors.hardware.platforms import resolve_platform
from predictors.profiles import ProfileError
from predictors.scenario.format import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[3] / "resources" / "scenarios"
# GPUs in the order of their datasheets: each at least as fast as the one before in
# every peak (FLOP/s of each dtype, memory bandwidth)
FASTER = ("v100-1", "a100-1", "h100-1", "h200-1", "b200-1")
FASTER_NODES = ("dgx1-v100", "dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200")


def _doc(name: str, preset: str, batch: int | None = None) -> dict:
    doc = json.loads((SCENARIOS / f"{name}.json").read_text())
    doc["platform"] = {"preset": preset}
    if batch is not None:
        doc["training"]["batch_size"] = batch
    return doc


def test_the_catalogue_holds_the_default_host():
    assert DEFAULT_HOST in host_names()
    host = load_host()
    assert host.name == DEFAULT_HOST and host.overheads.per_op and host.source
    with pytest.raises(ProfileError, match="no host 'nowhere'.*dgx1-2023"):
        load_host("nowhere")


def test_gpu_generations():
    assert gpu_generation("Tesla V100-SXM2-32GB") == "volta"
    assert gpu_generation("NVIDIA A100-SXM4-40GB") == "ampere"
    assert gpu_generation("NVIDIA H100 80GB HBM3") == gpu_generation("NVIDIA H200") == "hopper"
    assert gpu_generation("a GPU nobody knows") is None


def test_a_gpu_contributes_its_launch_only():
    host = load_host()
    hopper = overheads_on(host, "NVIDIA H200")
    assert hopper.default.t4 == pytest.approx(LAUNCH_US["hopper"] * 1e-6)
    for key in ("t1", "t2", "t3", "t5"):   # the host's part is the host's
        assert getattr(hopper.default, key) == getattr(host.overheads.default, key)
    name = next(k for k, v in host.overheads.per_op.items() if v.t4 > 0)
    ratio = hopper.per_op[name].t4 / host.overheads.per_op[name].t4
    assert ratio == pytest.approx(hopper.default.t4 / host.overheads.default.t4)
    # a generation without a measured launch takes the latest earlier one's; before the
    # first measured one, the host's own
    assert launch_us("ampere") == LAUNCH_US["volta"]
    assert launch_us("blackwell") == LAUNCH_US["hopper"]
    assert overheads_on(host, "Tesla P100-PCIE-16GB") is host.overheads


def test_profiles_on_one_host_share_its_table():
    host = load_host()
    fitted = profile_for_device("NVIDIA H200")
    h100 = profile_on_host(profile_for_device("NVIDIA H100 80GB HBM3"), host)
    h200 = profile_on_host(fitted, host)
    assert h100.overheads.per_op.keys() == h200.overheads.per_op.keys()
    assert h100.overheads.default.t1 == h200.overheads.default.t1
    assert profile_on_host(fitted, host) is h200   # one object per profile and host


def test_a_gpu_prediction_names_its_host_and_the_scenario_can_choose_it():
    doc = _doc("small_dlrm", "h100-1")
    default = predict(doc)
    assert any(n.startswith(f"host: {DEFAULT_HOST}") for n in default.notes)
    doc["platform"]["host"] = "dgx1-2023"
    dgx1 = predict(doc)
    assert any(n.startswith("host: dgx1-2023") for n in dgx1.notes)
    assert dgx1.iteration_ms != pytest.approx(default.iteration_ms)   # the host matters
    assert predict(_doc("small_dlrm", "h100-1"), host="dgx1-2023").iteration_ms == \
        pytest.approx(dgx1.iteration_ms)
    doc["platform"]["host"] = "nowhere"
    with pytest.raises(ScenarioError, match="platform.host"):
        predict(doc)


def test_a_cpu_prediction_has_no_host():
    result = predict(_doc("small_dlrm", "local-cpu"))
    assert not any(n.startswith("host:") for n in result.notes)


def _fitted(doc: dict) -> float:
    """The iteration with the GPU's profile fitted on public data, on the default host."""
    device = resolve_platform(doc["platform"]).device
    return predict(doc, profile=profile_for_device(device), host=DEFAULT_HOST).iteration_ms


@pytest.mark.parametrize("presets", [FASTER, FASTER_NODES])
def test_on_one_host_a_faster_gpu_never_predicts_slower(presets):
    for name, per_gpu in (("small_dlrm", None), ("bert_base", 8)):
        times = []
        for preset in presets:
            gpus = resolve_platform({"preset": preset}).ranks
            times.append(_fitted(_doc(name, preset, per_gpu and per_gpu * gpus)))
        for (a, ta), (b, tb) in zip(zip(presets, times), zip(presets[1:], times[1:])):
            assert tb <= ta * (1 + 1e-9), f"{name}: {b} {tb:.3f} ms > {a} {ta:.3f} ms"


def test_bert_on_dgx_h100_and_h200_differs_by_the_gpus_only():
    h100 = predict(_doc("bert_base", "dgx-h100", 32))
    h200 = predict(_doc("bert_base", "dgx-h200", 32))
    assert h200.iteration_ms <= h100.iteration_ms
    assert h200.iteration_ms == pytest.approx(h100.iteration_ms, rel=0.05)  # host-bound


def test_predicting_with_a_host_copies_the_profile_only():
    profile = profile_for_device("NVIDIA H200")
    before = copy.deepcopy(profile.overheads.to_json())
    predict(_doc("small_dlrm", "h200-1"), profile=profile, host="xeon-vm-2026")
    assert profile.overheads.to_json() == before


def test_a_drawn_platform_names_its_host_too():
    doc = _doc("small_dlrm", "h100-1")
    doc["platform"] = {"nodes": [{"id": "g0", "kind": "gpu", "params": {"model": "h100"}}],
                       "edges": [], "host": "xeon-vm-2026"}
    assert any(n.startswith("host: xeon-vm-2026") for n in predict(doc).notes)
