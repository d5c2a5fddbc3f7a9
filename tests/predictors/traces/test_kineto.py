"""Kineto import: every era's categories, ranks, steps, the Timeline, and bad input."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
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
     "event 1: 'ts' must be a number"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": 5, "ts": 1, "dur": 1}]}',
     "'name' must be a string"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": "x"}]}',
     "event 1: 'dur' is not a number ('x')"),
    (b'{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Bytes": 1e999}}]}',
     "event 1: 'args.Bytes': number out of range"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "ts": 1, "args": 3}]}',
     "args"),
    (b'{"schema": "1.0.1", "nodes": []}', "execution trace"),
    (b"[1, 2, 3]", "event 1 is not an object"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": {"a": 1}, "ts": 1}]}',
     "'name' must be a string, got an object"),
    (b'[{"ph": "s", "cat": ["ac2g"], "name": "a", "ts": 1}]', "'cat' must be a string"),
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
# an object or a list where a string or a number belongs
_container = st.lists(_json, max_size=3) | st.dictionaries(st.text(max_size=4), _json,
                                                           max_size=3)
_FIELDS = ["name", "cat", "ph", "ts", "dur", "pid", "tid", "id", "args"]
_ARG_FIELDS = ["External id", "external id", "correlation", "stream", "device",
               "Record function id", "Input Dims", "Collective name", "In msg nelems", "dtype",
               "bytes", "Bytes", "Total Allocated", "Device Type", "Device Id", "name", "labels"]
_PATHS = _FIELDS + ["args." + f for f in _ARG_FIELDS]
# fields of a known type (an error when wrong); the others are ids or labels of any value
_TYPED = {"name": "a string", "cat": "a string", "ph": "a string", "ts": "a number",
          "dur": "a number", "args": "an object", "args.Bytes": "a number",
          "args.Total Allocated": "a number"}
_id = st.integers(min_value=-1, max_value=30) | st.sampled_from(["stream 7", "1", "Spans"])
_time = st.integers(min_value=0, max_value=10 ** 6) | st.floats(min_value=0, max_value=1e6)
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "M", "s", "f", "i"]),
     "cat": st.sampled_from(["cpu_op", "kernel", "Kernel", "cuda_runtime", "user_annotation",
                             "python_function", "gpu_memcpy", "ac2g", "async", "weird"])},
    optional={"name": st.sampled_from(["aten::mm", "thread_name", "[memory]"]),
              "ts": _time, "dur": _time, "pid": _id, "tid": _id, "id": _id,
              "args": st.fixed_dictionaries({}, optional={
                  "External id": _id, "correlation": _id, "stream": _id, "device": _id,
                  "Input Dims": _json, "bytes": _id, "Bytes": _id, "name": _id})})
# a field's value replaced by any JSON value, a list or an object as often as not
_damage = st.none() | st.tuples(st.sampled_from(_PATHS), _container | _json)


def _mutate(event: dict, path: str, value) -> None:
    if path.startswith("args."):
        if not isinstance(event.get("args"), dict):
            event["args"] = {}
        event["args"][path[5:]] = value
    else:
        event[path] = value


def _parse_or_trace_error(data: bytes, file: str) -> str | None:
    """None where the trace loads, else the TraceError's text; any other exception fails."""
    try:
        parse_kineto_bytes(data, file)
    except TraceError as exc:
        msg = str(exc)
        assert msg.startswith(f"{file}: ") and "\n" not in msg, msg
        return msg
    return None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(st.tuples(_event, _damage), max_size=12), top=_json)
@example(events=[({"ph": "s", "cat": "ac2g", "id": 1, "ts": 1}, ("cat", ["ac2g"]))], top=None)
def test_fuzz_never_crashes(events, top):
    for event, damage in events:
        if damage is not None:
            _mutate(event, *damage)
    events = [e for e, _ in events]
    for doc in ({"traceEvents": events}, top, events):
        _parse_or_trace_error(json.dumps(doc).encode(), "fuzz.json")


def _every_kind_of_event() -> tuple[dict, list[int]]:
    """A trace of every era's events, and the index of one event of each kind."""
    doc = new_format()
    doc["traceEvents"] += memory_events(True) + old_format()["traceEvents"] + [
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 11,
         "ts": 900, "dur": 9, "args": {"Collective name": "allreduce", "In msg nelems": 4,
                                       "Out msg nelems": 4, "dtype": "Float"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}}]
    first = {}
    for i, e in enumerate(doc["traceEvents"]):
        first.setdefault((e["ph"], e.get("cat"), e["name"] if e["ph"] in "Mi" else ""), i)
    return doc, sorted(first.values())


def test_an_object_or_list_in_any_field_is_a_trace_error_or_an_absent_id():
    """Every field of one event of each kind, replaced by an object or a list: a field of
    a known type gives a TraceError naming the event and the field; an id or a label of
    the wrong type counts as absent."""
    doc, picks = _every_kind_of_event()
    events = doc["traceEvents"]
    for i in picks:
        for path in _PATHS:
            for value in ({"k": 1}, [1], ["x", {}]):
                saved = json.dumps(events[i])
                _mutate(events[i], path, value)
                msg = _parse_or_trace_error(json.dumps(doc).encode(), "mutant.json")
                events[i] = json.loads(saved)
                where = f"event {i + 1}, {path} = {value!r}: {msg}"
                if path in _TYPED and not (path == "args" and isinstance(value, dict)):
                    assert msg is not None and f"event {i + 1}: '{path}' must be " \
                        f"{_TYPED[path]}" in msg, where
                else:
                    assert msg is None, where


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.integers(min_value=0), st.sampled_from(_PATHS),
                                _container | _json), min_size=1, max_size=3),
       bare=st.booleans())
@example(edits=[(3, "cat", ["ac2g"])], bare=False)  # a flow event's category
def test_fuzz_field_values_of_a_real_layout(edits, bare):
    doc, _ = _every_kind_of_event()
    events = doc["traceEvents"]
    for i, path, value in edits:
        _mutate(events[i % len(events)], path, value)
    _parse_or_trace_error(json.dumps(events if bare else doc).encode(), "fuzz.json")


@pytest.mark.parametrize("ph, field, value, message", [
    ("X", "name", {"a": 1}, "'name' must be a string, got an object"),
    ("s", "name", {"a": 1}, "'name' must be a string, got an object"),
    ("M", "name", {"a": 1}, "'name' must be a string, got an object"),
    ("s", "cat", ["ac2g"], "'cat' must be a string, got an array"),
    ("f", "cat", {"a": 1}, "'cat' must be a string, got an object"),
    ("X", "ph", ["X"], "'ph' must be a string, got an array"),
    ("X", "args", [1], "'args' must be an object or null, got an array"),
    ("X", "dur", {"a": 1}, "'dur' must be a number, a string or null, got an object"),
])
@pytest.mark.parametrize("chunk", [None, 512])
def test_an_object_where_a_string_belongs_names_the_event(monkeypatch, ph, field, value,
                                                          message, chunk):
    if chunk:  # read in pieces: events are still counted from the file's first
        monkeypatch.setattr(kineto_mod, "_CHUNK", chunk)
    doc = new_format(step_us=[1000.0] * 20)
    i = max(j for j, e in enumerate(doc["traceEvents"]) if e["ph"] == ph)
    doc["traceEvents"][i][field] = value
    with pytest.raises(TraceError) as info:
        parse_kineto_bytes(json.dumps(doc).encode(), "dictname.json")
    assert str(info.value) == f"dictname.json: event {i + 1}: {message}"


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
    # the union of n random 0.5 us spans over 1 s covers 1 - exp(-n * 0.5 us / 1 s) of it,
    # idle spans left out (a sum of the spans would give ~450 ms)
    busy = int((tl.category != CATEGORIES.index("idle")).sum())
    assert tl.device_active_ms(0) == pytest.approx(1e3 * (1 - np.exp(-busy * 0.5 / 1e6)),
                                                   rel=0.01)


def _events(doc):
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.mark.parametrize("bare", [False, True])
def test_odd_ids_are_missing_ids_not_crashes(tmp_path, bare):
    doc = new_format()
    ev = _events(doc)
    ev[1]["args"]["External id"] = 2 ** 70  # beyond int64
    ev[2]["args"]["correlation"] = 1e30 if bare else 10 ** 30
    ev[1]["tid"] = [11]  # a list where a number belongs
    ev[0]["pid"] = {"pid": 10}
    ev[3]["tid"] = "stream " + "9" * 30  # digits beyond int64
    ev[4]["args"]["External id"] = "9" * 5000  # beyond what int() reads
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
def test_memory_events_become_allocated_bytes_per_device(tmp_path, total):
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
