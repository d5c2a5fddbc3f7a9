"""One undo command per kind of edit.  ``redo``/``undo`` only call document methods.

Each command captures what it needs to undo when it is built (or on its first ``redo``), so
replaying the stack restores ids, list positions and edges exactly.
"""
from __future__ import annotations

import copy

from PySide6.QtGui import QUndoCommand

from .scenario_document import ScenarioDocument

__all__ = ["AddNodeCommand", "RemoveNodesCommand", "SetParamsCommand", "MoveNodesCommand",
           "AddEdgeCommand", "RemoveEdgeCommand", "SetPlatformCommand", "SetTrainingCommand",
           "SetParallelismCommand", "SetNameCommand"]

# Ids for QUndoCommand.mergeWith: consecutive moves of the same blocks merge.
_MOVE_ID = 1001


class AddNodeCommand(QUndoCommand):
    """Add a block with a fixed id, so redo after undo recreates the same one."""

    def __init__(self, document: ScenarioDocument, kind: str, params: dict,
                 pos: tuple[float, float], node_id: str):
        super().__init__(f"Add {node_id}")
        self.document, self.kind, self.node_id = document, kind, node_id
        self.params, self.pos = copy.deepcopy(params), tuple(pos)

    def redo(self):
        self.document.add_node(self.kind, self.params, self.pos, self.node_id)

    def undo(self):
        self.document.remove_node(self.node_id)


class RemoveNodesCommand(QUndoCommand):
    """Remove blocks with their edges; undo puts both back at their list positions."""

    def __init__(self, document: ScenarioDocument, node_ids: list[str]):
        names = ", ".join(node_ids)
        super().__init__(f"Delete {names}" if len(node_ids) < 4 else
                         f"Delete {len(node_ids)} blocks")
        self.document = document
        # Sorted by list position so undo can reinsert in ascending order.
        self.nodes = sorted(((document.node_index(i), document.node(i), document.position(i))
                             for i in node_ids), key=lambda r: r[0])
        doomed = set(node_ids)
        self.edges = [(k, s, t) for k, (s, t) in enumerate(document.edges())
                      if s in doomed or t in doomed]

    def redo(self):
        for _, record, _ in self.nodes:
            self.document.remove_node(record["id"])

    def undo(self):
        for index, record, pos in self.nodes:
            self.document.add_node(record["kind"], record["params"], pos, record["id"], index)
        for index, s, t in self.edges:
            self.document.add_edge(s, t, index)


class SetParamsCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, node_id: str, params: dict):
        super().__init__(f"Edit {node_id}")
        self.document, self.node_id = document, node_id
        self.old = document.node(node_id)["params"]
        self.new = copy.deepcopy(params)

    def redo(self):
        self.document.set_params(self.node_id, self.new)

    def undo(self):
        self.document.set_params(self.node_id, self.old)


class MoveNodesCommand(QUndoCommand):
    """Move blocks; ``old`` defaults to their current document positions."""

    def __init__(self, document: ScenarioDocument, node_ids: list[str],
                 positions: list[tuple[float, float]],
                 old: list[tuple[float, float]] | None = None, merge: bool = False):
        super().__init__("Move " + (node_ids[0] if len(node_ids) == 1 else
                                    f"{len(node_ids)} blocks"))
        self.document, self.node_ids, self.merge = document, list(node_ids), merge
        self.new = [tuple(p) for p in positions]
        self.old = [tuple(p) for p in old] if old is not None else \
            [document.position(i) for i in node_ids]

    def id(self):
        # Only opted-in moves (keyboard nudges) merge; two separate drags stay two steps.
        return _MOVE_ID if self.merge else -1

    def mergeWith(self, other):
        if not isinstance(other, MoveNodesCommand) or other.node_ids != self.node_ids \
                or not other.merge:
            return False
        self.new = other.new
        return True

    def redo(self):
        for node_id, pos in zip(self.node_ids, self.new):
            self.document.move_node(node_id, pos)

    def undo(self):
        for node_id, pos in zip(self.node_ids, self.old):
            self.document.move_node(node_id, pos)


class AddEdgeCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, source: str, target: str):
        super().__init__(f"Connect {source} -> {target}")
        self.document, self.source, self.target = document, source, target

    def redo(self):
        self.document.add_edge(self.source, self.target)

    def undo(self):
        self.document.remove_edge(self.source, self.target)


class RemoveEdgeCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, source: str, target: str):
        super().__init__(f"Disconnect {source} -> {target}")
        self.document, self.source, self.target = document, source, target
        self.index = document.edge_index(source, target)

    def redo(self):
        self.document.remove_edge(self.source, self.target)

    def undo(self):
        self.document.add_edge(self.source, self.target, self.index)


class SetPlatformCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, platform: dict,
                 positions: dict | None = None, text: str = "Change platform"):
        super().__init__(text)
        self.document, self.old, self.new = document, document.platform(), copy.deepcopy(platform)
        self.old_pos = document.platform_positions()
        self.new_pos = copy.deepcopy(positions) if positions is not None else self.old_pos

    def redo(self):
        self.document.set_platform(self.new, self.new_pos)

    def undo(self):
        self.document.set_platform(self.old, self.old_pos)


class SetTrainingCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, training: dict):
        super().__init__("Change training settings")
        self.document, self.old, self.new = document, document.training(), copy.deepcopy(training)

    def redo(self):
        self.document.set_training(self.new)

    def undo(self):
        self.document.set_training(self.old)


class SetParallelismCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, parallelism: dict, text: str):
        super().__init__(text)
        self.document, self.old = document, document.parallelism()
        self.new = copy.deepcopy(parallelism)

    def redo(self):
        self.document.set_parallelism(self.new)

    def undo(self):
        self.document.set_parallelism(self.old)


class SetNameCommand(QUndoCommand):
    def __init__(self, document: ScenarioDocument, name: str):
        super().__init__("Rename scenario")
        self.document, self.old, self.new = document, document.name, name

    def redo(self):
        self.document.set_name(self.new)

    def undo(self):
        self.document.set_name(self.old)
