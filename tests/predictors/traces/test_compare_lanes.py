"""Comparing a prediction with a recording: lanes pair by kind and position, and streams
that carry collectives pair with each other."""
from predictors.engine.timeline import TimelineBuilder
from predictors.traces.compare import compare_timelines


def _timeline(streams):
    tb = TimelineBuilder()
    cpu = tb.lane(0, "cpu", "CPU main thread")
    tb.add(cpu, 0.0, 100.0, "cpu_op", "aten::mm")
    for name, category, dur in streams:
        lane = tb.lane(0, "stream", name)
        tb.add(lane, 10.0, dur, category, "k")
    tl = tb.build()
    return tl


def test_communication_streams_pair_with_each_other():
    pred = _timeline([("stream 0 (compute)", "gemm", 50.0),
                      ("stream 1 (communication)", "communication", 20.0)])
    rec = _timeline([("stream 7", "gemm", 60.0), ("stream 20", "memcpy", 5.0),
                     ("stream 84", "communication", 30.0)])
    rows = {r["key"]: r for r in compare_timelines(pred, rec).rows if r["group"] == "lane"}
    assert rows["stream 1 (communication) ↔ stream 84"]["recorded_ms"] == 0.03
    assert "stream 0 (compute) ↔ stream 7" in rows
    assert rows["stream 20"]["predicted_ms"] == 0.0  # nothing predicted on a copy stream


def _with_memory(name, times, values, step=None):
    from predictors.engine.timeline import Span

    tb = TimelineBuilder()
    tb.add(tb.lane(0, "cpu", "CPU main thread"), 0.0, 100.0, "cpu_op", "aten::mm")
    tb.add(tb.lane(0, "stream", "stream 0"), 10.0, 50.0, "gemm", "k")
    tb.counter(0, name, times, values)
    tl = tb.build()
    if step is not None:
        tl.steps = [Span(0, "ProfilerStep#0", *step)]
    return tl


def test_memory_is_compared_over_the_recorded_step():
    pred = _with_memory("memory allocated", [0.0, 40.0], [4e9, 5e9])
    # the recorded step runs 0-100 us; the allocator's absolute total (CUDA)
    rec = _with_memory("memory allocated", [-50.0, 20.0, 70.0, 500.0],
                       [3.9e9, 4.1e9, 5.2e9, 9e9], step=(0.0, 100.0))
    m = compare_timelines(pred, rec).memory
    assert m["predicted_peak_bytes"] == 5e9 and m["predicted_swing_bytes"] == 1e9
    assert m["recorded_peak_bytes"] == 5.2e9   # the step's, not the trace's 9 GB later
    assert m["recorded_swing_bytes"] == 5.2e9 - 3.9e9   # its value at the step's start
    relative = _with_memory("memory allocated (relative)", [20.0], [1e9], step=(0.0, 100.0))
    assert "recorded_peak_bytes" not in compare_timelines(pred, relative).memory
    assert compare_timelines(pred, _timeline([("stream 7", "gemm", 60.0)])).memory is None
