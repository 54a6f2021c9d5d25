"""The plain pages of ``sphr score`` and the refresh: one list of blocks, as markdown and as a
self-contained HTML page with the same content.

A block is ``(kind, content)``: ``h1`` / ``h2`` / ``p`` with text, or ``table`` with a
DataFrame (an empty table reads "none").
"""

from __future__ import annotations

import html
from typing import Any

STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}"
         "table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}"
         # printed, a heading stays with what it heads
         "h1,h2{break-after:avoid}")
_MARKDOWN_PREFIX = {"h1": "# ", "h2": "## ", "p": ""}


def render_page(blocks: list[tuple[str, Any]], title: str) -> tuple[str, str]:
    """(markdown, HTML page) of ``blocks``, titled ``title``."""
    md, body = [], []
    for kind, content in blocks:
        if kind == "table":
            md.append(content.to_markdown(index=False) if len(content) else "_none_")
            body.append(content.to_html(index=False, na_rep="") if len(content)
                        else "<p><em>none</em></p>")
        else:
            md.append(_MARKDOWN_PREFIX[kind] + content)
            body.append(f"<{kind}>{html.escape(content)}</{kind}>")
        md.append("")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{STYLE}</style></head><body>" + "\n".join(body) + "</body></html>")
    return "\n".join(md), page
