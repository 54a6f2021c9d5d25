"""Column names in every UKB header style parse back to the same field, instance and array."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sphr.data.headers import ColumnKey, format_column, parse_column

keys = st.builds(ColumnKey, st.integers(1, 200_000), st.integers(0, 3), st.integers(0, 60))


@given(keys, st.sampled_from(["legacy", "tab", "rap"]), st.booleans())
def test_format_then_parse(key, style, prefixed):
    prefix = "participant." if prefixed and style == "rap" else ""
    name = format_column(key, style, prefix=prefix)
    assert parse_column(name) == (style, key)


def test_rap_omits_single_axes():
    assert format_column(ColumnKey(31), "rap", single_instance=True, single_array=True) == "p31"
    assert parse_column("p31") == ("rap", ColumnKey(31, 0, 0))
    assert parse_column("participant.p20002_i0_a3") == ("rap", ColumnKey(20002, 0, 3))
    assert parse_column("f.21003.0.0") == ("tab", ColumnKey(21003, 0, 0))
    assert parse_column("eid") == ("legacy", None)
    assert parse_column("notes") is None
