"""Cost a captured op graph on a platform: kernel durations plus CPU overheads per op."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import networkx as nx

from ..hardware.platforms import Platform
from ..hardware.specs import DeviceSpec, device_spec
from ..model.footprint import step_footprint
from ..model.memory import StepMemory
from ..profiles import DeviceProfile, OpOverheads, OverheadTable
from .fused_lookups import fused_seconds, split_fused
from .large_ops import (
    GEMM_MAX_FLOPS_DEFAULT,
    first_touch_s,
    fresh_bytes,
    shrunk_gemm,
    stream_floor_s,
)
from .overheads import default_overheads
from .roofline import KernelCost, kernel_cost

__all__ = ["CostedOp", "CostedGraph", "cost_op_graph", "kernel_seconds", "shape_detail"]


@dataclass(frozen=True)
class CostedOp:
    """One captured op with its CPU overheads and its kernel (seconds)."""

    index: int
    name: str
    category: str
    thread: str
    phase: str
    block: str
    detail: str
    kernel_s: float  # 0: no kernel (view or metadata op)
    flops: float
    bytes: float
    model: str
    deps: tuple[int, ...]
    overheads: OpOverheads
    table: str = ""  # the embedding table it reads or updates ("<block>/<index>")


@dataclass
class CostedGraph:
    ops: list[CostedOp]
    device: DeviceSpec
    overheads: OverheadTable
    platform: Platform
    memory: StepMemory | None = None   # the step's device memory (from the capture)
    footprint_scale: float = 1.0   # applied to every op: the step's data stay cached


def shape_detail(node: dict) -> str:
    """``[512, 13] float32, [13, 512] float32 -> [512, 512]`` for tooltips and traces."""
    def fmt(shapes, dtypes, nnz):
        parts = []
        for s, d, n in zip(shapes, dtypes, nnz):
            sparse = f" sparse nnz={n}" if n is not None else ""
            parts.append(f"[{', '.join(str(x) for x in s)}] {d}{sparse}")
        return ", ".join(parts)
    ins = fmt(node["input_shapes"], node["input_dtypes"], node["input_nnz"])
    outs = fmt(node["output_shapes"], node["output_dtypes"], node["output_nnz"])
    return f"{ins} -> {outs}" if outs else ins


def kernel_seconds(nodes: list[dict], device: DeviceSpec,
                   profile: DeviceProfile | None = None
                   ) -> tuple[list[KernelCost], list[float], list[str]]:
    """The kernel time of each op node: the profile's learned model for the op classes it
    covers, else the roofline.  Returns ``(roofline costs, seconds, model names)``."""
    # a fused lookup is priced as its tables' lookups (devices/fused_lookups.py)
    split = [split_fused(node) for node in nodes]
    if any(split):
        flat = [p for node, parts in zip(nodes, split) for p in (parts or [node])]
        costs, seconds, models = kernel_seconds(flat, device, profile)
        return _fold_fused(split, costs, seconds, models, device.kernel_floor_s)
    costs = [kernel_cost(node, device) for node in nodes]
    seconds = [c.seconds for c in costs]
    models = [c.model for c in costs]
    if profile is not None:
        picked = [j for j, c in enumerate(costs) if c.category not in ("view",
                                                                           "communication")]
        for model in profile.kernel_models.values() if picked else ():
            pred = model.predict_ms([nodes[j] for j in picked])
            for j, ms in zip(picked, pred):
                if ms == ms:  # NaN: the model does not cover this op
                    seconds[j], models[j] = float(ms) / 1e3, f"{model.op_class} model"
    if device.kind == "cpu":
        if profile is not None:
            beyond_range(nodes, costs, seconds, models, profile)
        for j, node in enumerate(nodes):
            extra = dense_bag_backward_sort_s(node, device)
            if extra > 0.0:
                seconds[j] += extra
                models[j] += ", + sorting its indices (dense gradient)"
            touch = first_touch_s(node, device)
            if touch > 0.0:
                seconds[j] += touch
                models[j] += f", + first touch of {fresh_bytes(node) / 1e6:.0f} MB"
    return costs, seconds, models


def beyond_range(nodes, costs, seconds, models, profile: DeviceProfile) -> None:
    """Ops above the sizes a CPU profile's learned models were fitted on
    (``costs/large_ops.py``), in place: a GEMM at the throughput its model predicts for
    the shape cut to the range's largest FLOPs; a memory-bound op (elementwise,
    reduction, copy) at the DRAM bandwidth measured beyond the caches (its roofline with
    that bandwidth)."""
    device = profile.device
    by_class = {getattr(m, "op_class", None): m for m in profile.kernel_models.values()}
    for j, node in enumerate(nodes):
        model = by_class.get(models[j][:-len(" model")]) if models[j].endswith(
            " model") else None
        if model is None:
            continue
        metrics = getattr(model, "metrics", None) or {}
        if model.op_class == "gemm":
            cut = shrunk_gemm(node, float(metrics.get("max_flops") or GEMM_MAX_FLOPS_DEFAULT))
            if cut is not None:
                ms = float(model.predict_ms([cut[0]])[0])
                # no faster than the fastest of its largest samples
                rate = float(metrics.get("top_flops_per_s") or 0.0)
                s = max(ms * 1e-3 * cut[1] if ms == ms else 0.0,
                        costs[j].flops / rate if rate else 0.0)
                if s > seconds[j]:
                    seconds[j] = s
                    models[j] += f", scaled from {cut[1]:.1f}x smaller (beyond its range)"
        elif model.op_class in ("elementwise", "reduction", "memcpy"):
            top = metrics.get("max_bytes")
            if top and costs[j].bytes > top:
                seconds[j] = max(stream_floor_s(costs[j].bytes, device),
                                 costs[j].flops / device.vector_flops
                                 if device.vector_flops else 0.0)
                models[j] += ", at DRAM bandwidth (beyond its range)"


DEFAULT_SORT_NS = 6.6   # ns per n·log2(n) without a measurement (calibrate measured 6.6 on a Xeon VM)


def dense_bag_backward_sort_s(node: dict, device: DeviceSpec) -> float:
    """On the CPU an ``EmbeddingBag`` backward with a dense gradient (a data-parallel
    table) sorts its indices before it accumulates them (PyTorch's
    ``_embedding_bag_dense_backward``); the kernel models know the sparse backward, which
    does not.  The sort's time, ``sort_ns`` per n·log2(n) of the device (0 elsewhere)."""
    if node["name"] != "aten::_embedding_bag_backward" or not node.get("input_shapes"):
        return 0.0
    if any(n is not None for n in node.get("output_nnz") or []):
        return 0.0   # a sparse gradient: what the models were fitted on
    shapes = node["input_shapes"]
    n = math.prod(shapes[1]) if len(shapes) > 1 else 0
    if n < 2:
        return 0.0
    return (device.sort_ns or DEFAULT_SORT_NS) * 1e-9 * n * math.log2(n)


def _fold_fused(split, costs, seconds, models, floor_s):
    """The per-table costs of :func:`kernel_seconds` folded back into their fused ops."""
    out_costs, out_seconds, out_models, i = [], [], [], 0
    for parts in split:
        k = len(parts) if parts else 1
        cost, secs, model = costs[i:i + k], seconds[i:i + k], models[i:i + k]
        i += k
        if parts is None:
            out_costs.append(cost[0])
            out_seconds.append(secs[0])
            out_models.append(model[0])
            continue
        out_costs.append(KernelCost(cost[0].category, sum(c.flops for c in cost),
                                    sum(c.bytes for c in cost),
                                    fused_seconds([c.seconds for c in cost], floor_s),
                                    cost[0].model))
        out_seconds.append(fused_seconds(secs, floor_s))
        out_models.append(model[0] if cost[0].category == "view"
                          else f"{model[0]}, fused: {k} tables")
    return out_costs, out_seconds, out_models


def cost_op_graph(graph: nx.DiGraph, platform: Platform,
                  profile: DeviceProfile | None = None,
                  overheads: OverheadTable | None = None) -> CostedGraph:
    """Attach a kernel cost and CPU overheads to every op of ``graph``.

    A ``profile`` supplies the device figures, learned kernel models (per op class) and
    per-op overheads; whatever it lacks falls back to the roofline and the defaults.
    ``overheads`` replaces the profile's (e.g. measured from the user's own trace).
    A CPU profile's footprint curve scales every op's kernel and gap by the bytes the
    step writes (``devices.footprint``).
    """
    device = profile.device if profile is not None else device_spec(platform.device,
                                                                      platform.threads)
    if overheads is None:
        overheads = (profile.overheads if profile is not None and profile.overheads
                     else default_overheads(device.kind))
    order = sorted(graph.nodes)
    nodes = [graph.nodes[i] for i in order]
    costs, seconds, models = kernel_seconds(nodes, device, profile)
    scale = gap_scale = 1.0
    if profile is not None and profile.footprint_scale is not None and device.kind == "cpu":
        scale = profile.footprint_scale.at(step_footprint(graph))
        # the gaps too, where they are the profile's own (the curve was fitted with them)
        gap_scale = scale if overheads == profile.overheads else 1.0
    ops, previous, previous_bytes = [], None, 0.0
    # a gap fitted against the step's bytes too counts them (profiles.OverheadTable)
    step_bytes = ((step_footprint(graph) or 0.0)
                  if getattr(overheads, "gap_bytes", "op") == "op+step" else 0.0)
    for i, node, cost, sec, model in zip(order, nodes, costs, seconds, models):
        oh = overheads.for_op(node["name"], node["phase"], previous)
        if oh.t1_per_byte and cost.category != "view":  # size-dependent gap (profiles)
            oh = replace(oh, t1=oh.t1_at(cost.bytes + previous_bytes + step_bytes))
        sec *= scale
        if gap_scale != 1.0:
            oh = replace(oh, t1=oh.t1 * gap_scale)
        ops.append(CostedOp(i, node["name"], cost.category, node["thread"], node["phase"],
                            node["block"] or node["grad_fn"], shape_detail(node), sec,
                            cost.flops, cost.bytes, model,
                            tuple(sorted(graph.predecessors(i))), oh,
                            (node.get("lookup") or {}).get("table", "")))
        if cost.category != "view":
            previous, previous_bytes = node["name"], cost.bytes
    if getattr(overheads, "step_s_per_update", 0.0):   # this step's training loop
        updates = sum(1 for op in ops if op.phase == "optimizer" and op.category != "view")
        overheads = replace(overheads, step_s=overheads.step_tail_s(updates),
                            step_s_per_update=0.0)
    return CostedGraph(ops, device, overheads, platform, graph.graph.get("memory"), scale)
