"""A synthetic, plausible-looking Timeline for tests, previews and demos (no predictor needed)."""
from __future__ import annotations

import numpy as np

from predictors.engine.timeline import Timeline, TimelineBuilder

__all__ = ["synthetic_timeline"]

_FWD = [("aten::embedding_bag", "embedding", "[100000, 16], [10240]"),
        ("aten::addmm", "gemm", "[128], [512, 13], [13, 128]"),
        ("aten::relu", "elementwise", "[512, 128]"),
        ("aten::addmm", "gemm", "[64], [512, 128], [128, 64]"),
        ("aten::bmm", "gemm", "[512, 9, 16], [512, 16, 9]"),
        ("aten::cat", "memcpy", "[512, 16], [512, 36]"),
        ("aten::sum", "reduction", "[512, 256]"),
        ("aten::sigmoid", "elementwise", "[512, 1]")]


def synthetic_timeline(ranks: int = 1, steps: int = 40, seed: int = 0,
                       title: str = "synthetic") -> Timeline:
    """CPU main/autograd threads launching kernels on a compute and a comm stream per rank.

    About ``ranks * steps * 7`` events; deterministic for a given ``seed``.
    """
    rng = np.random.default_rng(seed)
    b = TimelineBuilder(title)
    for r in range(ranks):
        main = b.lane(r, "cpu", "main")
        autograd = b.lane(r, "cpu", "autograd")
        compute = b.lane(r, "stream", "stream 0")
        comm = b.lane(r, "stream", "stream 1 (comm)")
        t, stream_free = 0.0, 0.0
        for phase, lane in (("fwd", main), ("bwd", autograd)):
            for k in range(steps):
                name, cat, shapes = _FWD[k % len(_FWD)]
                if phase == "bwd":
                    name = name.replace("aten::", "aten::") + "_backward"
                cpu = float(rng.uniform(8, 25))
                b.add(lane, t, cpu, "cpu_op", name, shapes)
                b.add(lane, t + cpu * 0.4, 3.0, "cpu_overhead", "cudaLaunchKernel")
                start = max(t + cpu * 0.4 + 5.0, stream_free)
                dur = float(rng.lognormal(3.0, 0.8)) * (2 if cat == "gemm" else 1)
                b.add(compute, start, dur, cat, name.split("::")[-1] + "_kernel", shapes)
                stream_free = start + dur
                t += cpu + float(rng.uniform(1, 4))
                if phase == "bwd" and k % 10 == 9:
                    b.add(comm, stream_free, float(rng.uniform(60, 140)), "communication",
                          "nccl:all_reduce", "[1048576]")
            if phase == "fwd":
                b.add(comm, stream_free, 90.0, "communication", "nccl:all_to_all", "[512, 128]")
                t = max(t, stream_free + 90.0)
        b.add(main, t, 40.0, "cpu_op", "Optimizer.step#SGD.step")
        b.add(compute, max(t + 10, stream_free), 35.0, "elementwise", "sgd_update_kernel")
    return b.build(source="synthetic")
