import json
import os
import stat
import subprocess
import sys

from paths import ROOT, SCENARIOS

from predictors.cli.commands import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "predictors", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_predict_json_contract(tmp_path):
    trace = tmp_path / "t.json"
    out = run("predict", str(SCENARIOS / "small_dlrm.json"), "--json", "--chrome-trace",
              str(trace))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["iteration_ms"] > 0 and data["num_ops"] > 0
    assert data["per_rank"][0].keys() >= {"rank", "iteration_ms", "device_active_ms"}
    assert json.loads(trace.read_text())["traceEvents"]


def test_bad_scenario_gives_one_line_error_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    doc = json.loads((SCENARIOS / "small_dlrm.json").read_text())
    doc["model"]["nodes"][0]["kind"] = "dense_inputt"
    bad.write_text(json.dumps(doc))
    out = run("predict", str(bad), "--json")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "model.nodes[0].kind" in out.stderr


def test_human_readable_output():
    out = run("predict", str(SCENARIOS / "bert_base.json"), "--platform", "h100-1")
    assert out.returncode == 0, out.stderr
    assert "iteration" in out.stdout and "h100-1" in out.stdout


def test_calibrate_refuses_an_unwritable_out_before_measuring(tmp_path, capsys):
    """A bad --out is reported at once, not after minutes of calibration."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["calibrate", "--device", "cpu", "--out", str(blocker / "p.json"),
                 "--budget-s", "600"]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["calibrate", "--device", "cpu", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["calibrate", "--device", "cpu", "--out", os.devnull]) == 2
    assert "character device" in capsys.readouterr().err


def test_outputs_that_are_not_regular_files_are_refused(tmp_path, capsys):
    """measure's trace and predict's Chrome trace never replace a device."""
    small = str(SCENARIOS / "small_dlrm.json")
    assert main(["measure", small, "--iters", "1", "--warmup", "0", "--trace", os.devnull]) == 2
    assert "character device" in capsys.readouterr().err
    out = run("predict", small, "--chrome-trace", os.devnull)
    assert out.returncode != 0 and "character device" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_validate_record_stores_the_figures_in_the_profile(tmp_path, monkeypatch, capsys):
    """``validate --record``: the end-to-end figures land in the profile file (atomic, the
    models untouched) and load back; a file that is not a profile is an error, not a
    crash."""
    import shutil

    from paths import ROOT as root

    import predictors.calibrate.validate as validate
    from predictors.profiles import load_profile

    src = root / "resources" / "profiles" / "cpu" / "local-cpu-1t.json"
    prof = tmp_path / "p.json"
    shutil.copy(src, prof)
    shutil.copy(src.with_suffix(".npz"), tmp_path / src.with_suffix(".npz").name)
    row = {"kind": "dlrm", "scenario": "s", "measured_ms": 10.0, "predicted_ms": 11.0,
           "error": 0.1, "noise": 0.05, "other_cpus": 0.0, "speed": -0.02, "runs_ms": [10, 10.5]}
    canned = {"rows": [row], "profile": "p", "threads": 1, "kernel_classes": {},
              "summary": {"dlrm": {"n": 1, "geomean_abs_error": 0.1, "mean_abs_error": 0.1,
                                   "worst_abs_error": 0.1, "noise_geomean": 0.05,
                                   "noise_worst": 0.05, "abs_speed_geomean": 0.02}}}
    monkeypatch.setattr(validate, "validate_cpu", lambda *a, **k: canned)
    assert main(["validate", "--profile", str(prof), "--n", "1", "--record"]) == 0
    rec = load_profile(prof).validation["end_to_end"]
    assert rec["summary"]["dlrm"]["geomean_abs_error"] == 0.1 and rec["rows"][0]["scenario"] == "s"
    assert "gemm" in load_profile(prof).kernel_models and "validate" in rec["command"]
    prof.write_text("{}")
    assert main(["validate", "--profile", str(prof), "--n", "1", "--record"]) != 0
