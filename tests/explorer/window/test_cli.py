"""``python -m explorer`` in batch mode, as a user runs it (a subprocess, no display)."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def run_cli(*args, timeout=300, env=None):
    env = {k: v for k, v in (env or os.environ).items()
           if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "explorer", *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def null_is_a_device() -> bool:
    return stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_screenshot_and_svg_export_of_the_default_scenario(tmp_path):
    """The batch run writes its two files and nothing else: not /dev/null (QSettings once
    renamed a file over it), not the user's settings, and it leaves no temporary folder."""
    assert null_is_a_device()
    home, tmp, out = tmp_path / "home", tmp_path / "tmp", tmp_path / "out"
    for d in (home, tmp, out):
        d.mkdir()
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".local"), XDG_CACHE_HOME=str(home / ".cache"),
               TMPDIR=str(tmp))
    shot, svg = out / "main.png", out / "timeline.svg"
    r = run_cli("--screenshot", shot, "--export-timeline", svg, env=env)
    assert r.returncode == 0, r.stderr
    assert null_is_a_device(), "the batch run replaced /dev/null"
    assert sorted(p.name for p in out.iterdir()) == ["main.png", "timeline.svg"]
    settings = [p for p in home.rglob("*") if "explorer" in p.name.lower()]
    ours = [p for p in tmp.iterdir() if p.name.startswith("ml-dse")]
    assert not settings and not ours, (settings, ours)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert any(e.tag.endswith(("rect", "path")) for e in root.iter())


@pytest.mark.slow   # another app process; the batch path runs in the screenshot test
@pytest.mark.parametrize("ext", ["png", "pdf"])
def test_export_timeline_of_a_given_scenario(tmp_path, ext):
    out = tmp_path / f"dlrm.{ext}"
    r = run_cli(ROOT / "resources" / "scenarios" / "small_dlrm.json", "--export-timeline", out)
    assert r.returncode == 0, r.stderr
    magic = {"png": b"\x89PNG", "pdf": b"%PDF"}[ext]
    assert out.read_bytes().startswith(magic)


def test_bad_scenario_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    doc = json.loads((ROOT / "resources" / "scenarios" / "small_dlrm.json").read_text())
    doc["training"]["batch_size"] = "many"
    bad.write_text(json.dumps(doc))
    r = run_cli(bad, "--export-timeline", tmp_path / "x.png")
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "training.batch_size" in lines[0]
    assert not (tmp_path / "x.png").exists()
    r = run_cli(tmp_path / "missing.json", "--screenshot", tmp_path / "x.png")
    assert r.returncode == 2 and "missing.json" in r.stderr
    r = run_cli("--export-timeline", tmp_path / "x.bmp")
    assert r.returncode == 2 and "unsupported" in r.stderr


@pytest.mark.parametrize("flag", ["--screenshot",
                                  pytest.param("--export-timeline", marks=pytest.mark.slow)])
def test_a_target_that_is_not_a_regular_file_is_refused(tmp_path, flag):
    folder = tmp_path / "pictures.png"
    folder.mkdir()
    for target, kind in ((os.devnull, "character device"), (folder, "folder")):
        r = run_cli(flag, target)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 2 and len(lines) == 1 and kind in lines[0], r.stderr
    assert null_is_a_device() and folder.is_dir() and not list(folder.iterdir())


def test_main_in_process_with_a_fake_predictor(qapp, tmp_path):
    from explorer.__main__ import main
    from explorer.timeline.sample import synthetic_timeline
    from predictors.engine.predict import Prediction

    def fake(scenario, progress=None, cancelled=None):
        tl = synthetic_timeline(ranks=2)
        return Prediction("fake", "fake", "cpu", tl, tl.span_ms(), [], len(tl), [], [], 0.0)

    out = tmp_path / "t.svg"
    assert main(["--export-timeline", str(out)], predict_fn=fake) == 0
    assert out.read_text().lstrip().startswith("<?xml")

    def broken(scenario, progress=None, cancelled=None):
        raise RuntimeError("no kernel model for aten::frobnicate")

    assert main(["--export-timeline", str(tmp_path / "u.png")], predict_fn=broken) == 1
    assert not (tmp_path / "u.png").exists()


def test_the_entry_script_runs_as_a_plain_script(tmp_path):
    """A frozen app (explorer.spec) runs explorer/__main__.py as a script, with no parent
    package: it must not use relative imports."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # run as the bundle does: the file's code as __main__, outside its package
    code = ("import runpy, sys; script = sys.argv.pop(1); sys.argv[0] = script; "
            "runpy.run_path(script, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "explorer" / "__main__.py"),
                        str(tmp_path / "missing.json"), "--screenshot", str(tmp_path / "x.png")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "missing.json" in r.stderr, r.stderr
    assert "ImportError" not in r.stderr
