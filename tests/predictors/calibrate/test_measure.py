import gzip
import json

import pytest
from cpu_scenarios import tiny_dlrm
from paths import SCENARIOS

from predictors.calibrate.measure import measure


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


def test_the_trace_carries_the_untraced_steps_and_a_comparison_is_judged_on_them(tmp_path):
    from predictors.engine.predict import predict
    from predictors.traces import load_recording
    from predictors.traces.compare import compare_timelines
    from predictors.traces.recording import UNPROFILED_KEY

    doc = tiny_dlrm()
    plain = tmp_path / "step.json"   # not gzipped: the same key
    out = measure(doc, iters=3, warmup=1, trace=plain)
    stored = json.loads(plain.read_text())[UNPROFILED_KEY]
    assert stored["iteration_ms"] == out["iteration_ms"] and stored["iterations"] == 3
    from predictors.hardware.specs import cpu_signature

    assert stored["cpu"] == cpu_signature()  # the host that ran it, for Compare
    rec = load_recording([plain])
    assert rec.timeline.meta["unprofiled"]["iteration_ms"] == out["iteration_ms"]
    pred = predict(doc)
    c = compare_timelines(pred.timeline, rec.timeline)
    assert c.unprofiled_ms == out["iteration_ms"] == c.reference_ms
    assert c.error_pct == pytest.approx((pred.iteration_ms / out["iteration_ms"] - 1) * 100)
    assert c.profiler_cost_pct == pytest.approx((c.recorded_ms / out["iteration_ms"] - 1) * 100)
    assert c.to_json()["unprofiled_ms"] == out["iteration_ms"]
    # a trace without the key (any other recorder's) is judged on its recorded step
    doc_ = json.loads(plain.read_text())
    del doc_[UNPROFILED_KEY]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc_))
    c2 = compare_timelines(pred.timeline, load_recording([other]).timeline)
    assert c2.unprofiled_ms is None and c2.reference_ms == c2.recorded_ms
    assert "unprofiled_ms" not in c2.to_json()


def test_the_execution_trace_of_the_traced_step_links_to_its_kineto_events(tmp_path):
    from predictors.traces.et import link_et, read_et
    from predictors.traces.kineto import read_kineto

    kineto, et = tmp_path / "step.json.gz", tmp_path / "step_et.json.gz"
    measure(tiny_dlrm(), iters=1, warmup=1, trace=kineto, et=et)
    trace, nodes = read_kineto(kineto), read_et(et)
    ops = nodes.ops()
    assert any(n.name == "aten::_embedding_bag" for n in ops)
    link = link_et(nodes, trace)
    assert link.method == "rf_id=Record function id"
    assert len(link.pairs) >= 0.95 * len(ops) > 100


def test_an_execution_trace_needs_the_kineto_trace(tmp_path, capsys):
    from predictors.cli.commands import main

    with pytest.raises(ValueError, match="trace="):
        measure(tiny_dlrm(), iters=1, warmup=0, et=tmp_path / "et.json")
    code = main(["measure", str(SCENARIOS / "small_dlrm.json"), "--et",
                 str(tmp_path / "et.json")])
    assert code == 2 and "--trace" in capsys.readouterr().err
    assert not (tmp_path / "et.json").exists()
