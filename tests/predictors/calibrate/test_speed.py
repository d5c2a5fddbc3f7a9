"""The machine-speed probe that validation reads its errors against."""
import pytest

from predictors.calibrate.speed import combine, probe, relative_speed
from predictors.calibrate.validate import format_report


def test_probe_measures_a_gemm_and_a_streaming_add():
    p = probe(0.05)
    # One core's fp32 peak: at most ~256 GFLOP/s (4 GHz x 2 FMA units x 16 lanes x 2);
    # its stream: tens of GB/s.  A seconds/milliseconds mix-up lands 1000x off.
    assert 1 < p["gemm_gflops"] < 500 and 0.5 < p["stream_gbps"] < 500


def test_probe_turns_timings_into_rates(monkeypatch):
    """Every timed call takes 1 ms on a fake clock: the rates are the probe's work over
    1 ms (2mkn FLOPs; three 4-byte operands streamed)."""
    import itertools

    import predictors.calibrate.speed as speed
    ticks = itertools.count()
    monkeypatch.setattr(speed.time, "perf_counter", lambda: next(ticks) * 1e-3)
    p = speed._probe(0.01)
    m, k, n = speed.GEMM_SHAPE
    assert p["gemm_gflops"] == pytest.approx(2 * m * k * n / 1e-3 / 1e9)
    assert p["stream_gbps"] == pytest.approx(3 * 4 * speed.STREAM_NUMEL / 1e-3 / 1e9)


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
