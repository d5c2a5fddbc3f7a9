import gzip
import json

from predictors.measure import measure
from predictors.scenario import load_scenario

from paths import SCENARIOS


def tiny_dlrm():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    doc["training"]["batch_size"] = 16
    for t in doc["model"]["nodes"][2]["params"]["tables"]:
        t["rows"] = 500
    return doc


def test_measure_times_real_steps_and_records_a_kineto_trace(tmp_path):
    trace = tmp_path / "step.json.gz"
    out = measure(tiny_dlrm(), iters=3, warmup=1, trace=trace)
    assert out["iterations"] == 3 and len(out["samples_ms"]) == 3
    assert out["min_ms"] <= out["iteration_ms"] <= max(out["samples_ms"])
    assert out["threads"] == 1
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = [e for e in events if e.get("name") == "ProfilerStep#0"]
    assert len(steps) == 1
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::_embedding_bag" and "Input Dims" in e["args"] for e in ops)


def test_memory_peak_with_or_without_memory_events_in_the_trace(tmp_path):
    with_events, without = tmp_path / "with.json.gz", tmp_path / "without.json.gz"
    a = measure(tiny_dlrm(), iters=1, warmup=1, trace=with_events, memory=True)
    b = measure(tiny_dlrm(), iters=1, warmup=1, trace=without, memory=True,
                trace_memory=False)   # as calibrate --device cuda records its steps
    assert a["peak_memory_bytes"] == b["peak_memory_bytes"] > 0
    count = lambda p: sum(e.get("name") == "[memory]"
                          for e in json.loads(gzip.decompress(p.read_bytes()))["traceEvents"])
    assert count(with_events) > 0 and count(without) == 0
