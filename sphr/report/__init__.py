"""What the two reports people forward share: templates, figures, colours, HTML -> PDF.

The reports (``RUN/risk/report.html``, ``RUN/evaluate/report.html``) are rendered
from the jinja2 templates in ``templates/`` (``base.html.j2`` holds the CSS for
screen and A4 print), self-contained: inline CSS, every figure a PNG data URI,
no network reference. :func:`print_pdf` prints one to A4 PDF with headless
Chromium; with no Chromium on PATH (or when it fails) the PDF is skipped with
one log line and the HTML stands alone. ``SPHR_PDF=0`` skips it on purpose (a server
that forwards the HTML; a PDF costs 1-5 s of two cores each).

Colours are fixed here so that a group or a method has the same colour in every
figure of both reports.
"""

from __future__ import annotations

import base64
import functools
import io
import logging
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sphr.options import env_switch

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"

#: risk groups, in every figure: Okabe & Ito's colour-blind-safe blue, orange and vermillion
GROUP_COLORS: dict[str, str] = {"Normal": "#0072B2", "Lower Risk": "#E69F00",
                                 "Higher Risk": "#D55E00"}
#: risk methods and representations; a name shared by both reports has one colour
METHOD_COLORS: dict[str, str] = {
    "raw_euclidean": "#6b6b6b", "raw": "#6b6b6b",
    "mahalanobis": "#1f4e9c",
    "homeostatic_dysregulation": "#56b4e9",
    "p0_euclidean": "#a6761d",
    "deep_patient": "#7b3294",
    "sphr": "#d0006f", "nplb": "#d0006f",
    "phenoage": "#009e73",
    "supervised_xgboost": "#222222",
    "age": "#9a9a9a",
    "pca": "#1f4e9c", "ica": "#56b4e9", "diffmap": "#a6761d",
}
#: one marker per sex where both share a panel
SEX_MARKERS: dict[str, str] = {"female": "o", "male": "s"}
#: figure DPI: sharp on A4 without heavy files
DPI = 150
#: figure widths in inches, drawn at 1:1 on A4 (printable width 186 mm = 7.3 in)
FULL_WIDTH = 7.1


@dataclass(frozen=True)
class Figure:
    """A rendered figure: PNG bytes and the width it was drawn for (inches)."""

    png: bytes
    width_in: float
    alt: str
    caption: str = ""

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def figure(fig: Any, alt: str, caption: str = "") -> Figure:
    """A matplotlib figure as a :class:`Figure` (PNG at :data:`DPI`)."""
    width = float(fig.get_size_inches()[0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    return Figure(buf.getvalue(), width, alt, caption)


#: the reports' type sizes (8-9 pt: readable when printed at 1:1)
RC: dict[str, Any] = {"font.size": 8, "axes.titlesize": 8.5, "axes.labelsize": 8,
                      "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "legend.fontsize": 7.5,
                      "axes.spines.top": False, "axes.spines.right": False,
                      "axes.titleweight": "bold", "legend.frameon": False}


def styled(func: Callable[..., Figure]) -> Callable[..., Figure]:
    """Draw (and save) a figure with :data:`RC`: matplotlib reads most sizes at draw time."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        import matplotlib

        with matplotlib.rc_context(RC):
            return func(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float, *, nrows: int = 1, ncols: int = 1,
               left: float = 0.55, right: float = 0.12, top: float = 0.3, bottom: float = 0.45,
               wspace: float = 0.35, hspace: float = 0.45, **kwargs: Any):
    """A figure whose margins and gaps are given in inches (no layout pass: drawing a figure
    once instead of twice halves the report's time; the callers size the margins to their
    labels with :func:`text_width`)."""
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height))
    axes = fig.subplots(nrows, ncols, **kwargs)
    aw = (width - left - right - (ncols - 1) * wspace) / ncols
    ah = (height - top - bottom - (nrows - 1) * hspace) / nrows
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height, wspace=wspace / max(aw, 1e-3),
                        hspace=hspace / max(ah, 1e-3))
    return fig, axes


def text_width(labels: Any, size: float = 7.5) -> float:
    """About how wide (inches) the longest of ``labels`` is at ``size`` pt (DejaVu Sans)."""
    longest = max((len(str(s)) for s in labels), default=0)
    return 0.56 * size / 72 * longest


def style_axes(ax: Any) -> None:
    """Print-friendly axes: no top/right spines, light grid behind the data."""
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.tick_params(labelsize=7.5)
    ax.grid(True, color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)


def table(df: pd.DataFrame, floatfmt: str = "{:.4g}", *, index: bool = False,
          nowrap: bool = False) -> str:
    """An escaped HTML table (cells are data, never markup); ``nowrap``: cells on one line."""
    return df.to_html(index=index, escape=True, border=0, na_rep="-",
                      float_format=lambda v: floatfmt.format(v),
                      classes="nowrap" if nowrap else None)


def environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(("html", "j2")),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["markup"] = jinja2.utils.markupsafe.Markup
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
          "--disable-dev-shm-usage", "--disable-extensions", "--mute-audio")


def _chromium(binary: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    # a throw-away profile: no lock shared with another run, nothing left behind
    with tempfile.TemporaryDirectory(prefix="sphr-chromium-") as profile:
        return subprocess.run([binary, *_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout, check=False)


def pdfs_wanted() -> bool:
    """Whether reports get their PDF copy: ``SPHR_PDF=0`` (or false / no) says no."""
    return env_switch("SPHR_PDF")


def print_pdf(html_path: str | Path, pdf_path: str | Path | None = None, *,
              timeout: float = 120.0) -> Path | None:
    """Print an HTML file to an A4 PDF (the page size and breaks come from the CSS).

    Returns the PDF's path, or None with one log line when ``SPHR_PDF=0``, when there is no
    Chromium on PATH or when it fails: the HTML report is the product, the PDF a convenience.
    """
    html_path = Path(html_path).resolve()
    pdf_path = Path(pdf_path) if pdf_path is not None else html_path.with_suffix(".pdf")
    wanted = pdfs_wanted()
    binary = find_chromium() if wanted else None
    if binary is None:
        if wanted:
            log.warning("no chromium on PATH: %s not written (the HTML report is complete)",
                        pdf_path.name)
        else:
            log.info("SPHR_PDF=0: %s not written (the HTML report is complete)", pdf_path.name)
        pdf_path.unlink(missing_ok=True)  # an older PDF would contradict the new HTML
        return None
    from sphr.io import atomic_path

    try:
        with atomic_path(pdf_path) as tmp:
            # headings become the PDF's bookmarks (an older Chromium ignores the flag)
            proc = _chromium(binary, ["--no-pdf-header-footer", "--generate-pdf-document-outline",
                                      f"--print-to-pdf={tmp}", html_path.as_uri()], timeout)
            if proc.returncode != 0 or tmp.stat().st_size == 0:
                raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        log.warning("chromium could not print %s (%s): no PDF, the HTML report is complete",
                    html_path.name, exc)
        pdf_path.unlink(missing_ok=True)
        return None
    return pdf_path


def current_pdf(html_path: str | Path, *, drop_stale: bool = False) -> Path | None:
    """The PDF printed from ``html_path`` (same name, ``.pdf``) if it is at least as new as
    the HTML, else None.

    An older PDF is left from an earlier run whose print was skipped or failed: its numbers
    need not be the HTML's. ``drop_stale`` deletes such a PDF.
    """
    html_path = Path(html_path)
    pdf = html_path.with_suffix(".pdf")
    if not pdf.exists():
        return None
    if pdf.stat().st_mtime >= html_path.stat().st_mtime:
        return pdf
    if drop_stale:
        pdf.unlink()
    return None


def render_png(html_path: str | Path, png_path: str | Path, *, width: int = 1280,
               height: int = 3000, timeout: float = 120.0) -> Path:
    """Screenshot an HTML file with headless Chromium (no network needed for our reports)."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium / chromium-browser / google-chrome on PATH")
    html_path, png_path = Path(html_path).resolve(), Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    proc = _chromium(binary, [f"--screenshot={png_path}", f"--window-size={width},{height}",
                              html_path.as_uri()], timeout)
    if not png_path.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): "
                           f"{proc.stderr[-500:]}")
    return png_path


def pdf_pages(path: str | Path) -> int:
    """Number of pages of a PDF written by Chromium (counts its page objects)."""
    return len(re.findall(rb"/Type\s*/Page\b", Path(path).read_bytes()))


def _pdf_string(raw: bytes) -> str:
    if raw.startswith(b"<"):
        data = bytes.fromhex(raw[1:-1].decode("ascii"))
        return data[2:].decode("utf-16-be") if data[:2] == b"\xfe\xff" else data.decode("latin-1")
    text = raw[1:-1]
    text = re.sub(rb"\\([()\\])", rb"\1", text)
    return text.decode("latin-1")


def pdf_outline(path: str | Path) -> list[tuple[str, int]]:
    """(heading, 1-based page) of each bookmark of a PDF that Chromium printed with
    ``--generate-pdf-document-outline`` (plain objects, no object streams), in page order.
    For tests and checks; not a general PDF reader."""
    data = Path(path).read_bytes()
    objs = {int(m.group(1)): m.group(2)
            for m in re.finditer(rb"(\d+)\s+0\s+obj\s*(.*?)endobj", data, re.S)}
    kids = {k: [int(x) for x in re.findall(rb"(\d+)\s+0\s+R", m.group(1))]
            for k, v in objs.items() if re.search(rb"/Type\s*/Pages\b", v)
            and (m := re.search(rb"/Kids\s*\[(.*?)\]", v, re.S))}
    roots = [k for k in kids if not re.search(rb"/Parent\b", objs[k])]
    order: list[int] = []

    def walk(node: int) -> None:
        for kid in kids.get(node, []):
            (walk(kid) if kid in kids else order.append(kid))

    for root in roots:
        walk(root)
    page_of = {obj: i + 1 for i, obj in enumerate(order)}
    out = []
    for v in objs.values():
        m = re.search(rb"/Title\s*(\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f]*>)", v)
        d = re.search(rb"/Dest\s*\[\s*(\d+)\s+0\s+R", v)
        if m and d and int(d.group(1)) in page_of:
            out.append((_pdf_string(m.group(1)), page_of[int(d.group(1))]))
    return sorted(out, key=lambda t: t[1])
