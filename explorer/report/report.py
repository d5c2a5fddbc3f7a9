"""A design-review report: the scenario, its platform, the predicted step and why, in one
self-contained document.

:func:`export_report` writes what the window shows now: the summary (iteration, the
verdict and what would move it, the stated range where the prediction has one), every
rank's figures, the timeline picture, the model and platform drawings, the top ops, the
sharding ranking and the sweep when they exist, the notes and the profile's provenance.
An ``.html`` file carries its pictures inline (PNG data URIs): it opens anywhere, offline,
and mails as one file.  A ``.pdf`` is the same document laid out by Qt on A4 pages.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import os
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QMarginsF, QRectF, QSize, Qt, QUrl
from PySide6.QtGui import (
    QColor,
    QImage,
    QPageLayout,
    QPageSize,
    QPainter,
    QPdfWriter,
    QTextDocument,
)

from predictors.engine.uncertainty import range_remark
from predictors.utils.fileio import atomic_write_bytes
from predictors.utils.formatting import format_bytes

from ..timeline.export import picture_size, render_timeline
from ..widgets.table_export import table_rows

__all__ = ["REPORT_FORMATS", "export_report", "report_html"]

REPORT_FORMATS = {".html": "HTML document", ".pdf": "PDF document"}
TIMELINE_WIDTH = 1400
DRAWING_WIDTH = 1000

_STYLE = """
body { font-family: sans-serif; color: #222; max-width: 1100px; margin: 24px auto; }
h1 { font-size: 20pt; margin-bottom: 2px; } h2 { font-size: 14pt; margin-top: 22px;
border-bottom: 1px solid #ccc; } .sub { color: #666; } table { border-collapse: collapse; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 9pt; }
th { background: #f2f2f2; } .verdict { font-size: 12pt; font-weight: bold; }
img { max-width: 100%; }
"""


def _esc(text) -> str:
    return html.escape(str(text))


def _table(rows: list[list], header: list[str]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _picture(name: str) -> str:
    return f"<p><img src='{name}'></p>"   # a paragraph of its own: Qt's layout keeps order


def _scene_image(scene, width: int = DRAWING_WIDTH) -> QImage | None:
    """A drawing of everything on a graphics scene, at most ``width`` pixels wide."""
    if scene is None:
        return None
    rect = scene.itemsBoundingRect().adjusted(-20, -20, 20, 20)
    if rect.isEmpty():
        return None
    width = int(min(width, rect.width()))   # never drawn larger than on screen
    height = max(1, int(width * rect.height() / rect.width()))
    image = QImage(QSize(width, height), QImage.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.Antialiasing)
    scene.render(painter, QRectF(0, 0, width, height), rect, Qt.KeepAspectRatio)
    painter.end()
    return image


def _timeline_image(prediction, title: str) -> QImage:
    size = picture_size(prediction.timeline, TIMELINE_WIDTH)
    image = QImage(size, QImage.Format_ARGB32)
    painter = QPainter(image)
    render_timeline(painter, size, prediction.timeline, title=title)
    painter.end()
    return image


def _provenance(name: str) -> dict:
    from predictors.profiles import ProfileError, resolve_profile
    if not name or name == "roofline":
        return {"profile": "datasheet roofline (no measured profile)"}
    try:
        profile = resolve_profile(name)
    except (ProfileError, OSError, KeyError, ValueError):
        return {"profile": name}
    return {"profile": profile.name, "kind": profile.kind,
            **{k: v for k, v in (profile.provenance or {}).items()
               if isinstance(v, (str, int, float))}}


def _summary(prediction) -> str:
    p = prediction
    parts = [f"<p><b>Iteration: {p.iteration_ms:,.3f} ms</b>"]
    low, high = getattr(p, "iteration_ms_low", None), getattr(p, "iteration_ms_high", None)
    if low is not None and high is not None:
        remark = range_remark(p.iteration_ms, low, high)
        parts.append(f" (80 % range {low:,.3f}–{high:,.3f} ms"
                     + (f"; {remark}" if remark else "") + ")")
    parts.append(f" on {_esc(p.platform)} ({_esc(p.device)}), {p.num_ops:,} ops.</p>")
    verdict = getattr(p, "verdict", None)
    if verdict:
        parts.append(f"<p class='verdict'>{_esc(verdict['text'])}</p>")
        if verdict.get("what_if"):
            parts.append("<p>What would move it:</p><ul>"
                         + "".join(f"<li>{_esc(w)}</li>" for w in verdict["what_if"])
                         + "</ul>")
    rows = [[r["rank"], f"{r['iteration_ms']:,.3f}", f"{r['device_active_ms']:,.3f}",
             f"{r.get('exposed_comm_ms', 0.0):,.3f}",
             format_bytes(r["peak_memory_bytes"]) if r.get("peak_memory_bytes") else "–"]
            for r in p.per_rank]
    parts.append(_table(rows, ["rank", "iteration (ms)", "device active (ms)",
                               "exposed communication (ms)", "peak memory"]))
    return "".join(parts)


def _results_table(view) -> str | None:
    """A results view's table (the Sharding or Sweep dock) as the dock shows it."""
    if view is None or not getattr(view, "results", None):
        return None
    header, *rows = table_rows(view.table)
    return _table(rows, header)


def report_html(window) -> tuple[str, dict[str, QImage]]:
    """The report of ``window`` as HTML whose pictures are ``<img src="NAME">`` and the
    pictures by name.  Raises RuntimeError when there is no prediction yet."""
    p = window.prediction
    if p is None:
        raise RuntimeError("no prediction to report yet: predict first")
    doc = window.editor.document.snapshot()
    title = window.export_title()
    images: dict[str, QImage] = {"timeline.png": _timeline_image(p, title)}
    for name, scene in (("model.png", getattr(window, "scene", None)),
                        ("platform.png", getattr(getattr(window, "platform_page", None),
                                                 "scene", None))):
        image = _scene_image(scene)
        if image is not None:
            images[name] = image
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    out = [f"<html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
           f"<style>{_STYLE}</style></head><body>",
           f"<h1>{_esc(p.scenario_name or 'Scenario')}</h1>",
           f"<p class='sub'>{_esc(title)} · report of {when}</p>",
           "<h2>Summary</h2>", _summary(p),
           "<h2>Timeline</h2>", _picture("timeline.png")]
    blocks = [[n["id"], n["kind"], ", ".join(f"{k}={v}" for k, v in n["params"].items()
                                           if not isinstance(v, (list, dict)))
               or "–"] for n in doc["model"]["nodes"]]
    training = doc.get("training", {})
    out += ["<h2>Model</h2>",
            _picture("model.png") if "model.png" in images else "",
            _table(blocks, ["block", "kind", "parameters"]),
            "<p>Training: " + _esc(", ".join(f"{k} {v}" for k, v in training.items()))
            + "</p>",
            "<h2>Platform</h2>",
            _picture("platform.png") if "platform.png" in images else "",
            f"<p>{_esc(p.platform)}: {len(p.per_rank)} rank(s) of {_esc(p.device)}</p>"]
    if p.top_ops:
        keys = [k for k in ("name", "category", "total_ms", "count", "share")
                if k in p.top_ops[0]]
        out += ["<h2>Top ops</h2>", _table([[op.get(k, "") if not isinstance(op.get(k), float)
                                             else f"{op[k]:,.4g}" for k in keys]
                                            for op in p.top_ops], keys)]
    sharding = _results_table(getattr(getattr(window, "sharding", None), "view", None))
    if sharding:
        out += ["<h2>Sharding plans</h2>", sharding]
    sweep = _results_table(getattr(getattr(window, "sweep", None), "view", None))
    if sweep:
        out += ["<h2>Sweep</h2>", sweep]
    if p.notes:
        out += ["<h2>Notes</h2><ul>"
                + "".join(f"<li>{_esc(n)}</li>" for n in p.notes) + "</ul>"]
    prov = _provenance(str(getattr(p, "profile", "") or ""))
    out += ["<h2>Profile</h2>", _table([[k, v] for k, v in prov.items()], ["", ""]),
            "</body></html>"]
    return "".join(out), images


def _png(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(buffer.data())


def export_report(window, path: str | os.PathLike) -> Path:
    """Write the report of ``window`` to ``path`` (``.html`` or ``.pdf``), atomically."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in REPORT_FORMATS:
        raise ValueError(f"unsupported report format {path.suffix!r}: use .html or .pdf")
    text, images = report_html(window)
    if ext == ".html":
        for name, image in images.items():
            uri = "data:image/png;base64," + base64.b64encode(_png(image)).decode()
            text = text.replace(f"src='{name}'", f"src='{uri}'")
        atomic_write_bytes(path, text.encode("utf-8"))
        return path
    document = QTextDocument()
    for name, image in images.items():
        document.addResource(QTextDocument.ImageResource, QUrl(name), image)
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    writer = QPdfWriter(buffer)
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize.A4), QPageLayout.Portrait,
                                     QMarginsF(12, 12, 12, 12), QPageLayout.Millimeter))
    writer.setResolution(120)
    # pictures scaled to the page's width
    width = writer.width()
    for name, image in images.items():
        if image.width() > width:
            document.addResource(QTextDocument.ImageResource, QUrl(name),
                                 image.scaledToWidth(width, Qt.SmoothTransformation))
    document.setPageSize(writer.pageLayout().paintRectPixels(writer.resolution()).size()
                         .toSizeF())
    document.setHtml(text)
    document.print_(writer)
    del writer
    atomic_write_bytes(path, bytes(buffer.data()))
    return path
