"""Cost a captured op graph on a platform: kernel durations plus CPU overheads per op."""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from .overheads import Overheads, default_overheads
from .platforms import Platform
from .roofline import kernel_cost
from .specs import DeviceSpec, device_spec

__all__ = ["CostedOp", "CostedGraph", "cost_op_graph", "shape_detail"]


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


@dataclass
class CostedGraph:
    ops: list[CostedOp]
    device: DeviceSpec
    overheads: Overheads
    platform: Platform


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


def cost_op_graph(graph: nx.DiGraph, platform: Platform,
                  overheads: Overheads | None = None) -> CostedGraph:
    """Attach a kernel cost to every op of ``graph`` for ``platform``'s device."""
    device = device_spec(platform.device, platform.threads)
    overheads = overheads or default_overheads(device.kind)
    ops = []
    for i in sorted(graph.nodes):
        node = graph.nodes[i]
        cost = kernel_cost(node, device)
        ops.append(CostedOp(i, node["name"], cost.category, node["thread"], node["phase"],
                            node["block"] or node["grad_fn"], shape_detail(node), cost.seconds,
                            cost.flops, cost.bytes, cost.model,
                            tuple(sorted(graph.predecessors(i)))))
    return CostedGraph(ops, device, overheads, platform)
