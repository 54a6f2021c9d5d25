"""Helpers that turn sphr results into Dagster metadata (plain numbers, markdown, PNGs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from sphr.plots import markdown_image


def table(frame: pd.DataFrame | dict, *, index: bool = True, digits: int = 4) -> dg.MetadataValue:
    if isinstance(frame, dict):
        frame = pd.DataFrame(frame)
    return dg.MetadataValue.md(frame.round(digits).to_markdown(index=index))


def image(png: bytes, alt: str = "plot") -> dg.MetadataValue:
    """Dagster has no image metadata type: a PNG embedded in markdown."""
    return dg.MetadataValue.md(markdown_image(png, alt))


def path(p: str | Path) -> dg.MetadataValue:
    return dg.MetadataValue.path(str(p))


#: Dagster Pipes' metadata types (``{"raw_value", "type"}``) as Dagster's metadata values
_PIPES_TYPES = {"path": dg.MetadataValue.path, "json": dg.MetadataValue.json,
                "md": dg.MetadataValue.md, "text": dg.MetadataValue.text}


def from_pipes(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata in Pipes' plain form (what a Pipes process reports, e.g.
    :func:`sphr.train.run.model_metadata`) as Dagster's, for the same metadata reported from
    the asset's own process."""
    out = {}
    for key, value in metadata.items():
        if isinstance(value, dict) and set(value) == {"raw_value", "type"}:
            value = _PIPES_TYPES[value["type"]](value["raw_value"])
        out[key] = value
    return out


def plain(value: Any) -> Any:
    """Metadata values must be plain Python numbers, not numpy scalars."""
    if hasattr(value, "item"):
        return value.item()
    return value
