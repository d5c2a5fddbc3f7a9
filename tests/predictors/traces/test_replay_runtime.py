"""Replay follows the CUDA runtime where it blocks the host or orders device work: CUDA
graph launches, a second launching thread, pageable copies and synchronizations."""
import numpy as np
import pytest
from synth import write

from predictors.traces import load_recording
from predictors.traces.replay import replay

LAT = 5.0  # launch call start -> kernel start on an idle stream (us)


class Job:
    """A current-format Kineto trace, one event at a time (times in us)."""

    def __init__(self):
        self.ev, self.corr = [], 1000

    def op(self, name, ts, dur, tid=11):
        self.ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 10, "tid": tid,
                        "ts": ts, "dur": dur, "args": {}})

    def call(self, name, ts, dur, device=(), tid=11):
        """A runtime call and the device events it launched: ``(start, dur, stream,
        name)`` each (a name starting with ``Memcpy`` is a copy)."""
        self.corr += 1
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 10,
                        "tid": tid, "ts": ts, "dur": dur, "args": {"correlation": self.corr}})
        for start, kdur, stream, kname in device:
            self.ev.append({"ph": "X", "cat": "gpu_memcpy" if kname.startswith("Memcpy")
                            else "kernel", "name": kname, "pid": 0, "tid": stream,
                            "ts": start, "dur": kdur,
                            "args": {"correlation": self.corr, "stream": stream,
                                     "device": 0}})

    def step(self, ts, dur):
        self.ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0",
                        "pid": 10, "tid": 11, "ts": ts, "dur": dur})

    def doc(self):
        return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
                "traceEvents": self.ev}


def graph_and_download(gap: float) -> tuple[dict, float]:
    """Thread 12 launches a CUDA graph of 20 kernels (10 us each, ``gap`` us apart on the
    device) on stream 7; meanwhile the main thread downloads a result to pageable memory on
    the same stream, which returns only when the graph and the copy are done.  Returns the
    trace and the recorded step's end."""
    j = Job()
    j.op("aten::mm", 100, 20)
    j.call("cudaLaunchKernel", 105, 5, [(105 + LAT, 30, 7, "sgemm")])
    g0 = 150.0
    j.op("graph_replay", 140, 20, tid=12)
    kernels = [(g0 + LAT + k * (10 + gap), 10, 7, f"fused_kernel_{k % 3}") for k in range(20)]
    j.call("cudaGraphLaunch", g0, 8, kernels, tid=12)
    graph_end = kernels[-1][0] + 10
    j.op("aten::copy_", 170, graph_end + 12 - 170 + 4)
    j.call("cudaMemcpyAsync", 172, graph_end + 12 - 172,
           [(graph_end + 1, 10, 7, "Memcpy DtoH (Device -> Pageable)")])
    end = graph_end + 12 + 4
    j.op("aten::relu", end + 6, 10)
    j.call("cudaLaunchKernel", end + 8, 4, [(end + 8 + LAT, 5, 7, "relu_kernel")])
    j.step(95, end + 30 - 95)
    return j.doc(), end + 30


@pytest.mark.parametrize("gap", [0.0, 3.0, 12.0])
def test_a_graph_on_another_thread_holds_a_pageable_download(tmp_path, gap):
    doc, _ = graph_and_download(gap)
    rec = load_recording([write(tmp_path / "g.json", doc)])
    r = replay(rec)
    # the graph's kernels keep their device-side spacing: the download waits for all of
    # them, and the main thread with it
    assert abs(r.error_pct) < 1.0, r.to_json()
    tl = r.timeline
    graph = [i for i in range(len(tl)) if tl.names[tl.name_id[i]].startswith("fused_kernel")]
    span = max(tl.start_us[graph] + tl.dur_us[graph]) - min(tl.start_us[graph])
    assert span == pytest.approx(20 * 10 + 19 * gap, abs=0.5)


@pytest.mark.parametrize("sync", ["cudaStreamSynchronize", "cudaEventSynchronize",
                                  "cudaDeviceSynchronize"])
def test_a_synchronization_waits_for_work_another_thread_launched(tmp_path, sync):
    # Thread 12 launches 8 kernels of 40 us on stream 13; the main thread's kernel runs on
    # stream 7, then it synchronizes: on stream 13's work (stream or event sync) or on
    # everything (device sync), which ends with thread 12's last kernel.
    j = Job()
    j.op("aten::mm", 100, 20)
    j.call("cudaLaunchKernel", 105, 5, [(105 + LAT, 30, 7, "sgemm")])
    for k in range(8):
        t = 110 + 10 * k
        j.op("aten::add", t, 8, tid=12)
        j.call("cudaLaunchKernel", t + 2, 4, [(max(t + 2 + LAT, 117 + 40 * k), 40, 13,
                                               "vectorized_elementwise_kernel")], tid=12)
    last_end = 117 + 40 * 8
    j.op("aten::item", 200, last_end + 3 - 200)
    j.call(sync, 202, last_end + 1 - 202)
    j.op("aten::relu", last_end + 8, 10)
    j.call("cudaLaunchKernel", last_end + 10, 4, [(last_end + 10 + LAT, 5, 7, "relu")])
    j.step(95, last_end + 30 - 95)
    rec = load_recording([write(tmp_path / "s.json", j.doc())])
    r = replay(rec)
    assert abs(r.error_pct) < 1.0, r.to_json()
    # the kernels modeled twice as long: the synchronization, and the step, wait for them
    dur = np.full(len(rec.traces[0]), np.nan)
    tr = rec.traces[0]
    names = np.array(tr.names)[tr.name_id]
    dur[names == "vectorized_elementwise_kernel"] = 80.0
    slow = replay(rec, durations=[dur])
    assert (slow.iteration_ms - r.iteration_ms) * 1e3 == pytest.approx(8 * 40, rel=0.05)
