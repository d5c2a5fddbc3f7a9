"""Paths the tests share."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "resources" / "scenarios"
SHARED_DATA = ROOT.parent / "shared" / "data"
