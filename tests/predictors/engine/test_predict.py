import json

import numpy as np
import pytest
from paths import SCENARIOS

from predictors.engine.predict import predict
from predictors.engine.timeline import CATEGORIES
from predictors.scenario.format import ScenarioError, load_scenario
from predictors.utils.progress import Cancelled


@pytest.fixture(scope="module")
def dlrm_gpu():
    return predict(load_scenario(SCENARIOS / "small_dlrm.json"))


def test_prediction_contract(dlrm_gpu):
    out = dlrm_gpu.to_json()
    json.dumps(out)
    assert out["iteration_ms"] > 0 and out["num_ops"] > 100
    (rank,) = out["per_rank"]
    assert rank["rank"] == 0 and 0 < rank["device_active_ms"] <= rank["iteration_ms"]
    assert rank["device_idle_ms"] == pytest.approx(rank["iteration_ms"]
                                                   - rank["device_active_ms"])
    assert out["iteration_ms"] == max(r["iteration_ms"] for r in out["per_rank"])


def test_gpu_timeline_lanes_and_kernels(dlrm_gpu):
    tl = dlrm_gpu.timeline
    kinds = {(l.kind, l.name) for l in tl.lanes}
    assert ("cpu", "CPU main thread") in kinds and ("cpu", "CPU autograd thread") in kinds
    stream = tl.lanes_of(0, "stream")
    assert len(stream) == 1
    on_stream = tl.lane == stream[0]
    starts = tl.start_us[on_stream]
    ends = starts + tl.dur_us[on_stream]
    assert np.all(starts[1:] >= ends[:-1] - 1e-6), "kernels on one stream overlap"
    cats = {CATEGORIES[c] for c in tl.category[on_stream]}
    assert {"gemm", "embedding", "elementwise"} <= cats
    assert tl.meta["kernels"] == int(on_stream.sum())


def test_kernels_start_after_their_launch(dlrm_gpu):
    tl = dlrm_gpu.timeline
    cpu = np.isin(tl.lane, tl.lanes_of(0, "cpu")) & (tl.category == CATEGORIES.index("cpu_op"))
    stream = tl.lane == tl.lanes_of(0, "stream")[0]
    # the n-th launching op and the n-th kernel belong together
    assert cpu.sum() == stream.sum()
    assert np.all(tl.start_us[stream] >= tl.start_us[cpu])


def test_cpu_platform_runs_kernels_inline():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    result = predict(doc)
    assert result.timeline.lanes_of(0, "stream") == []
    assert result.device.endswith("(1 thread)")
    # more threads: more FLOP/s and bandwidth, never slower
    doc["platform"]["threads"] = 2
    assert predict(doc).iteration_ms <= result.iteration_ms


def test_faster_gpu_predicts_faster():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    times = {}
    for preset in ("v100-1", "a100-1", "h100-1"):
        doc["platform"] = {"preset": preset}
        times[preset] = predict(doc).iteration_ms
    assert times["v100-1"] > times["a100-1"] > times["h100-1"]


def test_batch_size_scales_dense_work():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    small = predict(doc).per_rank[0]["device_active_ms"]
    doc["training"]["batch_size"] *= 4
    large = predict(doc).per_rank[0]["device_active_ms"]
    assert 3.0 < large / small < 4.5


def test_progress_and_cancel():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    stages = []
    predict(doc, progress=lambda f, s: stages.append((f, s)))
    fractions = [f for f, _ in stages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    calls = []

    def cancel_at_third():
        calls.append(1)
        return len(calls) >= 3

    with pytest.raises(Cancelled):
        predict(doc, cancelled=cancel_at_third)


def test_invalid_scenario_raises_scenario_error():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["model"]["nodes"][1]["params"]["layers"] = [0]
    with pytest.raises(ScenarioError, match=r"model.nodes\[1\].params.layers\[0\]"):
        predict(doc)


def test_chrome_trace_export_opens_as_trace_events(tmp_path, dlrm_gpu):
    path = tmp_path / "trace.json"
    dlrm_gpu.timeline.save_chrome_trace(path)
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(dlrm_gpu.timeline)
    assert all(e["dur"] >= 0 and "ts" in e and "pid" in e and "tid" in e for e in spans)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "stream 0 (compute)" in names
    gz = tmp_path / "trace.json.gz"
    dlrm_gpu.timeline.save_chrome_trace(gz)
    import gzip
    assert json.loads(gzip.decompress(gz.read_bytes()))["traceEvents"] == events


def test_tables_larger_than_the_platform_are_refused_before_building():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["model"]["nodes"][2]["params"]["tables"][1]["rows"] = 10 ** 11  # 6.4 TB at dim 16
    with pytest.raises(ScenarioError) as info:
        predict(doc)  # a100-1: one 40-GB GPU
    issue = info.value.issues[0]
    assert issue.field == "model.nodes[2].params.tables[1]"
    assert "more than the 40 GB of a100-1" in issue.message
    doc["platform"] = {"preset": "dgx-a100"}  # 8 x 40 GB: still short of 6.4 TB
    with pytest.raises(ScenarioError, match="320 GB of dgx-a100"):
        predict(doc)


def test_sizes_torch_cannot_hold_are_a_scenario_error():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    table = doc["model"]["nodes"][2]["params"]["tables"][0]
    table["pooling"] = 10 ** 12  # batch x pooling indices overflow int64 sizes
    doc["training"]["batch_size"] = 10 ** 12
    with pytest.raises(ScenarioError, match="torch cannot build this model"):
        predict(doc)


@pytest.mark.parametrize("preset", [None, "local-cpu", "dgx-a100"])
def test_the_critical_path_ends_the_step_and_runs_back_in_time(preset):
    """The prediction marks the bars that set its step: the last one ends the iteration,
    and each bar on the path starts no later than the one after it."""
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    if preset:
        doc["platform"] = {"preset": preset}
    result = predict(doc)
    tl = result.timeline
    path = tl.meta["critical_path"]
    assert len(path) > 10
    ends = tl.start_us[path] + tl.dur_us[path]
    assert ends.max() / 1e3 == pytest.approx(
        max(r["iteration_ms"] for r in result.per_rank) + tl.start_us.min() / 1e3)
    order = np.argsort(ends, kind="stable")
    assert (np.diff(tl.start_us[path][order]) >= -1e-6).all()
