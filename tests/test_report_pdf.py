"""sphr.report.current_pdf: which report.pdf the evaluate and risk assets advertise."""

from __future__ import annotations

import os

from sphr.report import current_pdf


def _pair(tmp_path, pdf_age: float):
    html, pdf = tmp_path / "report.html", tmp_path / "report.pdf"
    html.write_text("<html></html>")
    pdf.write_bytes(b"%PDF-1.4")
    t = html.stat().st_mtime
    os.utime(pdf, (t + pdf_age, t + pdf_age))
    return html, pdf


def test_a_pdf_as_new_as_its_html_is_current(tmp_path):
    html, pdf = _pair(tmp_path, 0.0)
    assert current_pdf(html) == pdf
    assert current_pdf(html, drop_stale=True) == pdf and pdf.exists()


def test_an_older_pdf_is_not_current_and_is_dropped_only_when_asked(tmp_path):
    html, pdf = _pair(tmp_path, -60.0)
    assert current_pdf(html) is None and pdf.exists()
    assert current_pdf(html, drop_stale=True) is None and not pdf.exists()
    assert current_pdf(html) is None  # no PDF at all
