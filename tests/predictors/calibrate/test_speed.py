"""The machine-speed probe that validation reads its errors against."""
import pytest

from predictors.calibrate.speed import combine, probe, relative_speed
from predictors.calibrate.validate import format_report


def test_probe_measures_a_gemm_and_a_streaming_add():
    p = probe(0.05)
    assert 1 < p["gemm_gflops"] < 1e5 and 0.1 < p["stream_gbps"] < 1e4


def test_combine_takes_medians_and_the_gemm_spread():
    c = combine([{"gemm_gflops": g, "stream_gbps": 10.0} for g in (40, 50, 60, 70, 80)])
    assert c["gemm_gflops"] == 60 and c["stream_gbps"] == 10 and c["probes"] == 5
    assert c["gemm_gflops_p10"] == 44 and c["gemm_gflops_p90"] == 76
    assert combine([]) == {}


def test_relative_speed_is_the_geomean_of_both_ratios():
    ref = {"gemm_gflops": 50.0, "stream_gbps": 20.0}
    assert relative_speed({"gemm_gflops": 100.0, "stream_gbps": 40.0}, ref) == pytest.approx(1.0)
    assert relative_speed({"gemm_gflops": 200.0, "stream_gbps": 20.0}, ref) == pytest.approx(1.0)
    assert relative_speed(ref, None) is None and relative_speed({}, ref) is None


def _result(speed):
    row = {"kind": "dlrm", "scenario": "s", "measured_ms": 10.0, "predicted_ms": 12.0,
           "error": 0.2, "noise": 0.02, "other_cpus": 0.0, "speed": speed}
    summary = {"n": 1, "geomean_abs_error": 0.2, "mean_abs_error": 0.2,
               "worst_abs_error": 0.2, "noise_geomean": 0.02, "noise_worst": 0.02,
               "abs_speed_geomean": None if speed is None else abs(speed)}
    return {"profile": "p", "threads": 1, "kernel_classes": {}, "rows": [row],
            "summary": {"dlrm": summary}}


def test_report_shows_the_drift_beside_the_error():
    text = format_report(_result(0.2))
    assert "+20.0%" in text and "|speed| geomean 20.0%" in text
    old = format_report(_result(None))  # a profile calibrated before probes existed
    assert "|speed|" not in old and old.splitlines()[-1].startswith("  dlrm")


def test_probe_runs_with_the_profiles_threads_and_restores_torchs(monkeypatch):
    import torch

    import predictors.calibrate.speed as speed
    seen = []
    monkeypatch.setattr(speed, "_probe", lambda s: seen.append(torch.get_num_threads()) or {})
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        probe(0.02, threads=1)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
