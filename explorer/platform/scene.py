"""The platform canvas: devices (GPUs, CPUs, NVSwitches, PCIe switches, NICs, hosts) and the
links between them, drawn from the document and edited only through the editor.

A preset shows as its graph (:func:`predictors.hardware.platforms.preset_graph`); the first
edit that changes devices or links turns it into a custom graph, in the same undo step.
Moving devices only changes their canvas positions (``layout.platform``).  Shift-drag from
one device to another links them; the link's kind defaults from its ends and the GPU
generation, and can be changed afterwards.
"""
from __future__ import annotations

import copy
import re

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsLineItem,
    QGraphicsObject,
    QGraphicsPathItem,
    QGraphicsScene,
)

from predictors.hardware.platforms import (
    GPU_MODELS,
    LINK_KINDS,
    LINK_LABELS,
    PLATFORM_PRESETS,
    gpu_device_name,
    gpu_nvlink,
    preset_graph,
)
from predictors.hardware.specs import find_gpu_spec

from ..widgets.theme_colors import DARK_CANVAS, canvas_colors
from .routing import LABEL_H, LABEL_W, curve_point, label_box, link_path, place_labels, route_bend

__all__ = ["PlatformScene", "DeviceItem", "LinkItem", "DEVICE_KINDS", "default_link",
           "effective_graph", "auto_positions", "DEVICE_MIME"]

DEVICE_MIME = "application/x-ml-dse-device"
# kind -> (label, colour)
DEVICE_KINDS = {"gpu": ("GPU", "#16966b"), "cpu": ("CPU", "#2f6fd6"),
                "nvswitch": ("NVSwitch", "#7c4dcc"), "pcie_switch": ("PCIe switch", "#8a6d3b"),
                "nic": ("NIC", "#d9822b"), "node": ("Host", "#6b7280")}
DEV_W, DEV_H = 150.0, 52.0
_ROWS = {"node": 0, "cpu": 0, "gpu": 1, "nvswitch": 2, "pcie_switch": 2, "nic": 3}


def effective_graph(platform) -> dict:
    """The graph the canvas shows: a preset's own graph (threads carried over), or the
    custom graph itself, cleaned of entries it cannot draw (the error bar names them):
    nodes need a string id and a known kind, params must be an object, edges need string
    ends and a string kind."""
    if not isinstance(platform, dict):
        return {"nodes": [], "edges": []}
    preset = platform.get("preset")
    if isinstance(preset, str) and preset in PLATFORM_PRESETS:
        graph = preset_graph(preset)
        if "threads" in platform:
            for n in graph["nodes"]:
                if n["kind"] == "cpu":
                    n.setdefault("params", {})["threads"] = platform["threads"]
        return graph
    nodes, seen = [], set()
    for n in platform.get("nodes", []) if isinstance(platform.get("nodes"), list) else []:
        if (isinstance(n, dict) and isinstance(n.get("id"), str) and n["id"] not in seen
                and n.get("kind") in DEVICE_KINDS):
            seen.add(n["id"])
            node = {"id": n["id"], "kind": n["kind"]}
            if isinstance(n.get("params"), dict):
                node["params"] = copy.deepcopy(n["params"])
            nodes.append(node)
    edges = [copy.deepcopy(e) for e in (platform.get("edges", [])
                                        if isinstance(platform.get("edges"), list) else [])
             if isinstance(e, dict) and e.get("source") in seen and e.get("target") in seen
             and isinstance(e.get("kind"), str)]
    return {"nodes": nodes, "edges": edges}


def gpu_model_of(graph: dict) -> str:
    return next(((n.get("params") or {}).get("model", "a100") for n in graph["nodes"]
                 if n.get("kind") == "gpu"), "a100")


def default_link(kind_a: str, kind_b: str, model: str) -> str:
    """A sensible link kind between two devices: NVLink of the GPUs' generation between
    GPUs and to an NVSwitch (PCIe 4.0 for GPUs without NVLink: L4, L40S), PCIe to a PCIe
    switch or a CPU, the 400G NIC where a NIC is at one end."""
    ends = {kind_a, kind_b}
    if "nic" in ends:
        return "nic400"
    generation = gpu_nvlink(gpu_device_name(model))
    if generation == "":
        return "pcie4"
    generation = generation or "nvlink4"
    if ends <= {"gpu", "nvswitch"}:
        return generation
    return "pcie4" if generation in ("nvlink2", "nvlink3") else "pcie5"


def device_text(node: dict) -> tuple[str, str]:
    """(title, subtitle) of a device box."""
    kind, params = node.get("kind", "?"), node.get("params") or {}
    title = f"{DEVICE_KINDS.get(kind, (kind, ''))[0]} · {node.get('id', '')}"
    if kind == "gpu":
        model = str(params.get("model", "a100"))
        spec = find_gpu_spec(GPU_MODELS.get(model, model))
        short = model.upper() if model in GPU_MODELS else model.replace("NVIDIA ", "")
        sub = (f"{short} · {spec.memory_bytes / 1e9:.0f} GB" if spec is not None else short)
    elif kind == "cpu":
        sub = f"{params.get('threads', 1)} thread(s) for the step"
    else:
        sub = {"nvswitch": "all-to-all NVLink fabric", "pcie_switch": "PCIe fabric",
               "nic": "scale-out network, one per GPU", "node": "a server"}.get(kind, "")
    return title, sub


def link_text(kind: str) -> str:
    return f"{LINK_LABELS.get(kind, kind)}, {LINK_KINDS.get(kind, 0) / 1e9:,.0f} GB/s"


def _meshed_gpus(graph: dict) -> set[str]:
    """GPUs linked straight to other GPUs (a mesh such as the DGX-1's hybrid cube-mesh,
    rather than through a switch)."""
    kinds = {n.get("id"): n.get("kind") for n in graph["nodes"]}
    out = set()
    for e in graph["edges"]:
        a, b = e.get("source"), e.get("target")
        if kinds.get(a) == "gpu" and kinds.get(b) == "gpu":
            out.update((a, b))
    return out


def auto_positions(graph: dict, known: dict) -> dict:
    """Positions for devices without one: a column of rows per host (ids ``n<h>_…``):
    hosts and CPUs, GPUs, switches, NICs, each row centred under the widest.  More than
    four GPUs linked to one another (a mesh) take two rows: the DGX-1's cube-mesh is
    drawn as its two quads, one above the other, each GPU over its peer in the other."""
    rows: dict[int, dict[int, list[str]]] = {}
    for n in graph["nodes"]:
        nid = n.get("id")
        if not isinstance(nid, str) or nid in known:
            continue
        m = re.match(r"n(\d+)_", nid)
        host = int(m.group(1)) if m else 0
        rows.setdefault(host, {}).setdefault(_ROWS.get(n.get("kind"), 3), []).append(nid)
    meshed = _meshed_gpus(graph)
    out, step = {}, DEV_W + 24
    x0 = 0.0
    for host in sorted(rows):
        lines: list[list[str]] = []
        for row in sorted(rows[host]):
            ids = rows[host][row]
            if row == _ROWS["gpu"] and len(ids) > 4 and sum(i in meshed for i in ids) > 4:
                half = (len(ids) + 1) // 2
                lines += [ids[:half], ids[half:]]
            else:
                lines.append(ids)
        width = max(len(ids) for ids in lines) * step
        for line, ids in enumerate(lines):
            left = x0 + (width - len(ids) * step) / 2
            for col, nid in enumerate(ids):
                out[nid] = [left + col * step + step / 2, line * 140.0]
        x0 += width + 120.0
    return out


class DeviceItem(QGraphicsObject):
    """A device box; movable and selectable.  It only draws: the scene edits."""

    def __init__(self, node: dict):
        super().__init__()
        self.node_id = node["id"]
        self.kind = node.get("kind", "?")
        self.links: list[LinkItem] = []
        self.setFlags(QGraphicsItem.ItemIsMovable | QGraphicsItem.ItemIsSelectable
                      | QGraphicsItem.ItemSendsGeometryChanges)
        self.set_node(node)

    def set_node(self, node: dict) -> None:
        self.title, self.subtitle = device_text(node)
        self.setToolTip(f"{self.title}\n{self.subtitle}\nShift-drag to another device to "
                        "link them")
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(-DEV_W / 2 - 2, -DEV_H / 2 - 2, DEV_W + 4, DEV_H + 4)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        color = QColor(DEVICE_KINDS.get(self.kind, ("", "#6b7280"))[1])
        painter.setRenderHint(QPainter.Antialiasing)
        rect = QRectF(-DEV_W / 2, -DEV_H / 2, DEV_W, DEV_H)
        selected = self.isSelected()
        painter.setPen(QPen(QColor("#1a73e8") if selected else color.darker(130),
                            2.5 if selected else 1.2))
        colors = canvas_colors(widget)
        painter.setBrush(QBrush(colors.body))
        painter.drawRoundedRect(rect, 7, 7)
        head = QPainterPath()
        head.addRoundedRect(QRectF(rect.left(), rect.top(), rect.width(), 20), 7, 7)
        painter.fillPath(head, color)
        painter.setPen(QColor("white"))
        font = QFont(painter.font())
        font.setPointSizeF(8.5)
        font.setBold(True)
        painter.setFont(font)
        painter.drawText(QRectF(rect.left() + 8, rect.top(), rect.width() - 12, 20),
                         Qt.AlignVCenter | Qt.AlignLeft, self.title)
        font.setBold(False)
        painter.setFont(font)
        painter.setPen(colors.text)
        painter.drawText(QRectF(rect.left() + 8, rect.top() + 22, rect.width() - 12, 28),
                         Qt.AlignVCenter | Qt.AlignLeft | Qt.TextWordWrap, self.subtitle)

    def itemChange(self, change, value):
        if change == QGraphicsItem.ItemPositionHasChanged:
            for link in self.links:
                link.adjust()
        return super().itemChange(change, value)


class LinkItem(QGraphicsPathItem):
    """A link, labelled with its kind and bandwidth; selectable.  It runs straight between
    its devices, or bows around the devices in its way (``bend``, see
    :mod:`~explorer.platform.routing`); its label sits at ``label_t`` along it, or nowhere
    (None) where every spot is covered."""

    def __init__(self, index: int, a: DeviceItem, b: DeviceItem, kind: str,
                 labelled: bool = True):
        super().__init__()
        self.index, self.a, self.b, self.kind = index, a, b, kind
        self.labelled = labelled  # one label per kind: many links would bury each other
        self.bend = 0.0
        self.label_t: float | None = 0.5 if labelled else None
        a.links.append(self)
        b.links.append(self)
        self.setFlag(QGraphicsItem.ItemIsSelectable)
        self.setZValue(-1)
        self.setToolTip(f"{a.node_id} – {b.node_id}: {link_text(kind)}")
        self.adjust()

    def ends(self) -> tuple[QPointF, QPointF]:
        return QPointF(self.a.pos()), QPointF(self.b.pos())

    def line(self) -> QLineF:
        """The straight line between the two devices' centres."""
        return QLineF(*self.ends())

    def set_route(self, bend: float, label_t: float | None) -> None:
        self.bend, self.label_t = bend, label_t
        self.adjust()

    def adjust(self) -> None:
        self.prepareGeometryChange()
        self.setPath(link_path(*self.ends(), self.bend))

    def label_point(self) -> QPointF | None:
        """The centre of the label, or None when the link shows none."""
        t = self.label_t if self.label_t is not None else (0.5 if self.isSelected() else None)
        return None if t is None else curve_point(*self.ends(), self.bend, t)

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(10)
        return stroker.createStroke(self.path())

    def paint(self, painter: QPainter, option, widget=None) -> None:
        color = QColor("#1a73e8") if self.isSelected() else QColor(
            "#7c4dcc" if self.kind.startswith("nvlink") else
            "#d9822b" if self.kind.startswith("nic") else "#8a6d3b")
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(QPen(color, 3 if self.isSelected() else 2))
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(self.path())
        spot = self.label_point()
        if spot is None:
            return
        font = QFont(painter.font())
        font.setPointSizeF(7.5)
        painter.setFont(font)
        box = label_box(spot)
        colors = canvas_colors(widget)
        painter.fillRect(box, colors.label_box)
        painter.setPen(color.lighter(135) if colors is DARK_CANVAS else color.darker(120))
        painter.drawText(box, Qt.AlignCenter, link_text(self.kind))

    def boundingRect(self) -> QRectF:
        return self.path().boundingRect().adjusted(-LABEL_W / 2 - 2, -LABEL_H, LABEL_W / 2 + 2,
                                                   LABEL_H)


class PlatformScene(QGraphicsScene):
    """Draws the document's platform and turns gestures into undoable edits.

    Signals
    -------
    sigSelection(object)   the selected device dict, ``("link", index, kind)`` or None
    """

    sigSelection = Signal(object)

    def __init__(self, editor, parent=None):
        super().__init__(parent)
        self.editor = editor
        self.devices: dict[str, DeviceItem] = {}
        self.links: list[LinkItem] = []
        self._linking: tuple[DeviceItem, QGraphicsLineItem] | None = None
        self._press_pos: dict[str, QPointF] = {}
        doc = editor.document
        doc.sigPlatformChanged.connect(self.rebuild)
        doc.sigReset.connect(self.rebuild)
        self.selectionChanged.connect(self._emit_selection)
        # a fixed, roomy scene: a growing one shifts the view under a drop
        self.setSceneRect(QRectF(-4000, -3000, 12000, 7000))
        self.rebuild()

    # --- the document's view --------------------------------------------------------------

    def graph(self) -> dict:
        return effective_graph(self.editor.document.platform())

    def positions(self) -> dict:
        graph = self.graph()
        ids = {n["id"] for n in graph["nodes"]}
        known = {k: v for k, v in self.editor.document.platform_positions().items()
                 if k in ids}
        known.update(auto_positions(graph, known))
        return known

    def rebuild(self) -> None:
        if self._linking is not None:  # its items are about to go: drop the gesture
            self._linking = None
        selected = {i.node_id for i in self.selectedItems() if isinstance(i, DeviceItem)}
        links = {(i.a.node_id, i.b.node_id) for i in self.selectedItems()
                 if isinstance(i, LinkItem)}
        self.blockSignals(True)
        self.clear()
        self.devices, self.links = {}, []
        graph, where = self.graph(), self.positions()
        for n in graph["nodes"]:
            if not isinstance(n, dict) or not isinstance(n.get("id"), str):
                continue
            item = DeviceItem(n)
            item.setPos(*where.get(n["id"], (0.0, 0.0)))
            self.addItem(item)
            self.devices[n["id"]] = item
            item.setSelected(n["id"] in selected)
        labelled: set[str] = set()
        few = len(graph["edges"]) <= 16  # a label each; more would bury each other
        for i, e in enumerate(graph["edges"]):
            a, b = self.devices.get(e.get("source")), self.devices.get(e.get("target"))
            if a is not None and b is not None:
                kind = e.get("kind", "?")
                link = LinkItem(i, a, b, kind, few or kind not in labelled)
                labelled.add(kind)
                self.addItem(link)
                self.links.append(link)
                link.setSelected((a.node_id, b.node_id) in links)
        self.route_links()
        self.blockSignals(False)
        self._emit_selection()

    def route_links(self) -> None:
        """Bow each link around the devices in its way, and put the labels where no
        device and no other label covers them."""
        boxes = {k: d.sceneBoundingRect() for k, d in self.devices.items()}
        if not boxes:
            return
        middle = sum((b.center() for b in boxes.values()), QPointF()) / len(boxes)
        routes = []
        for link in self.links:
            ends = (link.a.node_id, link.b.node_id)
            others = [b for k, b in boxes.items() if k not in ends]
            # a detour bows away from the devices its ends link to (a mesh's row bows
            # away from the other row), else away from the middle of the drawing
            near = {d for end in (link.a, link.b) for other in end.links
                    for d in (other.a.node_id, other.b.node_id)} - set(ends)
            centre = (sum((boxes[k].center() for k in near), QPointF()) / len(near)
                      if near else middle)
            routes.append((*link.ends(), route_bend(*link.ends(), others, centre)))
        spots = place_labels(routes, list(boxes.values()), [x.labelled for x in self.links])
        for link, (_, _, bend), t in zip(self.links, routes, spots):
            link.set_route(bend, t)

    def _emit_selection(self) -> None:
        items = self.selectedItems()
        if len(items) != 1:
            self.sigSelection.emit(None)
        elif isinstance(items[0], DeviceItem):
            self.sigSelection.emit(next(n for n in self.graph()["nodes"]
                                        if n.get("id") == items[0].node_id))
        else:
            self.sigSelection.emit(("link", items[0].index, items[0].kind))

    # --- edits -----------------------------------------------------------------------------

    def commit(self, graph: dict, text: str, positions: dict | None = None) -> bool:
        """One undoable edit: the platform becomes ``graph`` (custom)."""
        if graph == self.graph() and positions is None:
            return False  # nothing changed: a preset stays a preset
        where = self.positions() if positions is None else positions
        ids = {n["id"] for n in graph["nodes"]}
        return self.editor.set_platform({"nodes": graph["nodes"], "edges": graph["edges"]},
                                        {k: v for k, v in where.items() if k in ids}, text)

    def add_device(self, kind: str, pos: QPointF | None = None) -> str:
        graph = self.graph()
        used = {n.get("id") for n in graph["nodes"]}
        n = 0
        while f"{kind}{n}" in used:
            n += 1
        nid = f"{kind}{n}"
        node = {"id": nid, "kind": kind}
        if kind == "gpu":
            node["params"] = {"model": gpu_model_of(graph)}
        graph["nodes"].append(node)
        where = self.positions()
        if pos is None:
            area = self.visible_area()
            if area is not None:
                pos = self.free_spot(area)
            else:  # no view shows the canvas: right of the devices, in the kind's row
                xs = [p[0] for p in where.values()] or [0.0]
                pos = QPointF(max(xs) + DEV_W + 30, 130.0 * _ROWS.get(kind, 3))
        where[nid] = [pos.x(), pos.y()]
        self.commit(graph, f"Add {DEVICE_KINDS[kind][0]}", where)
        return nid

    def visible_area(self) -> QRectF | None:
        """The part of the canvas the first visible view shows, in scene coordinates."""
        for view in self.views():
            if view.isVisible() and not view.viewport().rect().isEmpty():
                return view.mapToScene(view.viewport().rect()).boundingRect()
        return None

    def free_spot(self, area: QRectF) -> QPointF:
        """Where a new device goes in ``area``: its centre, or the nearest spot around it
        that no device covers, kept inside ``area`` while one is free there."""
        c = area.center()
        sx, sy = DEV_W + 24.0, DEV_H + 36.0
        boxes = [d.sceneBoundingRect() for d in self.devices.values()]
        inner = area.adjusted(DEV_W / 2 + 4, DEV_H / 2 + 4, -DEV_W / 2 - 4, -DEV_H / 2 - 4)
        spots = sorted(((i, j) for i in range(-8, 9) for j in range(-8, 9)),
                       key=lambda ij: (ij[0] * sx) ** 2 + (ij[1] * sy) ** 2)
        for i, j in spots:
            p = QPointF(c.x() + i * sx, c.y() + j * sy)
            if (i or j) and not inner.contains(p):
                continue
            box = QRectF(p.x() - DEV_W / 2 - 8, p.y() - DEV_H / 2 - 8, DEV_W + 16, DEV_H + 16)
            if not any(box.intersects(b) for b in boxes):
                return p
        return c  # a crowded view: on top of the others, still in sight

    def link(self, a: str, b: str, kind: str | None = None) -> bool:
        if a == b:
            return False
        graph = self.graph()
        kinds = {n["id"]: n.get("kind") for n in graph["nodes"]}
        if any({e.get("source"), e.get("target")} == {a, b} for e in graph["edges"]):
            self.editor.sigMessage.emit(f"{a} and {b} are linked already: select the link "
                                        "to change its kind")
            return False
        kind = kind or default_link(kinds[a], kinds[b], gpu_model_of(graph))
        graph["edges"].append({"source": a, "target": b, "kind": kind})
        return self.commit(graph, f"Link {a} and {b}")

    def set_link_kind(self, index: int, kind: str) -> bool:
        graph = self.graph()
        if graph["edges"][index].get("kind") == kind:
            return False
        graph["edges"][index]["kind"] = kind
        return self.commit(graph, "Change link")

    def set_device_params(self, node_id: str, params: dict, all_gpus: bool = False) -> bool:
        """Change a device's parameters (a GPU model: every GPU's, and the NVLink
        generation of their links follows); False when nothing changes."""
        graph = self.graph()
        for n in graph["nodes"]:
            if n.get("id") == node_id or (all_gpus and n.get("kind") == "gpu"):
                n["params"] = {**(n.get("params") or {}), **params}
        if "model" in params:
            generation = default_link("gpu", "gpu", params["model"])
            for e in graph["edges"]:
                if e.get("kind", "").startswith("nvlink"):
                    e["kind"] = generation
            if not generation.startswith("nvlink"):   # no NVLink: its switches are PCIe
                switches = [n for n in graph["nodes"] if n.get("kind") == "nvswitch"]
                for n in switches:
                    n["kind"] = "pcie_switch"
                if switches:
                    self.editor.sigMessage.emit(
                        f"The {params['model'].upper()} has no NVLink: "
                        f"{', '.join(n['id'] for n in switches)} became PCIe switch"
                        f"{'es' if len(switches) > 1 else ''}")
        return self.commit(graph, "Change device")

    def delete_selected(self) -> bool:
        items = self.selectedItems()
        gone = {i.node_id for i in items if isinstance(i, DeviceItem)}
        dead = {i.index for i in items if isinstance(i, LinkItem)}
        if not gone and not dead:
            return False
        graph = self.graph()
        graph["nodes"] = [n for n in graph["nodes"] if n.get("id") not in gone]
        graph["edges"] = [e for i, e in enumerate(graph["edges"]) if i not in dead
                          and e.get("source") not in gone and e.get("target") not in gone]
        if not graph["nodes"]:
            self.editor.sigMessage.emit("A platform needs at least one device")
            return False
        return self.commit(graph, "Delete devices" if gone else "Delete links")

    # --- gestures --------------------------------------------------------------------------

    def device_at(self, pos: QPointF) -> DeviceItem | None:
        return next((i for i in self.items(pos) if isinstance(i, DeviceItem)), None)

    def mousePressEvent(self, event):
        dev = self.device_at(event.scenePos())
        if dev is not None and event.button() == Qt.LeftButton \
                and event.modifiers() & Qt.ShiftModifier:
            line = QGraphicsLineItem(dev.pos().x(), dev.pos().y(), event.scenePos().x(),
                                     event.scenePos().y())
            line.setPen(QPen(QColor("#1a73e8"), 2, Qt.DashLine))
            self.addItem(line)
            self._linking = (dev.node_id, line)
            event.accept()
            return
        self._press_pos = {k: QPointF(d.pos()) for k, d in self.devices.items()}
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):
        if self._linking is not None:
            nid, line = self._linking
            dev = self.devices.get(nid)
            if dev is not None:
                line.setLine(dev.pos().x(), dev.pos().y(), event.scenePos().x(),
                             event.scenePos().y())
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event):
        if self._linking is not None:
            nid, line = self._linking
            self._linking = None
            self.removeItem(line)
            other = self.device_at(event.scenePos())
            if other is not None and other.node_id != nid:
                self.link(nid, other.node_id)
            return
        super().mouseReleaseEvent(event)
        moved = {k: [d.pos().x(), d.pos().y()] for k, d in self.devices.items()
                 if k in self._press_pos and d.pos() != self._press_pos[k]}
        self._press_pos = {}
        if moved:
            where = self.positions()
            where.update(moved)
            # positions only: a preset stays a preset
            self.editor.set_platform(self.editor.document.platform(), where, "Move devices")

    def keyPressEvent(self, event):
        if self._linking is not None:  # mid-gesture: finish the link first
            event.accept()
            return
        if event.key() in (Qt.Key_Delete, Qt.Key_Backspace):
            self.delete_selected()
            event.accept()
            return
        super().keyPressEvent(event)
