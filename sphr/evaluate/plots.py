"""A 2-D picture of each representation: the first two principal components of its
test embedding, coloured by class (the paper shows UMAP, Fig. A1; PCA needs no
extra dependency and is deterministic)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sphr.baselines import DISPLAY_NAMES
from sphr.labels import CLASS_NAMES

_COLORS = ("#d62728", "#1f77b4", "#2ca02c")  # unhealthy, apparently healthy, BFH


def _pca2(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    Zc = Z - Z.mean(axis=0)
    _, s, vt = np.linalg.svd(Zc, full_matrices=False)
    comps = vt[:2]
    comps *= np.sign(comps[np.arange(comps.shape[0]), np.abs(comps).argmax(axis=1)])[:, None]
    var = s**2 / max((s**2).sum(), 1e-30)
    return Zc @ comps.T, var[:2]


def _draw(ax, Z: np.ndarray, labels: np.ndarray, title: str, max_points: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    idx = np.arange(len(labels))
    if len(idx) > max_points:
        idx = np.sort(rng.choice(len(idx), max_points, replace=False))
    P, var = _pca2(np.asarray(Z, dtype=np.float64))
    # draw the big classes first so the small BFH class stays visible on top
    for c in sorted(np.unique(labels[idx]), key=lambda c: -(labels[idx] == c).sum()):
        sel = idx[labels[idx] == c]
        ax.scatter(P[sel, 0], P[sel, 1] if P.shape[1] > 1 else np.zeros(len(sel)), s=4,
                   alpha=0.5, color=_COLORS[int(c) % 3],
                   label=CLASS_NAMES[int(c)].replace("_", " "), linewidths=0)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"PC1 ({var[0]:.0%})", fontsize=8)
    ax.set_ylabel(f"PC2 ({var[1]:.0%})" if len(var) > 1 else "", fontsize=8)
    ax.tick_params(labelsize=7)


def representation_scatter(name: str, Z: np.ndarray, labels: np.ndarray, *, title: str = "",
                           max_points: int = 6000, seed: int = 0) -> bytes:
    """PNG of one representation."""
    from sphr.plots import new_figure, to_png

    fig, ax = new_figure(5.0, 4.2)
    _draw(ax, Z, np.asarray(labels), title or DISPLAY_NAMES.get(name, name), max_points, seed)
    ax.legend(fontsize=7, markerscale=3, loc="best")
    return to_png(fig)


def representation_grid(embeddings: Mapping[str, np.ndarray], labels: np.ndarray, *,
                        title: str = "", max_points: int = 4000, seed: int = 0) -> bytes:
    """PNG with one panel per representation (same participants in every panel)."""
    from sphr.plots import new_figure, to_png

    n = len(embeddings)
    cols = min(3, n)
    rows = int(np.ceil(n / cols))
    fig, axes = new_figure(4.0 * cols, 3.6 * rows, nrows=rows, ncols=cols, squeeze=False)
    for ax, (name, Z) in zip(axes.ravel(), embeddings.items(), strict=False):
        _draw(ax, Z, np.asarray(labels), DISPLAY_NAMES.get(name, name), max_points, seed)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7, markerscale=3, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    return to_png(fig)
