"""Small scenarios on the local CPU that several test modules share."""
from paths import SCENARIOS

from predictors.scenario.format import load_scenario


def small_cpu_dlrm(batch: int) -> dict:
    """``small_dlrm.json`` on the local CPU (1 thread) with 1,000-row tables: the bytes
    its step writes grow with ``batch``."""
    d = load_scenario(SCENARIOS / "small_dlrm.json")
    d["training"]["batch_size"] = batch
    for t in d["model"]["nodes"][2]["params"]["tables"]:
        t["rows"] = 1000
    d["platform"] = {"preset": "local-cpu", "threads": 1}
    return d
