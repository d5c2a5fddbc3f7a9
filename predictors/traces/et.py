"""PyTorch execution traces (ET 1.0.x) and Chakra host traces (1.1.x JSON), and their link
to the Kineto trace recorded beside them.

ET nodes carry the op graph (names, shapes, tensor ids, parents); Kineto carries the times.
They are linked by ``rf_id`` <-> ``Record function id`` (PyTorch >= 2.1), or ``rf_id`` <->
``External id`` (some 2023 traces), and where neither matches, as in traces whose Kineto
side has no ``Record function id``, by aligning the two op sequences per thread by name
(a longest-common-subsequence alignment, as Chakra's trace linker falls back to).
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

import numpy as np
import orjson

from .kineto import Kind, KinetoTrace, TraceError, read_json_bytes

__all__ = ["EtNode", "ExecutionTrace", "read_et", "EtLink", "link_et"]

_SKIP_PREFIX = ("[pytorch|profiler|execution_", "## ")


@dataclass
class EtNode:
    """One op of an execution trace."""

    id: int
    name: str
    rf_id: int
    parent: int
    tid: int
    input_shapes: list = field(default_factory=list)
    output_shapes: list = field(default_factory=list)


@dataclass
class ExecutionTrace:
    """An execution trace: its schema and nodes in execution order (by id)."""

    path: str
    schema: str
    nodes: list[EtNode]

    @property
    def file(self) -> str:
        return os.path.basename(self.path)

    def ops(self) -> list[EtNode]:
        """Operator nodes (not the root, thread and annotation nodes)."""
        return [n for n in self.nodes if not n.name.startswith(_SKIP_PREFIX)]


def _attr(node: dict, key: str, default=None):
    if key in node:
        return node[key]
    attrs = node.get("attrs")
    if isinstance(attrs, list):
        for a in attrs:
            if isinstance(a, dict) and a.get("name") == key:
                return a.get("value", default)
    return default


def read_et(path: str | os.PathLike) -> ExecutionTrace:
    """Read a PyTorch ET (``schema`` 1.0.x) or a Chakra host trace (``1.1.x-chakra...``)."""
    name = os.path.basename(path)
    data = read_json_bytes(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        what = "truncated JSON" if exc.pos >= len(data.rstrip()) - 1 else "not JSON"
        raise TraceError(f"{name}: {what} ({str(exc).split(':')[0]} at byte {exc.pos})") \
            from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise TraceError(f"{name}: not an execution trace (no 'nodes' array)")
    schema = str(doc.get("schema", ""))
    if not schema.startswith(("1.0.", "1.1.")):
        raise TraceError(f"{name}: schema {schema!r} is not ET 1.0.x or Chakra 1.1.x")
    nodes = []
    for i, n in enumerate(doc["nodes"]):
        if not isinstance(n, dict):
            raise TraceError(f"{name}: node {i} is not an object")
        try:
            ins = n.get("inputs")
            outs = n.get("outputs")
            in_shapes = ins.get("shapes", []) if isinstance(ins, dict) else \
                n.get("input_shapes", [])
            out_shapes = outs.get("shapes", []) if isinstance(outs, dict) else \
                n.get("output_shapes", [])
            parent = n.get("parent", n.get("ctrl_deps", -1))
            nodes.append(EtNode(int(n["id"]), str(n.get("name", "")),
                                int(_attr(n, "rf_id", -1)), int(parent if parent is not None
                                                                 else -1),
                                int(_attr(n, "tid", 0)), in_shapes, out_shapes))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"{name}: node {i}: a field is missing or has the wrong type "
                             f"({exc})") from None
    nodes.sort(key=lambda x: x.id)
    return ExecutionTrace(os.fspath(path), schema, nodes)


@dataclass
class EtLink:
    """ET node id -> Kineto event index, and how they were matched."""

    pairs: dict[int, int]
    method: str  # "rf_id=Record function id" | "rf_id=External id" | "sequence alignment"
    et_ops: int
    kineto_ops: int

    @property
    def coverage(self) -> float:
        """Fraction of the ET's operator nodes that found their Kineto op."""
        return len(self.pairs) / max(self.et_ops, 1)


def _by_id(et_ops, kineto_ids, ops_idx, names, et_names) -> dict[int, int]:
    index = {}
    for i, k in zip(ops_idx.tolist(), kineto_ids.tolist()):
        if k >= 0:
            index.setdefault(k, i)
    pairs = {}
    for n in et_ops:
        i = index.get(n.rf_id)
        if i is not None and names[i] == n.name:
            pairs[n.id] = i
    return pairs


def link_et(et: ExecutionTrace, trace: KinetoTrace) -> EtLink:
    """Match ``et``'s operator nodes to ``trace``'s ``cpu_op`` events."""
    et_ops = et.ops()
    ops_idx = np.flatnonzero(trace.kind == Kind.CPU_OP)
    names = [trace.names[j] for j in trace.name_id]
    n_k = len(ops_idx)
    best: tuple[dict, str] = ({}, "")
    for ids, method in ((trace.rf[ops_idx], "rf_id=Record function id"),
                        (trace.ext[ops_idx], "rf_id=External id")):
        if (ids >= 0).any():
            pairs = _by_id(et_ops, ids, ops_idx, names, None)
            if len(pairs) > len(best[0]):
                best = (pairs, method)
    if len(best[0]) >= 0.5 * len(et_ops) and et_ops:
        return EtLink(best[0], best[1], len(et_ops), n_k)
    # Fallback: align the name sequences, thread by thread in recorded order.
    pairs: dict[int, int] = {}
    order = ops_idx[np.lexsort((trace.ts[ops_idx],))]
    k_threads: dict[int, list[int]] = {}
    for i in order.tolist():
        k_threads.setdefault(int(trace.thread[i]), []).append(i)
    e_threads: dict[int, list[EtNode]] = {}
    for n in et_ops:
        e_threads.setdefault(n.tid, []).append(n)
    free_k = set(k_threads)
    for tid, nodes in sorted(e_threads.items(), key=lambda kv: -len(kv[1])):
        seq_e = [n.name for n in nodes]
        best_t, best_m = None, None
        for t in free_k:  # the Kineto thread whose op names align best with this ET thread
            seq_k = [names[i] for i in k_threads[t]]
            m = difflib.SequenceMatcher(None, seq_e, seq_k, autojunk=False)
            size = sum(b.size for b in m.get_matching_blocks())
            if best_m is None or size > best_m[0]:
                best_t, best_m = t, (size, m)
        if best_t is None:
            continue
        free_k.discard(best_t)
        for b in best_m[1].get_matching_blocks():
            for j in range(b.size):
                pairs[nodes[b.a + j].id] = k_threads[best_t][b.b + j]
    return EtLink(pairs, "sequence alignment", len(et_ops), n_k)
