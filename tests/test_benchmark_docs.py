"""benchmarks/_docs.py: the generated part of a docs page that a benchmark's ``--docs``
rewrites (real_nhanes.py's two tables, transport.py, sphr_variants.py)."""

from __future__ import annotations

import pytest
from benchmark_loader import load_benchmark

bench_docs = load_benchmark("_docs")
MARKERS = ("<!-- gen: begin -->", "<!-- gen: end -->")


def test_only_the_part_between_the_markers_changes(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- gen: begin -->\nold table\n<!-- gen: end -->\noutro\n")
    bench_docs.write_generated(page, MARKERS, "\nnew | table\n")
    assert page.read_text() == "intro\n<!-- gen: begin -->\nnew | table\n<!-- gen: end -->\noutro\n"
    bench_docs.write_generated(page, MARKERS, "\nagain\n")  # a second run replaces, not appends
    assert page.read_text() == "intro\n<!-- gen: begin -->\nagain\n<!-- gen: end -->\noutro\n"


def test_a_page_without_the_markers_is_left_alone(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("no markers here\n")
    with pytest.raises(ValueError):
        bench_docs.write_generated(page, MARKERS, "\nx\n")
    assert page.read_text() == "no markers here\n"
