"""A GPU without measurements takes the measured GEMM models of a GPU of the same compute
(predictors/costs/datasheet.py with_measured_sibling): the H100 SXM from the H200."""
import glob

import pytest

from paths import SCENARIOS, SHARED_DATA
from predictors.calibrate.gpu_profiles import profile_for_device
from predictors.costs.datasheet import same_compute, with_measured_sibling
from predictors.engine.predict import predict
from predictors.hardware.specs import find_gpu_spec
from predictors.profiles import resolve_profile
from predictors.scenario.format import load_scenario

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
BERT_H100 = sorted(glob.glob(str(SHARED_DATA / "traces" / "tracelens-h100-bert-small"
                                 / "*.json.gz")))


def _doc(name: str, preset: str) -> dict:
    doc = load_scenario(SCENARIOS / f"{name}.json")
    doc["platform"] = {"preset": preset}
    return doc


def test_the_h100_sxm_and_the_h200_share_their_compute_the_h100_pcie_does_not():
    h100, h200, pcie = (find_gpu_spec(n) for n in (H100, H200, "NVIDIA H100 PCIe"))
    assert same_compute(h100, h200) and same_compute(h200, h100)
    assert not same_compute(pcie, h200)
    assert not same_compute(find_gpu_spec("NVIDIA A100-SXM4-40GB"), h200)


def test_the_h100_takes_the_h200s_measured_gemms_on_its_own_figures():
    fitted = profile_for_device(H100)
    derived = with_measured_sibling(fitted)
    measured = resolve_profile("nvidia-h200-measured")
    assert derived is not fitted and derived.kind == "fitted"
    assert "measured on the NVIDIA H200" in derived.provenance["gemm_sibling"]
    for key in ("gemm_half", "gemm_fp32"):
        model = derived.kernel_models[key]
        assert model.regressor is measured.kernel_models[key].regressor
        assert model.figures.mem_bw == fitted.device.mem_bw < measured.device.mem_bw
    assert "gemm_half" not in fitted.kernel_models      # the bundled profile is untouched
    assert with_measured_sibling(fitted) is derived      # one derived object per input
    # a measured profile, or a GPU with no measured twin, stays as it is
    assert with_measured_sibling(measured) is measured
    a100 = profile_for_device("NVIDIA A100-SXM4-40GB")
    assert with_measured_sibling(a100) is a100


def test_by_default_the_h100_never_predicts_faster_than_the_h200_and_says_why():
    for name in ("bert_base", "small_dlrm"):
        h100, h200 = predict(_doc(name, "h100-1")), predict(_doc(name, "h200-1"))
        assert h200.iteration_ms <= h100.iteration_ms, name
        assert any("measured on the NVIDIA H200" in n for n in h100.notes)
    # a profile named by the caller is used as it is
    named = predict(_doc("bert_base", "h100-1"), profile=profile_for_device(H100))
    assert not any("measured on the NVIDIA H200" in n for n in named.notes)


@pytest.mark.skipif(not BERT_H100, reason="the public H100 trace is not in ../shared/data")
def test_a_recorded_h100_steps_gemms_come_closer_with_the_h200s_models():
    from predictors.calibrate.trace_validation import validate_recording
    from predictors.traces.recording import load_recording

    rec = load_recording(BERT_H100)
    fitted = profile_for_device(H100)
    alone, derived = (validate_recording(rec, p) for p in (fitted, with_measured_sibling(fitted)))
    # public data alone: 47 % off; the H200's models: 17 %
    assert derived.per_class["gemm"]["gmae_pct"] < 25 < 40 < alone.per_class["gemm"]["gmae_pct"]
    assert abs(derived.active_error_pct) < abs(alone.active_error_pct)
