"""The generated part of a docs page: what lies between a benchmark's two HTML-comment
markers, which the benchmark's ``--docs`` rewrites. Shared by ``real_nhanes.py`` (both of its
tables), ``transport.py`` and ``sphr_variants.py``."""

from __future__ import annotations

from pathlib import Path

from sphr.io import write_text


def write_generated(path: Path, markers: tuple[str, str], body: str) -> None:
    """Replace what lies between ``markers`` (begin, end) in ``path`` with ``body`` as given;
    the markers and the rest of the page stay byte for byte. A page without the markers
    raises ``ValueError`` and is left as it was."""
    doc = path.read_text()
    begin, end = doc.index(markers[0]), doc.index(markers[1])
    write_text(doc[:begin + len(markers[0])] + body + doc[end:], path)
