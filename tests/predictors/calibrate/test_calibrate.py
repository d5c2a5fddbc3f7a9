"""A quick calibration (<= 60 s), its round trip, and a small end-to-end validation."""
import json

import numpy as np
import pytest

from predictors.calibrate.calibrate import calibrate_cpu
from predictors.calibrate.validate import format_report, validate_cpu
from predictors.costs.op_features import unique_fraction
from predictors.engine.predict import predict
from predictors.profiles import host_ratios, load_profile, save_profile


@pytest.fixture(scope="module")
def quick_profile(tmp_path_factory):
    stages = []
    prof = calibrate_cpu(threads=1, budget_s=40, seed=0,
                         progress=lambda f, s: stages.append((f, s)))
    assert stages and all(0 <= f < 1 for f, _ in stages)
    path = tmp_path_factory.mktemp("profile") / "quick.json"
    save_profile(prof, path)
    return prof, path


@pytest.mark.slow
def test_quick_calibration_fits_every_class_and_round_trips(quick_profile):
    prof, path = quick_profile
    assert prof.kind == "measured"
    assert {"gemm", "elementwise", "embedding_fwd"} <= set(prof.kernel_models)
    assert prof.provenance["elapsed_s"] < 60
    for key in ("host", "cpu_model", "threads", "torch", "date"):
        assert prof.provenance[key]
    speed = prof.provenance["speed_reference"]  # one probe per profiled scenario at least
    assert speed["probes"] >= prof.provenance["profiled_steps"]
    assert 1 < speed["gemm_gflops"] < 500  # one thread: below one core's fp32 peak
    # the host check's figures, so that another host can scale the profile's dispatch
    check = prof.provenance["host_check"]
    assert 0 < check["dispatch_us"] < 100
    assert host_ratios(prof, check) == {"gemm": 1.0, "memory": 1.0, "dispatch": 1.0}
    loaded = load_profile(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "ml-dse/device-profile" and doc["arrays"].endswith(".npz")
    nodes = [{"name": "aten::mm", "input_shapes": [(m, 64), (64, 64)],
              "input_dtypes": ["float32"] * 2, "input_nnz": [None, None],
              "output_shapes": [(m, 64)], "output_dtypes": ["float32"],
              "output_nnz": [None]} for m in (16, 256, 1024)]
    a = prof.kernel_models["gemm"].predict_ms(nodes)
    b = loaded.kernel_models["gemm"].predict_ms(nodes)
    assert np.allclose(a, b) and 0 < a[0] < a[1] < a[2]  # more rows, more time
    assert loaded.overheads.to_json() == prof.overheads.to_json()


@pytest.mark.slow
def test_quick_calibration_measures_each_classs_noise_floor(quick_profile):
    from predictors.calibrate.validate import format_classes

    prof, path = quick_profile
    classes = prof.validation["classes"]
    gemm = classes["gemm"]["noise_floor"]
    # GEMMs come from both sources: microbenchmarks repeated, profiled steps' spread.
    # The repeat pairs' floor needs 3 pairs, which a 40 s calibration on a slow moment
    # of a 2-core machine may not reach: then it must say so (None), not make one up.
    assert gemm["samples_isolated"] > 0 and gemm["samples_in_context"] > 0
    pairs = prof.provenance["microbenchmarks_repeated"].get("gemm", 0)
    keys = ("gmae", "gmae_isolated", "gmae_in_context") if pairs >= 3 else (
        "gmae_in_context",)
    for key in keys:
        assert 0 < gemm[key] < 1, gemm
    if pairs < 3:  # the combined floor needs both parts
        assert gemm["gmae_isolated"] is None and gemm["gmae"] is None
    assert 0 < classes["elementwise"]["noise_floor"]["gmae_in_context"] < 1
    assert "gmae_isolated" in classes["gemm"][classes["gemm"]["chosen"]]
    assert load_profile(path).validation["classes"]["gemm"]["noise_floor"] == gemm
    table = "\n".join(format_classes(classes))
    assert (f"{100 * gemm['gmae']:.1f}%" if gemm["gmae"] is not None else "-") in table


@pytest.mark.slow
def test_quick_profile_predicts_real_runs_within_a_loose_bound(quick_profile):
    prof, _ = quick_profile
    result = validate_cpu(prof, n=2, seed=77, iters=5)
    report = format_report(result)
    assert "geomean |error|" in report
    for kind, s in result["summary"].items():
        # loose: a 40-second calibration on a shared CI machine fits its models on
        # ~100 samples per class from ~4 steps, and one unlucky fit can put a scenario
        # at 3x (a DLRM at +191 %, geomean 74 %, has been seen); the targets
        # are the full validation's (docs/models/calibration.md), this checks the pipeline
        assert s["geomean_abs_error"] < 1.0, report
    for row in result["rows"]:
        assert row["predicted_ms"] > 0 and row["measured_ms"] > 0
        assert -0.9 < row["speed"] < 10  # the drift against the calibration's probes
        assert len(row["runs_ms"]) == 2 and row["measured_ms"] == min(row["runs_ms"])
    assert "drift against the calibration" in report


def test_unique_fraction_matches_sampling():
    import torch

    from predictors.model.embedding_blocks import bag_input as _bag_input

    gen = torch.Generator().manual_seed(0)
    for dist in ({"kind": "uniform"}, {"kind": "zipf", "alpha": 1.05},
                 {"kind": "zipf", "alpha": 0.8}):
        idx, _ = _bag_input({"rows": 50_000, "pooling": 20, "distribution": dist}, 500,
                            "cpu", gen)
        empirical = len(torch.unique(idx)) / len(idx)
        assert abs(unique_fraction(50_000, len(idx), dist) - empirical) < 0.05


@pytest.mark.slow
def test_predict_uses_a_given_profile(quick_profile):
    from paths import SCENARIOS

    from predictors.scenario.format import load_scenario

    _, path = quick_profile
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    out = predict(doc, profile=str(path))
    assert out.profile.startswith("local CPU")
    assert any(n.startswith("profile: local CPU") for n in out.notes)
    roof = predict(doc, profile="roofline")
    assert roof.profile == "roofline" and roof.iteration_ms != out.iteration_ms


def test_malformed_profiles_raise_profile_error(tmp_path):
    from paths import ROOT

    from predictors.profiles import ProfileError

    path = ROOT / "resources" / "profiles" / "cpu" / "local-cpu-1t-zen4.json"
    cases = {"list.json": "[1]", "types.json": json.dumps(
        {"format": "ml-dse/device-profile", "version": 1, "name": "x", "kind": "measured",
         "device": 5, "kernel_models": 5})}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ProfileError, match=name):
            load_profile(tmp_path / name)
    copy = tmp_path / "moved.json"
    copy.write_text(path.read_text())  # its .npz stayed behind
    with pytest.raises(ProfileError, match=r"moved.json: cannot read .*\.npz"):
        load_profile(copy)
