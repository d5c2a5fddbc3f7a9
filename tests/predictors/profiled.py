"""A real CPU run of a scenario under torch.profiler, reduced to comparable op lists."""
from __future__ import annotations

from torch.profiler import ProfilerActivity, profile

from predictors.calibrate.profiling import comparable_events
from predictors.model.op_classes import classify
from predictors.model.workload import build_workload


def compute_ops(names: list[str]) -> list[str]:
    """The ops that launch kernels (views and metadata ops dropped)."""
    return [n for n in names if classify(n) != "view"]


def profiled_compute_ops(doc: dict, captured: set[str]) -> list[str]:
    """Run one training step of ``doc`` on the CPU under the profiler and return the
    recorded ops that a dispatch-level capture also sees, in order."""
    workload = build_workload(doc, device="cpu")
    batch = workload.make_batch(seed=0)
    optimizer = workload.optimizer()
    if doc["training"].get("optimizer", "sgd") != "sgd":   # a steady step, as captured
        optimizer.zero_grad(set_to_none=True)
        workload.module(batch).backward()
        optimizer.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        optimizer.zero_grad(set_to_none=True)
        loss = workload.module(batch)
        loss.backward()
        optimizer.step()
    events = sorted((e for e in prof.events() if e.name.startswith("aten::")),
                    key=lambda e: (e.time_range.start, -e.time_range.end))
    return [e.name for e in comparable_events(events, captured)]
