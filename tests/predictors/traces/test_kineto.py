"""Kineto import: every era's categories, ranks, steps, the Timeline, and bad input."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import SHARED_DATA
from synth import new_format, old_format, write

from predictors.engine.timeline import CATEGORIES
from predictors.traces import TraceError, load_recording, read_kineto
from predictors.traces import kineto as kineto_mod
from predictors.traces.kineto import Kind, parse_kineto_bytes

DATA = Path(__file__).parent / "data"
TRACES = SHARED_DATA / "traces"


def cat_ms(tl, name):
    return tl.category_ms(list(range(len(tl.lanes)))).get(name, 0.0)


def test_new_format_timeline(tmp_path):
    rec = load_recording([write(tmp_path / "t.json", new_format(step_us=(1000, 1500)))])
    tl = rec.timeline
    assert [(s.name, s.dur_us) for s in tl.steps] == [("ProfilerStep#0", 1000),
                                                      ("ProfilerStep#1", 1500)]
    kinds = {(l.kind, l.name) for l in tl.lanes}
    assert ("cpu", "thread 11 (main)") in kinds
    assert {("stream", "stream 7"), ("stream", "stream 20")} <= kinds
    assert cat_ms(tl, "gemm") == pytest.approx(0.2)
    assert cat_ms(tl, "communication") == pytest.approx(0.4)  # nccl kernels
    assert tl.meta["device"] == "NVIDIA A100"
    # The all-reduce overlaps the GEMM for 0 us: all of it is exposed.
    assert tl.exposed_comm_ms(0) == pytest.approx(0.4)
    assert tl.device_active_ms(0) == pytest.approx(0.6)


def test_old_format_2021(tmp_path):
    rec = load_recording([write(tmp_path / "worker0.pt.trace.json", old_format())])
    tr = rec.traces[0]
    assert [s[0] for s in tr.steps()] == ["ProfilerStep#5"]
    assert {tr.names[i] for i in tr.name_id[tr.kind == Kind.KERNEL]} == {
        "volta_scudnn_128x64_relu_medium_nn_v1"}
    assert rec.ops[0].launcher[tr.kind == Kind.KERNEL].min() >= 0  # linked via correlation
    assert cat_ms(rec.timeline, "gemm") == pytest.approx(0.3)  # cuDNN conv -> gemm class
    assert cat_ms(rec.timeline, "memcpy") == pytest.approx(0.01)


@pytest.mark.parametrize("launch", ["cudaLaunchKernelExC", "cuLaunchKernel", "hipLaunchKernel",
                                    "hipExtModuleLaunchKernel"])
def test_launch_apis_link_kernels(tmp_path, launch):
    rec = load_recording([write(tmp_path / "t.json.gz", new_format(launch=launch))])
    tr, op = rec.traces[0], rec.ops[0]
    dev = tr.kind == Kind.KERNEL
    assert (op.launcher[dev] >= 0).all()


def test_cuda_graph_launch_owns_all_its_kernels(tmp_path):
    rec = load_recording([write(tmp_path / "g.json", new_format(graph=True, nccl=False))])
    tr, op = rec.traces[0], rec.ops[0]
    graph_calls = [i for i in np.flatnonzero(tr.kind == Kind.RUNTIME)
                   if tr.names[tr.name_id[i]] == "cudaGraphLaunch"]
    launched = op.launcher[tr.kind == Kind.KERNEL]
    assert sorted(set(launched.tolist())) == sorted(graph_calls)
    assert len(launched) == 4  # two kernels per graph launch, two steps


def test_flows_link_kernels_without_correlation(tmp_path):
    doc = new_format(nccl=False)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"].pop("correlation")
    rec = load_recording([write(tmp_path / "f.json", doc)])
    tr, op = rec.traces[0], rec.ops[0]
    assert (op.launcher[tr.kind == Kind.KERNEL] >= 0).all()


def test_ranks_from_distributed_info_and_file_names(tmp_path):
    a = write(tmp_path / "b.json", new_format(rank=1))
    b = write(tmp_path / "a.json", new_format(rank=0))
    rec = load_recording([a, b])
    assert rec.ranks == [0, 1] and rec.traces[0].path.endswith("a.json")
    assert sorted({l.rank for l in rec.timeline.lanes}) == [0, 1]
    c = write(tmp_path / "job_rank3.json", new_format(rank=None))
    d = write(tmp_path / "job_rank2.json", new_format(rank=None))
    assert load_recording([c, d]).ranks == [2, 3]
    # No metadata and no number: numbered by file name order.
    e = write(tmp_path / "x.json", new_format(rank=None))
    f = write(tmp_path / "y.json", new_format(rank=None))
    assert load_recording([f, e]).ranks == [0, 1]


def test_bare_array_and_plain_vs_gzip_agree(tmp_path):
    doc = new_format()
    plain = read_kineto(write(tmp_path / "p.json", doc))
    gz = read_kineto(write(tmp_path / "p.json.gz", doc))
    arr = read_kineto(write(tmp_path / "arr.json", doc["traceEvents"]))
    for other in (gz, arr):
        assert np.array_equal(plain.ts, other.ts) and np.array_equal(plain.dur, other.dur)
        assert [plain.names[i] for i in plain.name_id] == [other.names[i] for i in other.name_id]


def test_chunked_reading_equals_whole_parse(tmp_path, monkeypatch):
    doc = new_format(step_us=[1000.0] * 300)
    # A string holding the chunk boundary pattern must not break the reader.
    doc["traceEvents"][1]["args"]["Input Dims"] = ["}, {\"x\": 1}"]
    data = json.dumps(doc).encode()
    whole = parse_kineto_bytes(data, "whole.json")
    monkeypatch.setattr(kineto_mod, "_CHUNK", 512)
    pieces = parse_kineto_bytes(data, "pieces.json")
    assert np.array_equal(whole.ts, pieces.ts)
    assert [whole.names[i] for i in whole.name_id] == [pieces.names[i] for i in pieces.name_id]
    assert np.array_equal(whole.kind, pieces.kind)


def test_own_cpu_trace_with_record_function_ids():
    rec = load_recording([DATA / "tiny_cpu_kineto.json.gz"])
    tr = rec.traces[0]
    assert (tr.rf[tr.kind == Kind.CPU_OP] >= 0).all()
    assert [s.name for s in rec.timeline.steps] == ["ProfilerStep#0"]
    cpu = rec.timeline.lanes_of(0, "cpu")
    assert rec.timeline.category_ms(cpu).get("gemm", 0) > 0  # aten::linear holds addmm


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty"),
    (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated"),
    (b"hello world", "not JSON"),
    (b'{"traceEvents": {"a": 1}}', "must be an array"),
    (b'{"traceEvents": []}', "empty trace"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": [1], "dur": 1}]}',
     "wrong type"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": 5, "ts": 1, "dur": 1}]}',
     "'name' must be a string"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": "x"}]}',
     "dur"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "ts": 1, "args": 3}]}',
     "args"),
    (b'{"schema": "1.0.1", "nodes": []}', "execution trace"),
    (b"[1, 2, 3]", "not an object"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, content, fragment):
    path = tmp_path / "bad_trace.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        load_recording([path])
    msg = str(info.value)
    assert msg.startswith("bad_trace.json: ") and "\n" not in msg
    assert fragment.lower() in msg.lower()


def test_truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps(new_format()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"^cut.json.gz: .*truncated"):
        read_kineto(path)


def test_missing_file():
    with pytest.raises(TraceError, match="nope.json: cannot read"):
        read_kineto("/nonexistent/nope.json")


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.sampled_from(["ph", "cat", "name", "ts", "dur",
                                                        "pid", "tid", "args", "id",
                                                        "External id", "correlation",
                                                        "stream", "Input Dims"]),
                                       inner, max_size=6), max_leaves=30)
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "M", "s", "f", "i", None, 3]),
     "cat": st.sampled_from(["cpu_op", "kernel", "Kernel", "cuda_runtime", "user_annotation",
                             "python_function", "gpu_memcpy", "weird", None, 1])},
    optional={"name": st.text(max_size=10) | st.integers(), "ts": _json, "dur": _json,
              "pid": _json, "tid": _json, "args": _json, "id": _json})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_event, max_size=12), top=_json)
def test_fuzz_never_crashes(events, top):
    for doc in ({"traceEvents": events}, top, events):
        data = json.dumps(doc).encode()
        try:
            parse_kineto_bytes(data, "fuzz.json")
        except TraceError as exc:
            assert str(exc).startswith("fuzz.json: ") and "\n" not in str(exc)


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=2000))
def test_fuzz_truncation(cut):
    data = json.dumps(new_format()).encode()
    try:
        parse_kineto_bytes(data[:cut], "cut.json")
    except TraceError as exc:
        assert str(exc).startswith("cut.json: ")


def test_million_events_in_columns():
    from predictors.engine.timeline import Lane, Timeline
    n = 1_000_000
    rng = np.random.default_rng(0)
    start = np.sort(rng.uniform(0, 1e6, n))
    tl = Timeline.from_arrays(start, np.full(n, 0.5), rng.integers(0, 4, n),
                              rng.integers(0, len(CATEGORIES), n), np.zeros(n), None,
                              [Lane(0, "stream", f"stream {i}") for i in range(4)], ["k"])
    assert len(tl) == n
    nbytes = sum(a.nbytes for a in (tl.start_us, tl.dur_us, tl.lane, tl.category,
                                    tl.name_id, tl.detail_id))
    assert nbytes < 40e6
    assert 0 < tl.device_active_ms(0) <= 1e3


def _events(doc):
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.mark.parametrize("bare", [False, True])
def test_odd_ids_are_missing_ids_not_crashes(tmp_path, bare):
    doc = new_format()
    ev = _events(doc)
    ev[1]["args"]["External id"] = 2 ** 70  # beyond int64
    ev[2]["args"]["correlation"] = 1e30 if bare else 10 ** 30
    ev[1]["tid"] = [11]  # a list where a number belongs
    ev[0]["cat"] = ["user_annotation"]  # an unhashable category is an unknown one
    path = write(tmp_path / "odd.json", doc["traceEvents"] if bare else doc)
    tr = read_kineto(path)
    assert -1 in tr.ext.tolist() and len(tr)


def test_negative_duration_is_a_corrupt_trace(tmp_path):
    doc = new_format()
    _events(doc)[1]["dur"] = -5
    with pytest.raises(TraceError, match=r"^neg.json: 1 event\(s\) have a negative duration"):
        read_kineto(write(tmp_path / "neg.json", doc))


def test_gzip_of_several_members_reads_them_all(tmp_path):
    data = json.dumps(new_format()).encode()
    path = tmp_path / "two.json.gz"
    path.write_bytes(gzip.compress(data[:1000]) + gzip.compress(data[1000:]))
    assert len(read_kineto(path)) == len(parse_kineto_bytes(data, "one.json"))


def test_nested_trace_events_do_not_hide_the_real_ones(tmp_path):
    doc = new_format()
    doc = {"other": {"traceEvents": [_events(doc)[0]]}, **doc}  # a nested array first
    assert len(read_kineto(write(tmp_path / "nested.json", doc))) \
        == len(read_kineto(write(tmp_path / "plain.json", new_format())))


def test_context_wide_syncs_get_their_own_lane_name(tmp_path):
    doc = new_format()
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_sync", "name": "Context Sync",
                               "pid": 0, "tid": 4294967295, "ts": 500, "dur": 3,
                               "args": {"stream": 4294967295, "device": 0}})
    rec = load_recording([write(tmp_path / "sync.json", doc)])
    names = {lane.name for lane in rec.timeline.lanes}
    assert "context (all streams)" in names and "stream 4294967295" not in names


def memory_events(total: bool) -> list[dict]:
    """profile_memory's instant events: 1 MB then 3 MB more on GPU 0, one free; a CPU
    block in between."""
    rows = [(150.0, 1, 0, 1_000_000, 101_000_000), (160.0, 0, -1, 4096, 4096),
            (170.0, 1, 0, 3_000_000, 104_000_000), (400.0, 1, 0, -1_000_000, 103_000_000)]
    out = []
    for ts, dtype, did, nbytes, tot in rows:
        args = {"Device Type": dtype, "Device Id": did, "Bytes": nbytes}
        if total:
            args["Total Allocated"] = tot
        out.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                    "pid": 10, "tid": 11, "ts": ts, "args": args})
    return out


@pytest.mark.parametrize("total", [True, False])
@pytest.mark.parametrize("fast", [True, False])
def test_memory_events_become_allocated_bytes_per_device(tmp_path, monkeypatch, total, fast):
    if not fast:   # the plain-JSON reader, as without msgspec
        monkeypatch.setattr(kineto_mod, "msgspec", None)
    doc = new_format()
    doc["traceEvents"] += memory_events(total)
    tr = parse_kineto_bytes(json.dumps(doc).encode(), "mem.json")
    t_gpu, gpu, absolute = tr.memory[("gpu", 0)]
    assert list(t_gpu + tr.base_us) == [150.0, 170.0, 400.0]
    # newer traces: the allocator's own total; 2021's: the sizes summed from zero
    assert list(gpu) == ([101e6, 104e6, 103e6] if total else [1e6, 4e6, 3e6])
    assert absolute is total
    assert list(tr.memory[("cpu", -1)][1]) == [4096] and not tr.memory[("cpu", -1)][2]
    tl = load_recording([write(tmp_path / "mem.json", doc)]).timeline
    counters = {tl.lanes[k].name: v for k, (_, v) in tl.counters.items()}
    gpu_name = "memory allocated" + ("" if total else " (relative)")
    assert set(counters) == {gpu_name, "host memory allocated (relative)"}
    assert counters[gpu_name].max() == (104e6 if total else 4e6)


def test_the_2021_resnet_trace_has_its_memory_curves():
    path = next((TRACES / "kineto-resnet50-v100-2021").glob("*.json.gz"), None)
    if path is None:
        pytest.skip("../shared/data/traces is not here")
    tr = read_kineto(path)
    times, gpu, absolute = tr.memory[("gpu", 0)]
    assert len(times) == 8220 and not absolute and np.all(np.diff(times) >= 0)
    assert 2.5e9 < gpu.max() < 3e9   # activations of a ResNet-50 step on top of the weights
