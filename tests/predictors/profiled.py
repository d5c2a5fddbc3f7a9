"""A real CPU run of a scenario under torch.profiler, reduced to comparable op lists."""
from __future__ import annotations

from torch.profiler import ProfilerActivity, profile

from predictors.devices.roofline import classify
from predictors.workload import build_workload


def compute_ops(names: list[str]) -> list[str]:
    """The ops that launch kernels (views and metadata ops dropped)."""
    return [n for n in names if classify(n) != "view"]


def profiled_compute_ops(doc: dict, captured: set[str]) -> list[str]:
    """Run one training step of ``doc`` on the CPU under the profiler.

    The profiler nests ops (``aten::linear`` > ``aten::addmm`` > ``aten::copy_``).  An op
    is comparable with a dispatch-level capture when it computes and no ancestor of it
    is an op the capture also knows (that ancestor accounts for it).
    """
    workload = build_workload(doc, device="cpu")
    batch = workload.make_batch(seed=0)
    optimizer = workload.optimizer()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        optimizer.zero_grad(set_to_none=True)
        loss = workload.module(batch)
        loss.backward()
        optimizer.step()
    events = sorted((e for e in prof.events() if e.name.startswith("aten::")),
                    key=lambda e: (e.time_range.start, -e.time_range.end))

    def covered(e) -> bool:
        p = e.cpu_parent
        while p is not None:
            if p.name in captured:
                return True
            p = p.cpu_parent
        return False

    def wraps_captured(e) -> bool:
        return any(c.name in captured or wraps_captured(c) for c in e.cpu_children)

    # Composite wrappers (aten::linear, aten::layer_norm) decompose before dispatch: the
    # capture sees their parts, so a wrapper counts only when the capture knows its name.
    return [e.name for e in events if classify(e.name) != "view" and not covered(e)
            and (e.name in captured or not wraps_captured(e))]
