"""A profile calibrated while the machine's speed changed says so in its predictions."""
import dataclasses

from paths import SCENARIOS

from predictors.engine.predict import predict
from predictors.profiles import resolve_profile, unsteady_note
from predictors.scenario.format import load_scenario


def _with_probe_spread(profile, low: float, high: float):
    return dataclasses.replace(profile, provenance={
        **profile.provenance, "speed_reference": {
            **profile.provenance["speed_reference"], "gemm_gflops_p10": low,
            "gemm_gflops_p90": high}})


def test_a_wide_probe_spread_is_noted_in_the_prediction():
    steady = resolve_profile("local-cpu-1t-zen4")
    assert unsteady_note(steady) is None   # 91-98 GFLOP/s through its calibration
    shaky = _with_probe_spread(steady, 58.6, 85.2)
    note = unsteady_note(shaky)
    assert "59-85 GFLOP/s" in note and "calibrate again" in note
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    assert note in predict(doc, profile=shaky).notes
    assert not any("speed changed" in n for n in predict(doc, profile=steady).notes)


def test_no_note_without_probes():
    steady = resolve_profile("local-cpu-1t-zen4")
    bare = dataclasses.replace(steady, provenance={
        k: v for k, v in steady.provenance.items() if k != "speed_reference"})
    assert unsteady_note(bare) is None and unsteady_note(None) is None
