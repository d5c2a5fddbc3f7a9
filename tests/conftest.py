"""Qt runs offscreen in every test; helper modules in tests/ are importable; the core's
cache (a host check that scales bundled CPU profiles) is an empty folder of the run's own,
never the user's."""
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["ML_DSE_CACHE"] = tempfile.mkdtemp(prefix="ml-dse-cache-")

HERE = Path(__file__).parent
for folder in (HERE, HERE / "predictors"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
