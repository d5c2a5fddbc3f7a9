"""The editor: the one place where user intentions become undoable commands.

Views call these methods; each checks the request, then pushes one command on the undo stack
(or refuses with a message on ``sigMessage``).
"""
from __future__ import annotations

import copy

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from predictors.scenario.registry import BLOCK_KINDS, default_params

from .commands import (
    AddEdgeCommand,
    AddNodeCommand,
    MoveNodesCommand,
    RemoveEdgeCommand,
    RemoveNodesCommand,
    SetNameCommand,
    SetParallelismCommand,
    SetParamsCommand,
    SetPlatformCommand,
    SetTrainingCommand,
)
from .scenario_document import ScenarioDocument

__all__ = ["DocumentEditor", "FRAGMENT_FORMAT"]

# What Copy puts on the clipboard: blocks with their parameters and positions, and the edges
# among them, as JSON under this format name (and as plain text, so it can be read anywhere).
FRAGMENT_FORMAT = "ml-dse/blocks"


class DocumentEditor(QObject):
    """Owns the ``document`` and its ``undo_stack``; every edit is one undo step."""

    sigMessage = Signal(str)

    def __init__(self, document: ScenarioDocument | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.document = document if document is not None else ScenarioDocument(parent=self)
        self.undo_stack = QUndoStack(self)

    # -- whole document ---------------------------------------------------------------------

    def load(self, doc: dict) -> None:
        """Replace the document; the undo history starts afresh and counts as saved."""
        self.undo_stack.clear()
        self.document.load(doc)
        self.undo_stack.setClean()

    def is_modified(self) -> bool:
        return not self.undo_stack.isClean()

    def mark_saved(self) -> None:
        self.undo_stack.setClean()

    def _refuse(self, message: str) -> bool:
        self.sigMessage.emit(message)
        return False

    # -- blocks -----------------------------------------------------------------------------

    def add_block(self, kind: str, pos: tuple[float, float],
                  params: dict | None = None) -> str | None:
        """Add a block of ``kind`` centred at ``pos``; return its id (None if refused)."""
        if kind not in BLOCK_KINDS:
            self._refuse(f"Unknown block kind {kind!r}")
            return None
        node_id = self.document.new_node_id(kind)
        params = default_params(kind) if params is None else params
        self.undo_stack.push(AddNodeCommand(self.document, kind, params,
                                            (float(pos[0]), float(pos[1])), node_id))
        return node_id

    def delete(self, ids: list[str], edges: list[tuple[str, str]] = ()) -> None:
        """Delete blocks (with their edges) and, optionally, other edges: one undo step."""
        ids = [i for i in dict.fromkeys(ids) if self.document.has_node(i)]
        doomed = set(ids)
        # Edges of deleted blocks go with them; only the others need their own command.
        edges = [(s, t) for s, t in dict.fromkeys(edges)
                 if self.document.has_edge(s, t) and s not in doomed and t not in doomed]
        if not ids and not edges:
            return
        macro = len(edges) + bool(ids) > 1
        if macro:
            self.undo_stack.beginMacro("Delete selection")
        for s, t in edges:
            self.undo_stack.push(RemoveEdgeCommand(self.document, s, t))
        if ids:
            self.undo_stack.push(RemoveNodesCommand(self.document, ids))
        if macro:
            self.undo_stack.endMacro()

    # -- clipboard fragments ----------------------------------------------------------------

    def fragment(self, ids: list[str]) -> dict:
        """Blocks ``ids`` with their parameters, positions and the edges among them: what
        Copy puts on the clipboard (:data:`FRAGMENT_FORMAT`, plain JSON)."""
        ids = [i for i in dict.fromkeys(ids) if self.document.has_node(i)]
        chosen = set(ids)
        nodes = [{"id": i, "kind": self.document.node(i)["kind"],
                  "params": copy.deepcopy(self.document.node(i)["params"]),
                  "pos": list(self.document.position(i))} for i in ids]
        edges = [[e["source"], e["target"]] for e in self.document.snapshot()["model"]["edges"]
                 if e["source"] in chosen and e["target"] in chosen]
        return {"format": FRAGMENT_FORMAT, "nodes": nodes, "edges": edges}

    def paste(self, fragment: dict, offset: tuple[float, float] = (40.0, 40.0)) -> list[str]:
        """Add a copy of ``fragment``'s blocks (new ids, moved by ``offset``) and their
        edges as one undo step; return the new ids ([] for anything that is not a
        fragment, with a ``sigMessage``)."""
        nodes = fragment.get("nodes") if isinstance(fragment, dict) \
            and fragment.get("format") == FRAGMENT_FORMAT else None
        if not isinstance(nodes, list) or not nodes or not all(
                isinstance(n, dict) and n.get("kind") in BLOCK_KINDS for n in nodes):
            self._refuse("The clipboard holds no blocks to paste")
            return []
        new_ids: dict[str, str] = {}
        self.undo_stack.beginMacro(f"Paste {len(nodes)} block(s)")
        try:
            for n in nodes:
                pos = n.get("pos") if isinstance(n.get("pos"), list) else [0.0, 0.0]
                params = n.get("params") if isinstance(n.get("params"), dict) else None
                new = self.add_block(n["kind"], (float(pos[0]) + offset[0],
                                                 float(pos[1]) + offset[1]),
                                     copy.deepcopy(params))
                new_ids[str(n.get("id"))] = new
            for edge in fragment.get("edges") or []:
                if isinstance(edge, list) and len(edge) == 2 and all(
                        str(e) in new_ids for e in edge):
                    self.connect(new_ids[str(edge[0])], new_ids[str(edge[1])])
        finally:
            self.undo_stack.endMacro()
        return list(new_ids.values())

    def set_params(self, node_id: str, params: dict) -> bool:
        """Replace the parameters of a block; False (no step) when nothing changes."""
        if self.document.node(node_id)["params"] == params:
            return False
        self.undo_stack.push(SetParamsCommand(self.document, node_id, params))
        return True

    def move(self, ids: list[str], positions: list[tuple[float, float]]) -> bool:
        """Move blocks to new centres as one step; unmoved blocks are left out."""
        moved = [(i, (float(p[0]), float(p[1]))) for i, p in zip(ids, positions)
                 if self.document.position(i) != (float(p[0]), float(p[1]))]
        if not moved:
            return False
        self.undo_stack.push(MoveNodesCommand(self.document, [m[0] for m in moved],
                                              [m[1] for m in moved]))
        return True

    # -- edges ------------------------------------------------------------------------------

    def can_connect(self, source: str, target: str) -> tuple[bool, str]:
        """Whether ``source -> target`` may be added, and if not, why."""
        doc = self.document
        for end in (source, target):
            if not doc.has_node(end):
                return False, f"There is no block {end!r}"
        if source == target:
            return False, "A block cannot be connected to itself"
        if doc.has_edge(source, target):
            return False, f"{source} is already connected to {target}"
        src_kind = BLOCK_KINDS.get(doc.node(source)["kind"])
        dst_kind = BLOCK_KINDS.get(doc.node(target)["kind"])
        if src_kind is not None and not src_kind.has_output:
            return False, f"{src_kind.label} has no output"
        if dst_kind is not None and dst_kind.max_inputs is not None:
            if dst_kind.max_inputs == 0:
                return False, f"{dst_kind.label} takes no inputs"
            if len(doc.inputs(target)) >= dst_kind.max_inputs:
                return False, (f"{dst_kind.label} {target} takes at most "
                               f"{dst_kind.max_inputs} input(s)")
        if self._reaches(target, source):
            return False, f"Connecting {source} -> {target} would create a cycle"
        return True, ""

    def _reaches(self, start: str, goal: str) -> bool:
        children: dict[str, list[str]] = {}
        for s, t in self.document.edges():
            children.setdefault(s, []).append(t)
        stack, seen = [start], {start}
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            for child in children.get(node, ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return False

    def connect(self, source: str, target: str) -> bool:
        """Add the edge ``source -> target``; False, with a ``sigMessage``, if refused."""
        ok, why = self.can_connect(source, target)
        if not ok:
            return self._refuse(why)
        self.undo_stack.push(AddEdgeCommand(self.document, source, target))
        return True

    def delete_edge(self, source: str, target: str) -> None:
        if self.document.has_edge(source, target):
            self.undo_stack.push(RemoveEdgeCommand(self.document, source, target))

    # -- scenario settings ------------------------------------------------------------------

    def set_platform(self, platform: dict, positions: dict | None = None,
                     text: str = "Change platform") -> bool:
        """Replace the platform (and its canvas positions) as one undo step named
        ``text``; False when nothing changes."""
        current = self.document.platform()
        if platform == current and (
                positions is None or positions == self.document.platform_positions()):
            return False
        if positions is None and "preset" in platform and platform.get("preset") != \
                current.get("preset"):
            positions = {}  # another preset: the old graph's positions would not fit it
        self.undo_stack.push(SetPlatformCommand(self.document, platform, positions, text))
        return True

    def set_training(self, training: dict) -> bool:
        if training == self.document.training():
            return False
        self.undo_stack.push(SetTrainingCommand(self.document, training))
        return True

    def set_parallelism(self, parallelism: dict, text: str = "Change sharding") -> bool:
        """Replace the scenario's parallelism section (e.g. apply a ranked sharding plan)
        as one undo step named ``text``."""
        if parallelism == self.document.parallelism():
            return False
        self.undo_stack.push(SetParallelismCommand(self.document, parallelism, text))
        return True

    def set_name(self, name: str) -> bool:
        if name == self.document.name:
            return False
        self.undo_stack.push(SetNameCommand(self.document, name))
        return True
