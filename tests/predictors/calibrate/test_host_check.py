"""The host check: taken once, cached per host, and what scales a bundled CPU profile."""
import json

import numpy as np
import pytest
from paths import SCENARIOS

import predictors.hardware.specs as specs
from predictors import profiles
from predictors.calibrate import host_check as hc
from predictors.cli.commands import main
from predictors.engine.predict import predict
from predictors.profiles import (
    DeviceProfile,
    OpOverheads,
    OverheadTable,
    default_profile,
    host_ratios,
    on_this_host,
    read_host_check,
    scaled_to_host,
    write_host_check,
)
from predictors.scenario.format import load_scenario

ZEN4 = "AuthenticAMD family 25 model 17, avx512"
INTEL = "GenuineIntel family 6 model 143, avx512"


@pytest.fixture(autouse=True)
def own_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ML_DSE_CACHE", str(tmp_path / "cache"))
    profiles._SCALED.clear()


def pretend_host(monkeypatch, signature: str) -> None:
    fake = lambda: signature  # noqa: E731
    for module in (specs, profiles):
        monkeypatch.setattr(module, "cpu_signature", fake)


class Fixed:
    """A kernel model that prices every op of its class at ``ms``."""

    def __init__(self, op_class, ms):
        self.op_class, self.ms, self.metrics = op_class, ms, {"top_flops_per_s": 1e11}

    def predict_ms(self, nodes):
        return np.full(len(nodes), self.ms)


def synthetic(provenance: dict) -> DeviceProfile:
    spec = specs.local_cpu_spec(1)
    table = OverheadTable(OpOverheads(10e-6, 1e-6, 0, 0, 0, 5, t1_per_byte=1e-12),
                          {"aten::mm": OpOverheads(20e-6, 0, 0, 0, 0, 3)},
                          autograd_t1=4e-6, step_s=300e-6, step_s_per_update=6e-6)
    return DeviceProfile("zen", "measured", spec, table, {},
                         {"gemm": Fixed("gemm", 2.0), "elementwise": Fixed("elementwise", 3.0),
                          "embedding_fwd": Fixed("embedding_fwd", 5.0)},
                         provenance)


REFERENCE = {"speed_reference": {"gemm_gflops": 100.0, "stream_gbps": 40.0},
             "host_check": {"dispatch_us": 1.25}, "cpu_signature": ZEN4}
# this host: GEMMs twice as fast, streams at half the rate, dispatch 1.25x as fast
HERE = {"gemm_gflops": 200.0, "stream_gbps": 20.0, "dispatch_us": 1.0}


def test_scaling_divides_each_part_by_its_speed_ratio():
    prof = synthetic(dict(REFERENCE))
    scaled = scaled_to_host(prof, HERE, "2026-12-02T14:00:00+00:00")
    nodes = [{}, {}]
    assert scaled.kernel_models["gemm"].predict_ms(nodes) == pytest.approx([1.0, 1.0])
    assert scaled.kernel_models["elementwise"].predict_ms(nodes) == pytest.approx([6.0, 6.0])
    assert scaled.kernel_models["embedding_fwd"].predict_ms(nodes) == pytest.approx([10, 10])
    assert scaled.kernel_models["gemm"].metrics["top_flops_per_s"] == pytest.approx(2e11)
    o, s = prof.overheads, scaled.overheads
    assert s.default.t1 == pytest.approx(o.default.t1 / 1.25)
    assert s.default.t2 == pytest.approx(o.default.t2 / 1.25)
    assert s.default.t1_per_byte == pytest.approx(o.default.t1_per_byte / 1.25)
    assert s.per_op["aten::mm"].t1 == pytest.approx(16e-6)
    assert s.autograd_t1 == pytest.approx(3.2e-6) and s.step_s == pytest.approx(240e-6)
    assert s.step_s_per_update == pytest.approx(4.8e-6)
    assert scaled.device.peak_flops["float32"] == pytest.approx(
        2 * prof.device.peak_flops["float32"])
    assert scaled.device.mem_bw == pytest.approx(prof.device.mem_bw / 2)
    # the original is untouched, and the copy says what it did
    assert prof.kernel_models["gemm"].predict_ms(nodes) == pytest.approx([2.0, 2.0])
    assert prof.overheads.default.t1 == 10e-6 and "host_scaling" not in prof.provenance
    note = scaled.provenance["host_scaling"]["note"]
    assert "'zen' scaled to this host: GEMM x2.00, memory x0.50, dispatch x1.25" in note
    assert "host check 2026-12-02" in note
    with pytest.raises(profiles.ProfileError):
        profiles.save_profile(scaled, "unused.json")


def test_the_profiles_own_host_check_wins_over_its_speed_reference():
    prov = dict(REFERENCE, host_check={"gemm_gflops": 50.0, "stream_gbps": 40.0,
                                       "dispatch_us": 3.0})
    r = host_ratios(synthetic(prov), HERE)
    assert r["gemm"] == pytest.approx(4.0) and r["dispatch"] == pytest.approx(3.0)


def test_a_part_without_a_figure_is_left_as_it_is():
    # the profiler's cost per event is no stand-in for the dispatch figure
    prov = {"speed_reference": {"gemm_gflops": 100.0, "stream_gbps": 40.0},
            "profiler_overhead_us_per_event_microbenchmark": 0.5}
    prof = synthetic(prov)
    scaled = scaled_to_host(prof, HERE)
    assert host_ratios(prof, HERE)["dispatch"] is None
    assert scaled.overheads.default.t1 == pytest.approx(prof.overheads.default.t1)
    assert "dispatch not scaled (the profile records no figure for it)" in \
        scaled.provenance["host_scaling"]["note"]


def test_the_check_is_cached_and_taken_again_on_another_host(monkeypatch):
    calls = []

    def fake(threads):
        calls.append(threads)
        return dict(HERE)

    pretend_host(monkeypatch, INTEL)
    first = hc.host_check(1, measure=fake)
    assert hc.host_check(1, measure=fake) == first and calls == [1]   # reused
    assert read_host_check(1)["figures"]["gemm_gflops"] == 200.0
    hc.host_check(2, measure=fake)                     # another thread count: its own
    assert calls == [1, 2]
    hc.host_check(1, refresh=True, measure=fake)       # asked for
    assert calls == [1, 2, 1]
    pretend_host(monkeypatch, "GenuineIntel family 6 model 207, avx512")
    assert read_host_check(1) is None                  # not this host's any more
    hc.host_check(1, measure=fake)
    assert calls == [1, 2, 1, 1]
    assert read_host_check(1)["host"]["cpu_signature"].endswith("model 207, avx512")


def test_a_broken_cache_is_measured_again(monkeypatch):
    pretend_host(monkeypatch, INTEL)
    path = profiles.host_check_path(1)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert read_host_check(1) is None
    assert hc.host_check(1, measure=lambda t: dict(HERE))["figures"] == HERE


def test_predict_scales_the_bundled_profile_to_this_host_and_says_so(monkeypatch):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu"}
    doc["training"]["batch_size"] = 16
    pretend_host(monkeypatch, INTEL)
    plain = predict(doc)                      # no check cached: the profile as it is
    assert not any("scaled to this host" in n for n in plain.notes)
    bundled = default_profile("cpu", "cpu", 1)
    ref = bundled.provenance["speed_reference"]
    # the bundled profiles record no dispatch figure: give this one a copy that does
    monkeypatch.setitem(bundled.provenance, "host_check", {"dispatch_us": 2.0})
    write_host_check({"gemm_gflops": 2 * ref["gemm_gflops"],
                      "stream_gbps": 2 * ref["stream_gbps"], "dispatch_us": 1.0},
                     1, "2026-12-02T14:00:00+00:00")
    fast = predict(doc)
    note = next(n for n in fast.notes if "scaled to this host" in n)
    assert "GEMM x2.00, memory x2.00, dispatch x2.00 (host check 2026-12-02)" in note
    assert fast.iteration_ms == pytest.approx(plain.iteration_ms / 2, rel=0.05)
    assert any("calibrated on another CPU" in n for n in fast.notes)
    named = predict(doc, profile=bundled.name)    # a profile named is used as it is
    assert named.iteration_ms == pytest.approx(plain.iteration_ms)

    # the profile's own CPU model on another machine: scaled by that machine's check
    pretend_host(monkeypatch, ZEN4)
    assert on_this_host(bundled) is bundled       # no check of this host cached
    write_host_check({"gemm_gflops": ref["gemm_gflops"], "stream_gbps": ref["stream_gbps"] / 2,
                      "dispatch_us": 2.0}, 1, "2026-12-03T12:00:00+00:00")
    slow = predict(doc)
    note = next(n for n in slow.notes if "scaled to this host" in n)
    assert "GEMM x1.00, memory x0.50, dispatch x1.00" in note
    assert not any("another CPU" in n for n in slow.notes)
    assert plain.iteration_ms < slow.iteration_ms < 2 * plain.iteration_ms


def test_measure_host_reports_every_figure():
    f = hc.measure_host(1, rounds=1, probe_s=0.01)
    assert {"gemm_gflops", "stream_gbps", "dispatch_us"} <= set(f)
    assert f["gemm_gflops"] > 0 and f["stream_gbps"] > 0 and f["dispatch_us"] > 0


def test_the_host_check_command_compares_with_the_bundled_profiles(monkeypatch, capsys):
    pretend_host(monkeypatch, INTEL)
    monkeypatch.setattr(hc, "measure_host", lambda threads: dict(HERE))
    assert main(["host-check", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["figures"] == HERE and out["cache"].endswith("host-check-1t.json")
    names = {r["profile"] for r in out["profiles"]}
    assert out["default_profile"] in names and len(names) >= 2
    assert all("scaled to this host" in r["note"] for r in out["profiles"])


def test_validate_compares_the_same_measurements_with_other_profiles(monkeypatch):
    """``validate --compare``: each profile predicts the scenarios measured once; the
    default is the bundled profile scaled to this host."""
    from predictors.calibrate.samples import random_scenarios
    from predictors.cli.host import compare_profiles, format_comparison

    pretend_host(monkeypatch, INTEL)
    bundled = default_profile("cpu", "cpu", 1)
    ref = bundled.provenance["speed_reference"]
    write_host_check({"gemm_gflops": 2 * ref["gemm_gflops"],
                      "stream_gbps": 2 * ref["stream_gbps"], "dispatch_us": 1.0}, 1)
    doc = random_scenarios(1, 5, kinds=("dlrm",), threads=1, ranges="wide")[0]
    measured = 10.0
    result = {"threads": 1, "ranges": "wide",
              "rows": [{"kind": "dlrm", "scenario": doc["name"], "measured_ms": measured}]}
    out = compare_profiles(result, ["default", bundled.name], 1, 5, ("dlrm",))
    as_is = out[bundled.name]["rows"][0]["predicted_ms"]
    scaled = out["default"]["rows"][0]["predicted_ms"]
    assert as_is == pytest.approx(predict(doc, profile=bundled).iteration_ms)
    assert scaled < as_is and "scaled to this host" in out["default"]["host_scaling"]
    assert out[bundled.name]["host_scaling"] is None
    s = out["default"]["summary"]["dlrm"]
    assert s["worst_abs_error"] == pytest.approx(abs(scaled / measured - 1))
    assert "geomean |error|" in format_comparison(out)


def test_the_check_is_taken_once_when_a_bundled_cpu_profile_will_be_used(monkeypatch):
    pretend_host(monkeypatch, ZEN4)
    calls = []

    def fake(threads):
        calls.append(threads)
        return dict(HERE)

    assert hc.needs_host_check(1)
    assert hc.ensure_host_check(1, measure=fake) is True
    assert hc.ensure_host_check(1, measure=fake) is False and calls == [1]
    assert not hc.needs_host_check(1)
