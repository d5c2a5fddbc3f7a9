import json
import subprocess
import sys

from paths import ROOT, SCENARIOS
from predictors.cli import main


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
