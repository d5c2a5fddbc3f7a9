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


def small_transformer() -> dict:
    """``bert_base.json`` shrunk to two layers of hidden 32 (vocab 100, seq 8, batch 2)."""
    d = load_scenario(SCENARIOS / "bert_base.json")
    d["training"]["batch_size"] = 2
    nodes = d["model"]["nodes"]
    nodes[0]["params"].update(vocab=100, seq_len=8)
    nodes[1]["params"].update(hidden=32, heads=4, ffn=64, count=2)
    return d


def tiny_dlrm() -> dict:
    """``small_dlrm.json`` on the local CPU (1 thread), batch 16, 500-row tables."""
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    doc["training"]["batch_size"] = 16
    for t in doc["model"]["nodes"][2]["params"]["tables"]:
        t["rows"] = 500
    return doc
