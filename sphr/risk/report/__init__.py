"""What the risk stage writes for people to read, one concern a module:

==============  ===========================================================================
``assembly``    ``report.html`` / ``report.pdf`` of ``sphr risk`` (:func:`write_report`), its
                reading order, and ``report_summary.png``
``sentences``   the summary's sentences, generated from the numbers (:func:`summary_sentences`)
``figures``     the matplotlib figures
``tables``      the tables and text blocks (definitions, provenance, thresholds, ...)
``names``       method order, references, display and short names shared by the three above
``absolute``    the absolute-risk section (figure, tables, one sentence per risk group)
``pages``       the plain markdown + HTML pages of ``sphr score`` and the refresh
==============  ===========================================================================

Names are imported on first use, so that ``sphr score`` (which writes a plain page) does not
load the report toolkit.
"""

from sphr import lazy_exports

__all__ = ["COLORS", "METHOD_ORDER", "REFERENCES", "find_chromium", "render_png",
           "summary_paragraph", "summary_sentences", "write_report"]
__getattr__ = lazy_exports(__name__, {
    "sphr.risk.report.assembly": ("write_report",),
    "sphr.risk.report.sentences": ("summary_paragraph", "summary_sentences"),
    "sphr.risk.report.names": ("COLORS", "METHOD_ORDER", "REFERENCES"),
    "sphr.report": ("find_chromium", "render_png"),
})
