"""Per-thread CPU clocks in trace replay: cross-thread waits, ranges, blocking copies,
overhead means; synthetic traces plus the public ones (skipped where absent)."""
from pathlib import Path

import numpy as np
import pytest
from synth import write

from predictors.traces import load_recording
from predictors.traces.kineto import Kind
from predictors.traces.ops import blocking_copies, copy_holds
from predictors.traces.overheads import item_times, overhead_stats, thread_waits
from predictors.traces.replay import replay

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data" / "traces"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/traces is "
                                  "absent (a fresh clone has no shared data)")


class Trace:
    """A current-format Kineto trace built op by op (times in us)."""

    def __init__(self):
        self.ev, self.corr = [], 1000

    def step(self, name, ts, dur, tid=11):
        self.ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 10,
                        "tid": tid, "ts": ts, "dur": dur})

    def op(self, name, ts, dur, tid=11, launches=(), cat="cpu_op",
           copy_name="Memcpy DtoH (Device -> Pageable)"):
        """An op; ``launches``: ``(offset, call_dur, kernel_start, kernel_dur, stream,
        kind)`` each (kind "kernel" or "gpu_memcpy", named ``copy_name``)."""
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": tid,
                        "ts": ts, "dur": dur, "args": {}})
        for off, cdur, ks, kdur, stream, kind in launches:
            self.corr += 1
            copy = kind == "gpu_memcpy"
            self.ev.append({"ph": "X", "cat": "cuda_runtime", "pid": 10, "tid": tid,
                            "name": "cudaMemcpyAsync" if copy else "cudaLaunchKernel",
                            "ts": ts + off, "dur": cdur, "args": {"correlation": self.corr}})
            self.ev.append({"ph": "X", "cat": kind, "pid": 0, "tid": stream, "ts": ks,
                            "dur": kdur, "name": copy_name if copy
                            else "void at::native::vectorized_elementwise_kernel<4>",
                            "args": {"correlation": self.corr, "stream": stream,
                                     "device": 0}})

    def doc(self):
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
                "traceEvents": self.ev}


def alternating(steps=2, poll=False):
    """Forward on the main thread, backward on the autograd thread while main waits, then
    the optimizer on main: the usual training step.  ``aten::zeros`` opens the step and
    the optimizer (so its name's T1 must not carry the wait for backward).  ``poll``: a
    third thread polls an event just before main resumes (a watchdog)."""
    t, x = Trace(), 100.0
    marks = []
    for s in range(steps):
        t0 = x
        fwd = ["aten::zeros", "aten::linear", "aten::relu", "aten::linear"]
        for name in fwd:
            t.op(name, x, 20, launches=[(5, 5, x + 12, 10, 7, "kernel")])
            x += 30
        f_end = x - 10
        b = f_end + 30  # the autograd thread starts 30 us after the loss op ended
        for name in ["AddmmBackward0", "ReluBackward0", "AddmmBackward0", "AccumulateGrad"]:
            t.op(name, b, 20, tid=12, launches=[(5, 5, b + 12, 10, 7, "kernel")])
            b += 30
        b_end = b - 10
        x = b_end + 40  # main resumes 40 us after the last backward op
        if poll:
            t.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaEventQuery",
                         "pid": 10, "tid": 14, "ts": b_end + 20, "dur": 2, "args": {}})
        for name in ["aten::zeros", "Optimizer.step"]:
            t.op(name, x, 20, launches=[(5, 5, x + 12, 10, 7, "kernel")])
            x += 30
        t.step(f"ProfilerStep#{s}", t0 - 5, x - t0 + 5)
        marks.append((f_end, b_end))
        x += 5
    return t, marks


@pytest.mark.parametrize("poll", [False, True], ids=["two threads", "with a poller"])
def test_cross_thread_waits_and_per_thread_t1(tmp_path, poll):
    t, marks = alternating(steps=2, poll=poll)
    rec = load_recording([write(tmp_path / "a.json", t.doc())])
    tr, op = rec.traces[0], rec.ops[0]
    prev, wait = thread_waits(tr, op)
    names = [tr.names[tr.name_id[i]] for i in op.items]
    s = tr.ts[op.items]
    # The first backward op waited for the last forward op; the optimizer for backward.
    first_bwd = [k for k, nm in enumerate(names) if nm == "AddmmBackward0"][0::2]
    for k, (f_end, b_end) in zip(first_bwd, marks):
        w = wait[k]
        assert tr.thread[op.items[w]] != tr.thread[op.items[k]]
        assert tr.base_us + tr.ts[op.items[w]] + tr.dur[op.items[w]] == pytest.approx(f_end)
    resumed = [k for k, nm in enumerate(names) if nm == "aten::zeros"][1::2]
    assert all(wait[k] >= 0 and names[wait[k]] == "AccumulateGrad" for k in resumed)
    # Ordinary gaps of a thread wait for nothing.
    assert (wait[[k for k, nm in enumerate(names) if nm in ("aten::relu", "ReluBackward0")]]
            == -1).all()
    times = item_times(tr, op)
    assert times.t1[first_bwd] == pytest.approx([30, 30])
    assert times.t1[resumed] == pytest.approx([40, 40])
    st = overhead_stats(rec.traces, rec.ops)
    assert st.overheads.per_op["aten::zeros"].t1 * 1e6 < 41  # not the backward's length
    # A thread's first op that waited for nothing has no T1 (NaN), not 0.
    assert np.isnan(times.t1[0]) and prev[0] == -1
    assert s[first_bwd[1]] > s[first_bwd[0]]


def test_replay_of_alternating_threads_is_exact(tmp_path):
    t, _ = alternating(steps=3)
    r = replay(load_recording([write(tmp_path / "a.json", t.doc())]))
    assert abs(r.error_pct) < 1.0, r.per_rank
    lanes = {l.name for l in r.timeline.lanes if l.kind == "cpu"}
    assert lanes == {"thread 11", "thread 12"}


def test_overlapping_threads_run_side_by_side(tmp_path):
    # Two threads issue ops at the same time (a second Python thread, a data loader):
    # one clock would serialize them and double the step.
    t = Trace()
    t.step("ProfilerStep#0", 95, 620)
    for k in range(20):
        a, b = 100 + 30 * k, 105 + 30 * k
        t.op("aten::mul", a, 20, tid=11, launches=[(5, 5, a + 12, 8, 7, "kernel")])
        t.op("aten::add", b, 20, tid=13, launches=[(5, 5, b + 12, 8, 8, "kernel")])
    rec = load_recording([write(tmp_path / "o.json", t.doc())])
    prev, wait = thread_waits(rec.traces[0], rec.ops[0])
    assert (wait[prev >= 0] == -1).all()
    r = replay(rec)
    assert abs(r.error_pct) < 2.0, r.per_rank


def old_format_with_blocking_range() -> dict:
    """2021 layout: ``ProfilerStep#1`` and a ``record_function`` around ``backward()`` are
    ``Operator`` events; the autograd thread works while main is blocked inside it."""
    ev = []

    def op(name, ts, dur, tid):
        ev.append({"ph": "X", "cat": "Operator", "name": name, "pid": 1, "tid": str(tid),
                   "ts": ts, "dur": dur, "args": {}})

    op("ProfilerStep#1", 100, 1000, 1)
    op("aten::linear", 110, 50, 1)
    op("aten::addmm", 115, 40, 1)
    op("## backward ##", 200, 600, 1)
    op("aten::ones_like", 205, 10, 1)          # main's own work inside the range
    for k in range(5):                          # the autograd thread, main idle
        op("AddmmBackward0", 260 + 100 * k, 60, 2)
        op("aten::mm", 265 + 100 * k, 50, 2)
    op("aten::zeros", 850, 20, 1)
    # A lone op of another thread inside an op that does other work: not a range.
    op("aten::cat", 900, 100, 1)
    op("aten::empty", 905, 5, 1)
    op("aten::copy_", 960, 30, 1)
    op("aten::add", 920, 10, 2)
    return {"schemaVersion": 1, "traceEvents": ev}


def test_ranges_are_not_items(tmp_path):
    rec = load_recording([write(tmp_path / "w.json", old_format_with_blocking_range())])
    tr, op = rec.traces[0], rec.ops[0]
    name = lambda i: tr.names[tr.name_id[i]]  # noqa: E731
    assert sorted(name(i) for i in op.ranges) == ["## backward ##", "ProfilerStep#1"]
    items = [name(i) for i in op.items]
    assert items.count("AddmmBackward0") == 5 and "aten::ones_like" in items
    assert "aten::cat" in items and "aten::empty" not in items
    assert [s[0] for s in tr.steps()] == ["ProfilerStep#1"]
    prev, wait = thread_waits(tr, op)
    k = items.index("aten::zeros")
    assert items[wait[k]] == "AddmmBackward0"  # main resumed after the last node


def waits_for_a_longer_kernel(rec) -> float:
    """How much longer (ms) the step replays when its 200 us kernel is modeled at 500 us;
    the replay with the recorded kernels must match the recording first."""
    tr = rec.traces[0]
    base = replay(rec)
    assert abs(base.error_pct) < 2.0
    dur = np.full(len(tr), np.nan)
    dur[(tr.kind == Kind.KERNEL) & (tr.dur == 200)] = 500
    return replay(rec, durations=[dur]).iteration_ms - base.iteration_ms


def test_copy_to_pageable_memory_holds_the_cpu(tmp_path):
    # aten::to copies to pageable memory behind a 200 us kernel: its cudaMemcpyAsync
    # returns when the copy ends.  Another aten::to makes a quick launch.
    t = Trace()
    t.step("ProfilerStep#0", 95, 600)
    t.op("aten::mm", 100, 20, launches=[(5, 5, 112, 200, 7, "kernel")])
    t.op("aten::to", 130, 200, launches=[(5, 190, 312, 3, 7, "gpu_memcpy")])
    t.op("aten::to", 340, 20, launches=[(5, 5, 352, 3, 7, "kernel")])
    t.op("aten::relu", 370, 20, launches=[(5, 5, 382, 10, 7, "kernel")])
    rec = load_recording([write(tmp_path / "c.json", t.doc())])
    tr, op = rec.traces[0], rec.ops[0]
    blocking = blocking_copies(tr, op)
    assert [tr.names[tr.name_id[i]] for i in np.flatnonzero(blocking)] == ["cudaMemcpyAsync"]
    st = overhead_stats(rec.traces, rec.ops)
    assert st.overheads.per_op["aten::to"].t4 == pytest.approx(5e-6)  # the quick launch
    # The kernel modeled 300 us longer: the copy, and the CPU with it, wait 300 us more.
    assert waits_for_a_longer_kernel(rec) == pytest.approx(0.3, abs=0.01)


def test_a_large_pageable_upload_holds_the_cpu_until_its_last_chunk(tmp_path):
    # A host-to-device copy from pageable memory is staged through pinned buffers: the
    # large one holds its call until 27 us before the copy ends (the last chunk in
    # flight), behind a 200 us kernel; the small one returns before its copy runs.
    t = Trace()
    t.step("ProfilerStep#0", 95, 700)
    t.op("aten::mm", 100, 20, launches=[(5, 5, 112, 200, 7, "kernel")])
    upload = "Memcpy HtoD (Pageable -> Device)"
    t.op("aten::to", 130, 260, launches=[(5, 250, 312, 100, 7, "gpu_memcpy")],
         copy_name=upload)
    t.op("aten::to", 400, 20, launches=[(5, 5, 413, 2, 7, "gpu_memcpy")], copy_name=upload)
    t.op("aten::relu", 430, 20, launches=[(5, 5, 442, 10, 7, "kernel")])
    rec = load_recording([write(tmp_path / "h2d.json", t.doc())])
    tr, op = rec.traces[0], rec.ops[0]
    holds = copy_holds(tr, op)
    held = np.flatnonzero(~np.isnan(holds))
    assert len(held) == 1 and tr.dur[held[0]] == 250 and holds[held[0]] == pytest.approx(27)
    # The kernel before the upload modeled 300 us longer: the upload, and the CPU, wait.
    assert waits_for_a_longer_kernel(rec) == pytest.approx(0.3, abs=0.01)


def test_t4_t5_are_means_over_calls(tmp_path):
    # conv2d once with 2 calls 100 us apart, once with 11 calls 10 us apart: T5 is the
    # mean gap (200 / 11 us), not the mean of the two ops' means (55 us).
    t = Trace()
    t.step("ProfilerStep#0", 95, 600)
    t.op("aten::conv2d", 100, 120, launches=[(5, 5, 112, 5, 7, "kernel"),
                                            (110, 5, 222, 5, 7, "kernel")])
    t.op("aten::conv2d", 250, 200, launches=[(5 + 15 * k, 5, 262 + 15 * k, 5, 7, "kernel")
                                            for k in range(11)])
    rec = load_recording([write(tmp_path / "t5.json", t.doc())])
    oh = overhead_stats(rec.traces, rec.ops).overheads.per_op["aten::conv2d"]
    assert oh.t5 * 1e6 == pytest.approx(200 / 11)
    assert oh.t4 * 1e6 == pytest.approx(5.0)


def test_an_op_name_with_and_without_calls_keeps_its_total(tmp_path):
    # ViewBackward0 copies once in two ops (1 call each: no gap between calls) and only
    # reshapes in a third (60 us, no call).  T5 is the call-free op's time, and the
    # replayed step is the recorded one; a T5 of the calling ops' gaps alone was 0 us.
    t = Trace()
    t.step("ProfilerStep#0", 95, 420)
    t.op("ViewBackward0", 100, 30, launches=[(10, 10, 115, 5, 7, "kernel")])
    t.op("ViewBackward0", 150, 30, launches=[(10, 10, 165, 5, 7, "kernel")])
    t.op("ViewBackward0", 200, 60)
    t.op("aten::add", 270, 240, launches=[(10, 10, 285, 5, 7, "kernel")])
    rec = load_recording([write(tmp_path / "mixed.json", t.doc())])
    oh = overhead_stats(rec.traces, rec.ops).overheads.per_op["ViewBackward0"]
    assert oh.t5 * 1e6 == pytest.approx(60.0)
    r = replay(rec)
    assert r.iteration_ms == pytest.approx(r.recorded_ms, rel=1e-3)


def test_an_h200_lm_step_with_a_stalled_backward_op_replays_its_step():
    # One of the project's traced H200 steps: a ViewBackward0 on the autograd thread that
    # stalled 520 us, beside 28 others that copy or only reshape.
    f = ROOT / "resources/measurements/nvidia-h200-2026-11-29-seed11/scenario13.json.gz"
    r = replay(load_recording([f]))
    assert abs(r.error_pct) < 0.5, r.per_rank


@needs_shared
def test_resnet50_two_threads_replay():
    # The 2021 trace: ProfilerStep is an Operator, backward runs on its own thread while
    # main waits.  One clock for both threads replayed it +20.7 % slow.
    files = sorted((SHARED / "kineto-resnet50-v100-2021").glob("*.json.gz"))
    rec = load_recording(files)
    tr, op = rec.traces[0], rec.ops[0]
    assert len(op.ranges) == 6 and all(tr.names[tr.name_id[i]].startswith("ProfilerStep#")
                                       for i in op.ranges)
    r = replay(rec)
    assert len(r.per_rank[0]["steps"]) == 6
    assert abs(r.error_pct) < 3.0, r.per_rank


@needs_shared
def test_dlrm_8_ranks_replay_per_rank():
    files = sorted((SHARED / "param-dlrm-v100-8rank").glob("worker*.pt.trace.json.gz"))
    r = replay(load_recording(files))
    assert abs(r.error_pct) < 1.5
    assert all(abs(p["error_pct"]) < 2.0 for p in r.per_rank), r.per_rank
