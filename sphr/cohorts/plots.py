"""Pictures of a cohort: classes by age group, and augmented vs real BFH markers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.labels import BONA_FIDE_HEALTHY, CLASS_NAMES
from sphr.plots import new_figure, to_png


def classes_by_age_group(report: dict) -> bytes:
    """Stacked bars: participants per class in each age group (one sex)."""
    frame = pd.DataFrame(report["age_groups"]).T[list(CLASS_NAMES)]
    fig, ax = new_figure(6.5, 3.6)
    bottom = np.zeros(len(frame))
    for name, color in zip(CLASS_NAMES, ("#c0392b", "#f1c40f", "#27ae60"), strict=True):
        ax.bar(frame.index, frame[name], bottom=bottom, label=name.replace("_", " "), color=color)
        bottom += frame[name].to_numpy()
    ax.set_ylabel("participants")
    ax.set_title(f"{report['sex']}: classes by age group (BFH {report['bfh_share']:.1%})")
    ax.legend(fontsize=8)
    return to_png(fig)


def augmentation_check(train_raw: pd.DataFrame, labels: np.ndarray,
                       markers: tuple[str, ...] = ("ldl", "glucose", "hba1c", "crp")) -> bytes:
    """Real vs augmented BFH values of a few P0 markers (raw units)."""
    bfh = labels == BONA_FIDE_HEALTHY
    markers = tuple(m for m in markers if m in train_raw.columns)
    fig, axes = new_figure(3.0 * len(markers), 2.8, ncols=len(markers))
    axes = np.atleast_1d(axes)
    for ax, m in zip(axes, markers, strict=True):
        real = train_raw.loc[bfh & ~train_raw["augmented"].to_numpy(), m]
        aug = train_raw.loc[bfh & train_raw["augmented"].to_numpy(), m]
        bins = np.histogram_bin_edges(np.concatenate([real, aug]), bins=25)
        ax.hist(real, bins=bins, density=True, alpha=0.6, label="real")
        ax.hist(aug, bins=bins, density=True, alpha=0.6, label="augmented")
        ax.set_title(m, fontsize=9)
    axes[0].legend(fontsize=7)
    return to_png(fig)
