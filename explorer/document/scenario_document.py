"""The live scenario being edited: a plain dict behind a QObject that announces every change.

Views (canvas, inspector, main window) subscribe to the signals; edits arrive through the
low-level methods below, which undo commands call.  Nothing here goes through the undo stack.
"""
from __future__ import annotations

import copy
import math

from PySide6.QtCore import QObject, Signal

from predictors.scenario.format import (
    FORMAT,
    VERSION,
    Issue,
    ScenarioError,
    validate_scenario,
)
from predictors.scenario.registry import BLOCK_KINDS, default_params

__all__ = ["ScenarioDocument", "empty_scenario", "DEFAULT_TRAINING"]

DEFAULT_TRAINING = {"batch_size": 128, "optimizer": "sgd", "dtype": "float32", "lr": 0.01}

# Spacing of the automatic layout, in scene units; blocks are 200 x 64.
_LAYER_DY = 120.0
_COLUMN_DX = 260.0


def empty_scenario(name: str = "Untitled") -> dict:
    """A new scenario with no blocks, on the local CPU."""
    return {"format": FORMAT, "version": VERSION, "name": name,
            "model": {"nodes": [], "edges": []},
            "platform": {"preset": "local-cpu"},
            "training": dict(DEFAULT_TRAINING),
            "parallelism": {"embedding_sharding": "auto"},
            "layout": {"model": {}}}


def _auto_layout(nodes: list[dict], edges: list[dict], known: dict) -> dict:
    """Positions for the nodes missing from ``known``: one row per graph depth."""
    depth = {n["id"]: 0 for n in nodes}
    # Longest-path depth by relaxation; bounded by the node count so a cycle cannot hang it.
    for _ in range(len(nodes)):
        changed = False
        for e in edges:
            s, t = e.get("source"), e.get("target")
            if s in depth and t in depth and depth[t] < depth[s] + 1 <= len(nodes):
                depth[t] = depth[s] + 1
                changed = True
        if not changed:
            break
    out, used = {}, {}
    for n in nodes:
        if n["id"] in known:
            continue
        d = depth[n["id"]]
        column = used.get(d, 0)
        used[d] = column + 1
        out[n["id"]] = [column * _COLUMN_DX, d * _LAYER_DY]
    return out



def _is_position(v) -> bool:
    """``[x, y]`` of finite numbers (a hand-edited file may hold anything)."""
    return (isinstance(v, (list, tuple)) and len(v) == 2
            and all(type(c) in (int, float) and math.isfinite(c) for c in v))

class ScenarioDocument(QObject):
    """The scenario as a plain dict, with a signal per kind of change.

    Positions (``layout.model``) are the centres of the blocks in scene coordinates.
    """

    sigNodeAdded = Signal(str)
    sigNodeRemoved = Signal(str)
    sigNodeChanged = Signal(str)
    sigNodeMoved = Signal(str)
    sigEdgeAdded = Signal(str, str)
    sigEdgeRemoved = Signal(str, str)
    sigPlatformChanged = Signal()
    sigTrainingChanged = Signal()
    sigParallelismChanged = Signal()
    sigNameChanged = Signal(str)
    sigReset = Signal()
    sigChanged = Signal()

    def __init__(self, doc: dict | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self._doc: dict = {}
        self._issues: list[Issue] | None = None
        self._set(doc if doc is not None else empty_scenario())

    # -- whole document ---------------------------------------------------------------------

    def _set(self, doc: dict) -> None:
        doc = copy.deepcopy(doc)
        base = empty_scenario(doc.get("name", "Untitled") if isinstance(doc, dict) else "")
        for key, value in base.items():
            doc.setdefault(key, value)
        model = doc["model"] if isinstance(doc["model"], dict) else {}
        # Keep only well-formed records so the views never crash; validation reports the rest.
        model["nodes"] = [n for n in model.get("nodes", []) if isinstance(n, dict)
                          and isinstance(n.get("id"), str)]
        for n in model["nodes"]:
            n.setdefault("params", {})
        ids = {n["id"] for n in model["nodes"]}
        model["edges"] = [e for e in model.get("edges", []) if isinstance(e, dict)
                          and e.get("source") in ids and e.get("target") in ids]
        doc["model"] = model
        layout = doc["layout"] if isinstance(doc["layout"], dict) else {}
        positions = layout.get("model") if isinstance(layout.get("model"), dict) else {}
        positions = {k: [float(v[0]), float(v[1])] for k, v in positions.items()
                     if k in ids and _is_position(v)}  # bad entries are laid out afresh
        positions.update(_auto_layout(model["nodes"], model["edges"], positions))
        layout["model"] = positions
        if "platform" in layout:  # the platform canvas's, kept only where it was saved
            where = layout["platform"] if isinstance(layout["platform"], dict) else {}
            layout["platform"] = {k: [float(v[0]), float(v[1])] for k, v in where.items()
                                  if isinstance(k, str) and _is_position(v)}
        doc["layout"] = layout
        self._doc = doc
        self._issues = None

    def load(self, doc: dict) -> None:
        """Replace the whole document (a deep copy of ``doc``)."""
        self._set(doc)
        self.sigReset.emit()
        self.sigChanged.emit()

    def snapshot(self) -> dict:
        """A deep copy of the document: what a worker or a save gets."""
        return copy.deepcopy(self._doc)

    @property
    def name(self) -> str:
        return self._doc.get("name", "")

    def set_name(self, name: str) -> None:
        self._doc["name"] = name
        self._issues = None
        self.sigNameChanged.emit(name)
        self.sigChanged.emit()

    def _edited(self) -> None:
        self._issues = None
        self.sigChanged.emit()

    # -- queries ----------------------------------------------------------------------------

    def _nodes(self) -> list[dict]:
        return self._doc["model"]["nodes"]

    def _edges(self) -> list[dict]:
        return self._doc["model"]["edges"]

    def _index(self, node_id: str) -> int:
        for i, n in enumerate(self._nodes()):
            if n["id"] == node_id:
                return i
        raise KeyError(f"no block with id {node_id!r}")

    def has_node(self, node_id: str) -> bool:
        return any(n["id"] == node_id for n in self._nodes())

    def node(self, node_id: str) -> dict:
        """A copy of the node record ``{"id", "kind", "params"}``."""
        return copy.deepcopy(self._nodes()[self._index(node_id)])

    def node_index(self, node_id: str) -> int:
        """The position of the node in ``model.nodes`` (undo restores it there)."""
        return self._index(node_id)

    def node_ids(self) -> list[str]:
        return [n["id"] for n in self._nodes()]

    def edges(self) -> list[tuple[str, str]]:
        return [(e["source"], e["target"]) for e in self._edges()]

    def has_edge(self, source: str, target: str) -> bool:
        return (source, target) in self.edges()

    def edge_index(self, source: str, target: str) -> int:
        """The position of the edge in ``model.edges``; input order matters to some blocks."""
        return self.edges().index((source, target))

    def inputs(self, node_id: str) -> list[str]:
        return [s for s, t in self.edges() if t == node_id]

    def outputs(self, node_id: str) -> list[str]:
        return [t for s, t in self.edges() if s == node_id]

    def position(self, node_id: str) -> tuple[float, float]:
        x, y = self._doc["layout"]["model"].get(node_id, (0.0, 0.0))
        return float(x), float(y)

    def platform(self) -> dict:
        return copy.deepcopy(self._doc["platform"])

    def platform_positions(self) -> dict:
        """Where the platform canvas draws each device (``layout.platform``)."""
        return copy.deepcopy(self._doc["layout"].get("platform", {}))

    def training(self) -> dict:
        return copy.deepcopy(self._doc["training"])

    def parallelism(self) -> dict:
        return copy.deepcopy(self._doc.get("parallelism") or {"embedding_sharding": "auto"})

    def new_node_id(self, kind: str) -> str:
        """An unused id: ``mlp``, then ``mlp_2``, ``mlp_3``..."""
        used = set(self.node_ids())
        if kind not in used:
            return kind
        n = 2
        while f"{kind}_{n}" in used:
            n += 1
        return f"{kind}_{n}"

    def issues(self) -> list[Issue]:
        """The problems of the current document; empty when it validates."""
        if self._issues is None:
            try:
                validate_scenario(self.snapshot())
                self._issues = []
            except ScenarioError as exc:
                self._issues = list(exc.issues)
        return list(self._issues)

    def node_issues(self, node_id: str) -> list[Issue]:
        return [i for i in self.issues() if i.node_id == node_id]

    # -- edits (called by undo commands) ---------------------------------------------------

    def add_node(self, kind: str, params: dict | None = None,
                 pos: tuple[float, float] = (0.0, 0.0), node_id: str | None = None,
                 index: int | None = None) -> str:
        """Add a block; ``index`` puts it back where an undone removal took it from."""
        node_id = node_id or self.new_node_id(kind)
        if self.has_node(node_id):
            raise ValueError(f"a block with id {node_id!r} already exists")
        if params is None:
            params = default_params(kind) if kind in BLOCK_KINDS else {}
        record = {"id": node_id, "kind": kind, "params": copy.deepcopy(params)}
        nodes = self._nodes()
        nodes.insert(len(nodes) if index is None else index, record)
        self._doc["layout"]["model"][node_id] = [float(pos[0]), float(pos[1])]
        self.sigNodeAdded.emit(node_id)
        self._edited()
        return node_id

    def remove_node(self, node_id: str) -> list[tuple[str, str]]:
        """Remove a block and its edges (each announced first); return the edges removed."""
        index = self._index(node_id)
        removed = [(s, t) for s, t in self.edges() if node_id in (s, t)]
        for s, t in removed:
            self.remove_edge(s, t)
        del self._nodes()[index]
        self._doc["layout"]["model"].pop(node_id, None)
        self.sigNodeRemoved.emit(node_id)
        self._edited()
        return removed

    def set_params(self, node_id: str, params: dict) -> None:
        self._nodes()[self._index(node_id)]["params"] = copy.deepcopy(params)
        self.sigNodeChanged.emit(node_id)
        self._edited()

    def move_node(self, node_id: str, pos: tuple[float, float]) -> None:
        self._index(node_id)
        self._doc["layout"]["model"][node_id] = [float(pos[0]), float(pos[1])]
        self.sigNodeMoved.emit(node_id)
        # The layout does not affect validation, so the cached issues stay.
        self.sigChanged.emit()

    def add_edge(self, source: str, target: str, index: int | None = None) -> None:
        self._index(source)
        self._index(target)
        if self.has_edge(source, target):
            raise ValueError(f"edge {source!r} -> {target!r} already exists")
        edges = self._edges()
        edges.insert(len(edges) if index is None else index,
                     {"source": source, "target": target})
        self.sigEdgeAdded.emit(source, target)
        self._edited()

    def remove_edge(self, source: str, target: str) -> None:
        del self._edges()[self.edge_index(source, target)]
        self.sigEdgeRemoved.emit(source, target)
        self._edited()

    def set_platform(self, platform: dict, positions: dict | None = None) -> None:
        """Replace the platform (and, when given, its devices' canvas positions)."""
        self._doc["platform"] = copy.deepcopy(platform)
        if positions is not None:
            self._doc["layout"]["platform"] = copy.deepcopy(positions)
        self.sigPlatformChanged.emit()
        self._edited()

    def set_training(self, training: dict) -> None:
        self._doc["training"] = copy.deepcopy(training)
        self.sigTrainingChanged.emit()
        self._edited()

    def set_parallelism(self, parallelism: dict) -> None:
        self._doc["parallelism"] = copy.deepcopy(parallelism)
        self.sigParallelismChanged.emit()
        self._edited()
