"""Reports' PDF copies in the tests: off unless a test reads one.

A report's PDF is Chromium printing its HTML, 1-5 s of two cores each; a cold run printed 27
of them (about 80 s), and most of those tests never opened the PDF. So conftest sets
``SPHR_PDF=0`` (the users' switch, :func:`sphr.report.pdfs_wanted`) for the whole run, and the
tests about the PDF print it inside :func:`printing_pdfs`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def printing_pdfs() -> Iterator[None]:
    """Reports written inside this block get their PDF (where Chromium is found)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPHR_PDF", "1")
        yield
