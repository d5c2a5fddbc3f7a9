import glob
import json
import os
import stat
import subprocess
import sys

import pytest
from paths import ROOT, SCENARIOS

from predictors.cli.commands import build_parser, main


def run(*args):
    return subprocess.run([sys.executable, "-m", "predictors", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


def test_predict_json_contract(tmp_path):
    trace = tmp_path / "t.json"
    out = run("predict", str(SCENARIOS / "small_dlrm.json"), "--json", "--chrome-trace",
              str(trace))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # the same figures as the library's prediction of the same file
    from predictors.engine.predict import predict
    from predictors.scenario.format import load_scenario
    direct = predict(load_scenario(SCENARIOS / "small_dlrm.json"))
    assert data["iteration_ms"] == pytest.approx(direct.iteration_ms)
    assert data["num_ops"] == direct.num_ops
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


@pytest.mark.slow   # a subprocess of the CLI; `make test-full`
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

    from predictors.calibrate import validate
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
    assert main(["validate", "--profile", str(prof), "--n", "1", "--record"]) == 2


def _json(capsys, argv):
    """Run ``argv`` in-process; its exit status and its stdout as JSON."""
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_platform_takes_a_preset_a_scenario_or_a_platform_file(tmp_path, capsys):
    """``--platform`` is the same everywhere: a preset, a scenario file (its platform), or a
    JSON file with a platform section (bare, or under a ``platform`` key)."""
    small = str(SCENARIOS / "small_dlrm.json")          # one A100
    on_dgx = str(SCENARIOS / "mlperf_dlrm_dcnv2.json")  # dgx-a100
    two_gpus = tmp_path / "two.json"
    two_gpus.write_text(json.dumps({"platform": {
        "nodes": [{"id": "g0", "kind": "gpu", "params": {"model": "h100"}},
                  {"id": "g1", "kind": "gpu", "params": {"model": "h100"}}],
        "edges": [{"source": "g0", "target": "g1", "kind": "nvlink4"}]}}))
    h200 = tmp_path / "h200.json"
    h200.write_text(json.dumps({"preset": "h200-1"}))

    pred = _json(capsys, ["predict", small, "--platform", on_dgx, "--json"])
    assert pred["platform"] == "dgx-a100" and len(pred["per_rank"]) == 8
    fit = _json(capsys, ["fit", small, "--platform", str(h200), "--json"])
    assert fit["platform"] == "h200-1" and fit["batch_size"] > 512
    ranking = _json(capsys, ["rank-sharding", small, "--platform", str(two_gpus), "--top", "1", "--budget-s", "1",
                             "--json"])
    assert ranking["ranks"] == 2 and len(ranking["plans"]) == 1
    swept = _json(capsys, ["sweep", small, "--platform", on_dgx, "--param", "batch_size",
                           "--values", "1024", "--json"])
    assert swept["rows"][0]["ranks"] == 8 and not swept["rows"][0]["error"]
    swept = _json(capsys, ["sweep", small, "--platform", "h100-1", "--param", "batch_size",
                           "--values", "1024", "--json"])
    assert swept["rows"][0]["ranks"] == 1


def test_rank_starts_make_a_straggler_and_bad_ones_are_user_errors(capsys):
    small = str(SCENARIOS / "small_dlrm.json")
    assert main(["predict", small, "--platform", "dgx-a100", "--json",
                 "--rank-starts-ms", "0,0,0,0,0,0,0,2.5"]) == 0
    late = json.loads(capsys.readouterr().out)
    assert main(["predict", small, "--platform", "dgx-a100", "--json"]) == 0
    together = json.loads(capsys.readouterr().out)
    assert late["iteration_ms"] > together["iteration_ms"] + 1.0
    for bad, says in (("0,1", "expected 8 start times"), ("0,x", "expected numbers"),
                      ("0,0,0,0,0,0,0,-1", "expected 8 start times")):
        assert main(["predict", small, "--platform", "dgx-a100", "--rank-starts-ms", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --rank-starts-ms") and says in err


def test_platform_errors_are_user_errors(tmp_path, capsys):
    small = str(SCENARIOS / "small_dlrm.json")
    for command in (["predict", small], ["fit", small], ["rank-sharding", small],
                    ["sweep", small, "--param", "dtype", "--values", "float32"],
                    ["collective", "--op", "all_reduce", "--bytes", "1M"]):
        assert main([*command, "--platform", "no-such-box"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --platform: 'no-such-box': no preset and no file")
        assert err.count("\n") == 1
    broken = tmp_path / "broken.json"
    broken.write_text('{"preset": ')
    assert main(["predict", small, "--platform", str(broken)]) == 2
    assert f"--platform: {broken}: not a readable JSON file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nodes": [{"id": "g", "kind": "gpu"}],
                               "edges": [{"source": "g", "target": "x", "kind": "nvlink3"}]}))
    assert main(["fit", small, "--platform", str(bad)]) == 2
    assert f"{bad}: platform.edges[0].target" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--platform", "dgx-a100"], ["--profile", "nvidia-h200"]])
def test_sweeping_platforms_takes_no_platform_or_profile(capsys, flag):
    assert main(["sweep", str(SCENARIOS / "small_dlrm.json"), "--param", "platform",
                 "--values", "a100-1,h100-1", *flag]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag[0]} with --param platform") and err.count("\n") == 1


def test_validate_record_user_errors_exit_2(tmp_path, monkeypatch, capsys):
    """A profile with no file to record in, or of the wrong kind, is a user error found
    before anything is measured."""
    from predictors import profiles
    from predictors.calibrate import validate

    def never(*a, **k):
        raise AssertionError("measured despite a bad command line")

    monkeypatch.setattr(validate, "validate_cpu", never)
    import predictors.cli.commands as commands

    for module in (profiles, commands):
        monkeypatch.setattr(module, "profile_file", lambda prof: None)
    assert main(["validate", "--profile", "local-cpu-1t", "--record"]) == 2
    assert "--record: the profile" in capsys.readouterr().err
    assert main(["validate", "--profile", "nvidia-h200"]) == 2
    assert "describes a GPU" in capsys.readouterr().err
    assert main(["validate", "--measurements", str(tmp_path)]) == 2
    assert "--measurements: GPU validations only" in capsys.readouterr().err


def test_other_bad_flag_combinations_exit_2(tmp_path, capsys):
    assert main(["calibrate", "--out", str(tmp_path / "p.json"), "--budget-s", "1",
                 "--gemms-from", str(tmp_path)]) == 2
    assert "--gemms-from" in capsys.readouterr().err
    assert main(["calibrate", "--out", str(tmp_path / "p.json"), "--from-measurements",
                 str(tmp_path / "nope")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["fit", str(SCENARIOS / "bert_base.json"), "--multiple", str(2**40)]) == 2
    assert "--multiple" in capsys.readouterr().err
    for argv in (["calibrate", "--out", "p.json", "--budget-s", "0"],
                 ["collective", "--platform", "dgx-a100", "--op", "all_reduce",
                  "--bytes", "inf"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


@pytest.mark.slow   # a subprocess per entry point; `make test-full`
def test_program_name_follows_the_entry_point(monkeypatch, capsys):
    for argv0, prog in (("/opt/venv/bin/ml-dse", "ml-dse"),
                        (str(ROOT / "predictors" / "__main__.py"), "python -m predictors")):
        monkeypatch.setattr(sys, "argv", [argv0, "predict", "--help"])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: {prog} predict ")
    out = run("--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m predictors ")
    script = os.path.join(os.path.dirname(sys.executable), "ml-dse")
    if os.path.exists(script):  # installed in this environment
        out = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120,
                             check=False)
        assert out.returncode == 0 and out.stdout.startswith("usage: ml-dse "), out.stdout


def _subparsers(parser):
    """``(prog, parser)`` of every sub-command, nested ones included."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub.prog, sub
                yield from _subparsers(sub)


def test_every_command_shows_examples_with_real_files():
    parser = build_parser("ml-dse")
    commands = dict(_subparsers(parser))
    assert {"ml-dse predict", "ml-dse sweep", "ml-dse collective", "ml-dse validate",
            "ml-dse kernels", "ml-dse kernels predict",
            "ml-dse kernels validate-traces"} <= commands.keys()
    for name, sub in [("ml-dse", parser), *commands.items()]:
        text = sub.format_help()
        assert "\nexamples:\n" in text, name
        lines = [ln.strip() for ln in text.split("\nexamples:\n", 1)[1].splitlines()]
        assert 1 <= len(lines) <= 3, name
        for line in lines:
            assert line.startswith(("ml-dse ", "printf ")), line
            for word in line.split():
                if word.startswith(("resources/", "sample_traces/")):
                    assert glob.glob(str(ROOT / word)), f"{name}: {word} does not exist"
