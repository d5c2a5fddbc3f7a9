"""Timeline pictures: each format writes a valid file, atomically."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtGui import QImage

from explorer.timeline.colors import CATEGORY_COLORS
from explorer.timeline.export import export_timeline_image, picture_size
from explorer.timeline.sample import synthetic_timeline
from predictors.engine.timeline import CATEGORIES, Lane, Timeline

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def timeline():
    return synthetic_timeline(ranks=2, title="Small DLRM on a100-1")


def test_png(qapp, tmp_path, timeline):
    out = export_timeline_image(timeline, tmp_path / "t.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    image = QImage(str(out))
    size = picture_size(timeline)
    assert image.width() == 2 * size.width() and image.height() == 2 * size.height()
    # Not a blank page: the GEMM colour is somewhere in the picture.
    colours = {image.pixelColor(x, y).name() for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert CATEGORY_COLORS["gemm"] in colours and "#ffffff" in colours


def test_svg(qapp, tmp_path, timeline):
    out = export_timeline_image(timeline, tmp_path / "t.svg")
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    shapes = [e for e in root.iter() if e.tag in (f"{SVG}rect", f"{SVG}path")]
    assert len(shapes) > 10
    text = "".join(e.text or "" for e in root.iter(f"{SVG}text"))
    assert "Small DLRM on a100-1" in text and "time (ms)" in text and "GEMM" in text


def test_pdf(qapp, tmp_path, timeline):
    out = export_timeline_image(timeline, tmp_path / "t.pdf")
    data = out.read_bytes()
    assert data.startswith(b"%PDF") and b"%%EOF" in data[-64:]
    assert len(data) > 2000


def test_visible_range_and_no_leftovers(qapp, tmp_path, timeline):
    export_timeline_image(timeline, tmp_path / "part.svg", x_range=(0.5, 1.0), title="zoom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part.svg"]
    with pytest.raises(ValueError, match="unsupported"):
        export_timeline_image(timeline, tmp_path / "t.bmp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part.svg"]


def test_many_tiny_events_make_a_small_svg(qapp, tmp_path):
    n = 200_000
    rng = np.random.default_rng(0)
    tl = Timeline(np.sort(rng.uniform(0, 1e6, n)), np.full(n, 0.5),
                  rng.integers(0, 4, n).astype(np.int32),
                  rng.integers(0, len(CATEGORIES), n).astype(np.int16),
                  np.zeros(n, np.int32), np.zeros(n, np.int32),
                  [Lane(0, "cpu", f"t{i}") for i in range(4)], ["op"], [""], "dense")
    out = export_timeline_image(tl, tmp_path / "dense.svg")
    # Sub-pixel bars merge per pixel column: bounded by lanes x categories x width
    # (70,400 here), far below one shape per event.
    shapes = [e for e in ET.parse(out).getroot().iter() if e.tag in (f"{SVG}rect",
                                                                    f"{SVG}path")]
    assert len(shapes) <= 4 * len(CATEGORIES) * picture_size(tl).width()


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_exported_file_readable_by_others(qapp, tmp_path, timeline, ext):
    """Exports get the usual 0666 & ~umask, not a temporary file's 0600."""
    old = os.umask(0o022)
    try:
        out = export_timeline_image(timeline, tmp_path / f"t{ext}")
    finally:
        os.umask(old)
    mode = out.stat().st_mode & 0o777
    assert mode & 0o044 == 0o044, oct(mode)
    assert mode == 0o644, oct(mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"t{ext}"]


def test_memory_counters_are_in_the_picture(qapp, tmp_path):
    from explorer.timeline.colors import COUNTER_COLOR
    from predictors.engine.timeline import TimelineBuilder

    b = TimelineBuilder("mem")
    b.add(b.lane(0, "cpu", "main"), 0.0, 1000.0, "cpu_op", "aten::mm")
    b.counter(0, "memory allocated", [0.0, 300.0], [1e6, 3e6])
    image = QImage(str(export_timeline_image(b.build(), tmp_path / "m.png")))
    colours = {image.pixelColor(x, y).name() for x in range(0, image.width(), 2)
               for y in range(0, image.height(), 2)}
    assert COUNTER_COLOR in colours
