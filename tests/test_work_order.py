"""The work order's table (tests/work_order.py) names test files that exist."""

from __future__ import annotations

from pathlib import Path

from compiled_setup import COMPILED_FILES
from work_order import FILE_SECONDS, file_seconds

ROOT = Path(__file__).resolve().parents[1]


def test_every_timed_file_exists_and_none_is_a_compiled_one():
    missing = [f for f in FILE_SECONDS if not (ROOT / f).is_file()]
    assert not missing, f"renamed or removed: update tests/work_order.py ({missing})"
    # the compiled files travel as one unit, first, whatever their seconds
    assert not set(FILE_SECONDS) & set(COMPILED_FILES)


def test_a_node_id_is_timed_by_its_file():
    assert file_seconds("tests/test_risk.py::test_x[a::b]") == FILE_SECONDS["tests/test_risk.py"]
    assert file_seconds("tests/not_listed.py::test_y") == 0
