"""The predictor core must load without Qt, pyqtgraph or the GUI package."""
import pkgutil
import subprocess
import sys

from paths import ROOT

import predictors


def test_predictors_imports_no_gui():
    modules = [m.name for m in pkgutil.walk_packages(predictors.__path__, "predictors.")
               if m.name != "predictors.__main__"]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'pyqtgraph', 'explorer', 'shiboken6', 'superqt', 'qtpy'))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(modules) >= 10
    assert out.stdout.strip() == "", f"predictors pulled in: {out.stdout}"
