"""Figures for the comparison: margin curves and query / result strips
(PNG bytes via sphr.plots)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.plots import new_figure, to_png


def margin_curves_png(curves: pd.DataFrame, scheduled: dict[str, str]) -> bytes | None:
    """Margin (and AutoMargin's beta) per epoch, mean over seeds, with the epoch's easy share.

    ``scheduled``: loss name -> scheduler family; constant-margin losses are left out.
    """
    names = [n for n, fam in scheduled.items() if fam in {"automargin", "linear", "dams"}
             and n in set(curves.get("loss", pd.Series(dtype=str)))]
    if not names:
        return None
    fig, axes = new_figure(11, 4, ncols=2)
    for name in names:
        sub = curves[curves["loss"] == name].groupby("epoch").mean(numeric_only=True)
        axes[0].plot(sub.index, sub["margin"], marker=".", label=f"{name}: margin")
        if "beta" in sub and sub["beta"].notna().any():
            axes[0].plot(sub.index, sub["beta"], "--", marker=".", label=f"{name}: beta")
        if "easy_share" in sub:
            axes[1].plot(sub.index, sub["easy_share"], marker=".", label=name)
    axes[0].set(xlabel="epoch", ylabel="margin in force", title="Margins (mean over seeds)")
    axes[1].set(xlabel="epoch", ylabel="share of easy in-batch triplets",
                title="Easy share (delta > margin)")
    if any(f == "dams" for n, f in scheduled.items() if n in names):
        axes[1].axhline(0.95, color="grey", lw=0.8, ls=":", label="DAMS threshold 0.95")
    for ax in axes:
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return to_png(fig)


def query_strips_png(images: np.ndarray, labels: np.ndarray, years: np.ndarray, queries: np.ndarray,
                     results: np.ndarray, title: str) -> bytes:
    """One row per query: the query, then its top results; green frame = same subject / class."""
    n_q, k = results.shape
    fig, axes = new_figure(1.3 * (k + 1), 1.5 * n_q + 0.4, nrows=n_q, ncols=k + 1, squeeze=False)

    def caption(i: int) -> str:
        return f"{labels[i]}" + (f" y{years[i]:g}" if np.isfinite(years[i]) else "")

    for r, q in enumerate(queries):
        row = [q, *results[r].tolist()]
        for c, idx in enumerate(row):
            ax = axes[r][c]
            img = images[idx]
            ax.imshow(img.squeeze(-1) if img.shape[-1] == 1 else img, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                color, text = "black", f"query {caption(idx)}"
            else:
                ok = labels[idx] == labels[q]
                color, text = ("tab:green" if ok else "tab:red"), f"#{c} {caption(idx)}"
            for spine in ax.spines.values():
                spine.set_color(color)
                spine.set_linewidth(3 if c else 1)
            ax.set_title(text, fontsize=7, color=color)
    fig.suptitle(title, fontsize=9)
    return to_png(fig, dpi=90)
