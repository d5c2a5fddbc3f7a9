import numpy as np

from predictors.engine.timeline import TimelineBuilder


def build():
    b = TimelineBuilder("t")
    cpu = b.lane(0, "cpu", "main")
    s = b.lane(0, "stream", "stream 0")
    b.add(cpu, 0, 10, "cpu_op", "a")
    b.add(s, 5, 10, "gemm", "a", "[2, 2]")
    b.add(s, 12, 10, "gemm", "b")       # overlaps the previous one: union counts once
    b.add(s, 40, 5, "elementwise", "c")
    return b.build(kernels=3)


def test_busy_time_is_a_union_of_intervals():
    tl = build()
    assert np.isclose(tl.device_active_ms(0), (22 - 5 + 5) / 1e3)
    assert np.isclose(tl.span_ms(), 45 / 1e3)


def test_top_ops_and_lane_order():
    tl = build()
    top = tl.top_ops(2, tl.lanes_of(0, "stream"))
    assert [t["name"] for t in top] == ["a", "b"] or [t["name"] for t in top] == ["b", "a"]
    assert top[0]["total_ms"] == 0.01
    order = tl.lane_order(tl.lanes_of(0, "stream")[0])
    assert list(tl.start_us[order]) == [5, 12, 40]


def test_million_events_stay_compact():
    b = TimelineBuilder()
    lane = b.lane(0, "stream", "s")
    n = 1_000_000
    tl = b.build()  # fill the columns directly, as a trace parser does
    tl.start_us = np.arange(n, dtype=np.float64)
    tl.dur_us = np.ones(n)
    tl.lane = np.full(n, lane, np.int32)
    tl.category = np.zeros(n, np.int16)
    tl.name_id = np.zeros(n, np.int32)
    tl.detail_id = np.zeros(n, np.int32)
    tl.names, tl.details = ["k"], [""]
    nbytes = sum(a.nbytes for a in (tl.start_us, tl.dur_us, tl.lane, tl.category,
                                    tl.name_id, tl.detail_id))
    assert nbytes < 40 * n
    assert np.isclose(tl.busy_ms([lane]), n / 1e3)


def with_counter():
    b = TimelineBuilder("t")
    cpu = b.lane(0, "cpu", "main")
    b.add(cpu, 0, 50, "cpu_op", "a")
    lane = b.counter(0, "memory allocated", [0, 10, 20, 30], [100, 100, 300, 200])
    return b.build(), lane


def test_a_counter_is_a_step_function_that_travels_with_its_lane():
    tl, lane = with_counter()
    assert tl.lanes[lane].kind == "counter"
    times, values = tl.counters[lane]
    assert list(times) == [0, 20, 30] and list(values) == [100, 300, 200]   # runs merged
    assert tl.counter_at(lane, 25) == 300 and tl.counter_at(lane, 99) == 200
    assert tl.counter_at(lane, -1) is None
    assert tl.shifted(5).counter_at(lane, 26) == 300
    kept = tl.with_lanes([lane])
    assert list(kept.counters) == [0] and kept.counter_at(0, 20) == 300
    assert tl.with_lanes([0]).counters == {}
    assert tl.device_active_ms(0) == 0.05   # counters are not work


def test_counters_become_perfetto_counter_events():
    tl, lane = with_counter()
    events = [e for e in tl.to_chrome_trace()["traceEvents"] if e["ph"] == "C"]
    assert [(e["ts"], e["args"]["bytes"]) for e in events] == [(0, 100), (20, 300), (30, 200)]
    assert {e["name"] for e in events} == {"memory allocated"} and events[0]["pid"] == 0
    threads = [e for e in tl.to_chrome_trace()["traceEvents"] if e["name"] == "thread_name"]
    assert [e["args"]["name"] for e in threads] == ["main"]   # no empty thread track


def test_critical_path_events_are_flagged_in_the_chrome_trace(tmp_path):
    import json

    b = TimelineBuilder("cp")
    main = b.lane(0, "cpu", "main")
    for k in range(4):
        b.add(main, 10.0 * k, 5.0, "cpu_op", f"op{k}")
    tl = b.build(critical_path=[1, 3])
    tl.save_chrome_trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    flagged = {e["name"] for e in events if e["ph"] == "X" and e["args"].get("critical_path")}
    assert flagged == {"op1", "op3"}
    assert all(e["args"]["critical_path"] is True for e in events
               if e["ph"] == "X" and "critical_path" in e["args"])
    plain = b.build().to_chrome_trace()["traceEvents"]   # a recorded trace has no path
    assert not any("critical_path" in e.get("args", {}) for e in plain)


def test_a_lane_subset_keeps_its_critical_path_bars():
    """with_lanes renumbers the events, and the critical path's indices with them."""
    from paths import SCENARIOS

    from predictors import load_scenario, predict

    tl = predict(load_scenario(SCENARIOS / "small_dlrm.json")).timeline
    stream = tl.lanes_of(0, "stream")
    sub = tl.with_lanes(stream)
    on_stream = [i for i in tl.meta["critical_path"] if tl.lane[i] in stream]
    assert on_stream and len(sub.meta["critical_path"]) == len(on_stream)
    assert np.allclose(sub.start_us[sub.meta["critical_path"]], tl.start_us[on_stream])
