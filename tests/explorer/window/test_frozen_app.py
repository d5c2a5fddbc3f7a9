"""The PyInstaller app: ``explorer.spec`` builds it, and the frozen binary starts, prints
its usage and renders a screenshot.  The build is slow (minutes, a large folder): it runs
with ``make test-full``, and is skipped where PyInstaller is not installed."""
import importlib.util
import os
import subprocess
import sys

import pytest
from paths import ROOT


def test_the_launcher_runs_the_app_as_a_package(tmp_path):
    """The entry script imports the explorer as a package (the spec's entry is not a
    module of the package, whose relative imports would fail when frozen)."""
    spec = (ROOT / "explorer.spec").read_text()
    assert "run_explorer.py" in spec and "explorer/__main__.py" not in spec
    out = subprocess.run([sys.executable, str(ROOT / "run_explorer.py"), "--help"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "--screenshot" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("PyInstaller") is None,
                    reason="PyInstaller is not installed (pip install -e '.[build]')")
def test_the_frozen_app_starts_and_renders_a_screenshot(tmp_path):
    dist, work = tmp_path / "dist", tmp_path / "build"
    build = subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm",
                            "--distpath", str(dist), "--workpath", str(work),
                            str(ROOT / "explorer.spec")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, build.stderr[-4000:]
    app = dist / "ml-dse-explorer" / "ml-dse-explorer"
    assert app.is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    usage = subprocess.run([str(app), "--help"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, env=env)
    assert usage.returncode == 0, usage.stderr[-4000:]
    assert "--screenshot" in usage.stdout
    shot = tmp_path / "shot.png"
    run = subprocess.run([str(app), "--screenshot", str(shot), "--timeout", "600"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    assert shot.stat().st_size > 20_000
    size = sum(f.stat().st_size for f in (dist / "ml-dse-explorer").rglob("*") if f.is_file())
    print(f"frozen app: {size / 1e9:.2f} GB in {dist / 'ml-dse-explorer'}")
