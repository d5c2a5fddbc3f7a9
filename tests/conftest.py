"""Qt runs offscreen in every test; helper modules in tests/ are importable."""
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HERE = Path(__file__).parent
for folder in (HERE, HERE / "predictors"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
