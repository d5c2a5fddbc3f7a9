"""Which recorded ops a dispatch-level capture sees.

The profiler nests ops (``aten::linear`` > ``aten::addmm`` > ``aten::empty``); the
capture (:mod:`predictors.model.capture`, a ``TorchDispatchMode``) sees the ops that reach the
dispatcher below autograd, and the simulator walks exactly those.  Overheads measured on
any other level (the leaves, say) land on names the simulator never asks for.  A recorded
op is *dispatch-level* when it is an aten compute op (not a view), no captured or
dispatch-level op encloses it, and it is not a composite wrapper of captured ops.

"Captured" is either known (a calibration captures the traced scenario) or, for a trace
of an unknown model, every aten op torch does not decompose before the dispatcher (no
``CompositeImplicitAutograd`` kernel): ``aten::native_layer_norm`` but not
``aten::layer_norm``, ``aten::addmm`` but not ``aten::linear``.
"""
from __future__ import annotations

import functools

import numpy as np

from ..model.op_classes import classify
from .kineto import Kind, KinetoTrace

__all__ = ["nest", "dispatch_level_ops", "fused_token", "dispatched_names",
           "innermost_ops", "runtime_calls_per_op"]


def nest(tr: KinetoTrace, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, parent)``: ``sel`` sorted per thread by (start, -duration), and each
    one's enclosing event of ``sel`` on its thread (-1: none; indexed by event)."""
    order = sel[np.lexsort((-tr.dur[sel], tr.ts[sel], tr.thread[sel]))]
    parent = np.full(len(tr), -1, np.int64)
    stack: list[int] = []
    current = None
    for i in order.tolist():
        if tr.thread[i] != current:
            stack, current = [], tr.thread[i]
        while stack and tr.ts[stack[-1]] + tr.dur[stack[-1]] <= tr.ts[i]:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return order, parent


def dispatch_level_ops(tr: KinetoTrace, order: np.ndarray, parent: np.ndarray,
                       captured: set[str]) -> list[int]:
    """The dispatch-level ops among ``order`` (see the module doc), sorted by start."""
    names = {i: tr.names[tr.name_id[i]] for i in order.tolist()}
    wraps: dict[int, bool] = {}
    for i in reversed(order.tolist()):  # children before their parents
        p = int(parent[i])
        if p >= 0 and (names[i] in captured or wraps.get(i, False)):
            wraps[p] = True
    covered: dict[int, bool] = {}
    out: set[int] = set()
    for i in order.tolist():  # parents before their children
        p = int(parent[i])
        covered[i] = p >= 0 and (covered[p] or names[p] in captured or p in out)
        if (names[i].startswith("aten::") and classify(names[i]) != "view"
                and not covered[i] and (names[i] in captured or not wraps.get(i, False))):
            out.add(i)
    return sorted(out, key=lambda i: (tr.ts[i], -tr.dur[i]))


def fused_token(name: str) -> str:
    """The name an alignment compares: every fused attention kernel family (flash,
    memory-efficient, cuDNN; torch picks one per GPU and version) is one token."""
    if "scaled_dot_product" in name or "attention" in name:
        return "attention_backward" if "backward" in name else "attention"
    return name


@functools.lru_cache(maxsize=4096)
def _reaches_dispatch(name: str) -> bool:
    """Whether the aten op ``name`` reaches a dispatch-level capture: some functional
    overload of it has no ``CompositeImplicitAutograd`` kernel.  Unknown ops (another
    torch) count."""
    import torch  # deferred: torch

    base = name.removeprefix("aten::")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return True
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    known = False
    for overload in packet.overloads():
        if overload == "out" or overload.endswith("_out"):
            continue  # ``out=`` variants have kernels of their own; a model never calls them
        full = name if overload == "default" else f"{name}.{overload}"
        try:
            composite = has(full, "CompositeImplicitAutograd")
        except RuntimeError:  # a TorchScript-only overload (``to.prim_Device``)
            continue
        known = True
        if not composite:
            return True
    return not known


def dispatched_names(names) -> set[str]:
    """The aten op names among ``names`` that a dispatch-level capture records."""
    return {n for n in names if n.startswith("aten::") and _reaches_dispatch(n)}


def innermost_ops(tr: KinetoTrace, ops=None) -> np.ndarray:
    """Per event, the innermost ``cpu_op`` of its thread that encloses it (-1: none).

    Computed for runtime calls (the launches); other events get -1.  (``ops``, the
    trace's :class:`~predictors.traces.ops.CpuOps`, is not needed.)"""
    out = np.full(len(tr), -1, np.int64)
    cpu = np.flatnonzero(tr.kind == Kind.CPU_OP)
    rt = np.flatnonzero(tr.kind == Kind.RUNTIME)
    if not len(cpu) or not len(rt):
        return out
    ev = np.concatenate([cpu, rt])
    is_op = np.concatenate([np.ones(len(cpu), bool), np.zeros(len(rt), bool)])
    # Per thread by start; an op sorts before a call starting at the same time.
    order = np.lexsort((~is_op, -tr.dur[ev], tr.ts[ev], tr.thread[ev]))
    ev, is_op = ev[order], is_op[order]
    ts, end, thr = tr.ts[ev], tr.ts[ev] + tr.dur[ev], tr.thread[ev]
    stack: list[tuple[float, int]] = []
    current = -1
    for i in range(len(ev)):
        if thr[i] != current:
            stack, current = [], thr[i]
        t = ts[i]
        while stack and stack[-1][0] < t:
            stack.pop()
        if is_op[i]:
            stack.append((end[i], int(ev[i])))
        elif stack:
            out[ev[i]] = stack[-1][1]
    return out


def runtime_calls_per_op(tr: KinetoTrace, calls: np.ndarray, parent: np.ndarray,
                         ops: set[int]) -> dict[int, list[int]]:
    """Runtime calls ``calls`` grouped by the op of ``ops`` that encloses them (through
    the ops nested inside it), each group in call order."""
    inner = innermost_ops(tr)
    out: dict[int, list[int]] = {}
    for c in calls[np.argsort(tr.ts[calls], kind="stable")].tolist():
        e = int(inner[c])
        while e >= 0 and e not in ops:
            e = int(parent[e])
        if e >= 0:
            out.setdefault(e, []).append(c)
    return out
