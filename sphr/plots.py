"""Figures as PNG bytes, for reports, HTML pages and Dagster metadata (headless)."""

from __future__ import annotations

import base64
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def new_figure(width: float = 6.0, height: float = 4.0, **kwargs: Any):
    """A figure and its axes; callers draw, then pass the figure to :func:`to_png`."""
    return plt.subplots(figsize=(width, height), **kwargs)


def to_png(fig, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def markdown_image(png: bytes, alt: str = "plot") -> str:
    """Markdown that embeds the PNG inline (Dagster has no image metadata type)."""
    return f"![{alt}]({png_data_uri(png)})"
