"""The design-review report: one self-contained HTML or PDF of what the window shows."""
import base64
import re

import pytest


@pytest.fixture
def predicted(make_window, qtbot):
    w = make_window()
    with qtbot.waitSignal(w.controller.sigFinished, timeout=60_000):
        w.predict_now()
    return w


def test_an_html_report_carries_every_section_and_its_pictures(predicted, tmp_path):
    from explorer.report import export_report

    out = export_report(predicted, tmp_path / "review.html")
    text = out.read_text(encoding="utf-8")
    for heading in ("Summary", "Timeline", "Model", "Platform", "Top ops", "Notes",
                    "Profile"):
        assert f"<h2>{heading}</h2>" in text, heading
    p = predicted.prediction
    assert f"{p.iteration_ms:,.3f} ms" in text
    assert p.verdict["text"].split(":")[0] in text      # e.g. "host-bound"
    pictures = re.findall(r"src='data:image/png;base64,([^']+)'", text)
    assert len(pictures) >= 3                             # timeline, model, platform
    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in pictures)
    assert "src='timeline.png'" not in text               # nothing left to fetch


def test_a_pdf_report_and_bad_requests(predicted, make_window, tmp_path):
    from explorer.report import export_report

    pdf = export_report(predicted, tmp_path / "review.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(pdf) > 20_000
    with pytest.raises(ValueError, match="use .html or .pdf"):
        export_report(predicted, tmp_path / "review.docx")
    fresh = make_window()
    fresh.prediction = None
    with pytest.raises(RuntimeError, match="predict first"):
        export_report(fresh, tmp_path / "none.html")


@pytest.mark.slow   # two app processes; the report itself is tested in process above
def test_the_command_line_writes_a_report(tmp_path):
    import subprocess
    import sys

    from paths import ROOT

    out = tmp_path / "review.html"
    run = subprocess.run([sys.executable, "-m", "explorer", "--export-report", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "<h2>Summary</h2>" in out.read_text(encoding="utf-8")
    bad = subprocess.run([sys.executable, "-m", "explorer", "--export-report",
                          str(tmp_path / "r.docx")], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert bad.returncode == 2 and "use .html or .pdf" in bad.stderr
