"""Small synthetic Kineto traces in the formats of several PyTorch eras (test helpers)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


def new_format(rank: int | None = 0, step_us=(1000.0, 1000.0), launch="cudaLaunchKernel",
               nccl=True, graph=False) -> dict:
    """Two steps on one thread: per step an op launching a GEMM (and an NCCL all-reduce),
    2 us launch latency; times in us from 100."""
    ev, corr, t = [], 100, 100.0
    for s, dur in enumerate(step_us):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                   "pid": 10, "tid": 11, "ts": t, "dur": dur, "args": {"External id": s}})
        op_t = t + 10
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11,
                   "ts": op_t, "dur": 30, "args": {"External id": 50 + s,
                                                   "Record function id": 50 + s,
                                                   "Input Dims": [[8, 8], [8, 8]]}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name":
                   "cudaGraphLaunch" if graph else launch, "pid": 10, "tid": 11,
                   "ts": op_t + 5, "dur": 4, "args": {"correlation": corr}})
        ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 10, "tid": 11,
                   "ts": op_t + 5})
        ev.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0,
                   "tid": 7, "ts": op_t + 7, "dur": 100,
                   "args": {"correlation": corr, "stream": 7, "device": 0}})
        ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7,
                   "ts": op_t + 7, "bp": "e"})
        if graph:
            ev.append({"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_"
                       "elementwise_kernel<4>", "pid": 0, "tid": 7, "ts": op_t + 110,
                       "dur": 20, "args": {"correlation": corr, "stream": 7, "device": 0}})
        corr += 1
        if nccl:
            ev.append({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10,
                       "tid": 11, "ts": op_t + 50, "dur": 20, "args": {}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 10, "tid": 11,
                       "ts": op_t + 55, "dur": 4, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING"
                       "_LL(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 20,
                       "ts": op_t + 120, "dur": 200,
                       "args": {"correlation": corr, "stream": 20, "device": 0}})
            corr += 1
        t += dur
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
           "traceEvents": ev + [
               {"name": "thread_name", "ph": "M", "pid": 10, "tid": 11,
                "args": {"name": "thread 11 (python)"}},
               {"ph": "X", "cat": "Trace", "ts": 0, "dur": 5000, "pid": "Spans",
                "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)"}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    return doc


def old_format() -> dict:
    """The 2021 layout: Operator/Runtime/Kernel, string tids, 'external id', async flows."""
    ev = [{"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 1, "tid": "1",
           "ts": 100, "dur": 500, "args": {"External id": 1}},
          {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 1, "tid": "1",
           "ts": 110, "dur": 50, "args": {"External id": 2, "Input Dims": [[1, 3, 8, 8]]}},
          {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "1",
           "ts": 120, "dur": 5, "args": {"correlation": 9, "external id": 2}},
          {"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 120, "cat": "async", "name": "launch"},
          {"ph": "X", "cat": "Kernel", "name": "volta_scudnn_128x64_relu_medium_nn_v1",
           "pid": 0, "tid": "stream 7", "ts": 130, "dur": 300,
           "args": {"correlation": 9, "external id": 2, "stream": 7, "device": 0}},
          {"ph": "f", "id": 9, "pid": 0, "tid": "stream 7", "ts": 130, "cat": "async",
           "name": "launch", "bp": "e"},
          {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
           "tid": "stream 7", "ts": 440, "dur": 10, "args": {"stream": 7, "bytes": 64}},
          {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 115,
           "args": {"Bytes": 4}}]
    return {"schemaVersion": 1, "traceEvents": ev}


def write(path: Path, doc, gz: bool | None = None) -> Path:
    data = json.dumps(doc).encode()
    if gz if gz is not None else str(path).endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path
