"""What SPHR's health distance says about the training rows after each epoch
(docs/METHODS.md, "SPHR's stability from fit to fit").

Model selection keeps the epoch with the lowest validation loss, which reads the class labels
only. On real people longer training can lose the severity a risk score needs while that loss
still falls, so the trainer also records, per epoch and on training rows only (the fitting
rows and model selection's validation rows; a cross-fit's held-out fold never reaches it):

* ``*_severity_c``: how well the health distance orders unhealthy > apparently healthy > bona
  fide healthy (:func:`severity_concordance`);
* ``*_age_rho``: its Spearman correlation with age in years;
* ``fit_death_c``: when the caller gives death follow-up for the training rows (the
  development cross-fit does), Harrell's C of the health distance for death on the fitting
  rows.

The health distance here is :func:`sphr.health_distance.health_distance` from the
coordinate-wise median of the embedded real bona fide healthy fitting rows (reference
``median_of_embedded``, no age groups): one reference per sex, a cheap stand-in for the risk
stage's references per age group (``embedded_median_profile``, per age group).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sphr.labels import BONA_FIDE_HEALTHY

#: the per-epoch figures, in the order the validator records them after (loss, kNN F1)
TRACK_COLUMNS: tuple[str, ...] = ("val_severity_c", "fit_severity_c", "val_age_rho",
                                  "fit_age_rho", "fit_death_c")
#: what model selection can keep the best epoch of (``TrainConfig.selection``)
SELECTIONS: tuple[str, ...] = ("loss", "severity")


@dataclass(frozen=True)
class RowFacts:
    """What the tracking reads per training row beside its class: age in years (NaN where
    unknown) and, inside a cross-fit, death follow-up (years, event). Aligned with the
    training matrix's rows."""

    age: np.ndarray | None = None
    death_time: np.ndarray | None = None
    death_event: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> RowFacts:
        """The facts of ``rows`` (indices into the training matrix)."""
        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else np.asarray(a)[rows]

        return RowFacts(pick(self.age), pick(self.death_time), pick(self.death_event))


def health_distance(z: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Distance of each row of ``z`` from the coordinate-wise median of the embedded BFH rows
    ``reference``, one reference for the sex (:mod:`sphr.health_distance`, reference
    ``median_of_embedded``; NaN everywhere when the reference is empty)."""
    from sphr import health_distance as hd

    if len(reference) == 0:
        return np.full(len(z), np.nan)
    return hd.health_distance(z, hd.health_reference(reference, reference="median_of_embedded"))


def severity_concordance(distance: np.ndarray, labels: np.ndarray) -> float:
    """Of all pairs of rows from two different classes, the share in which the sicker row
    (unhealthy before apparently healthy before bona fide healthy) has the larger distance;
    ties count half. Harrell's C with the class as the ordering, computed from rank sums
    (one Mann-Whitney U per pair of classes). NaN with fewer than two classes."""
    labels = np.asarray(labels)
    classes = np.unique(labels)
    if len(classes) < 2 or not np.isfinite(distance).all():
        return float("nan")
    from sphr.stats import auroc

    concordant, pairs = 0.0, 0.0
    for i, sick in enumerate(classes):  # label codes: a smaller code is sicker
        for well in classes[i + 1:]:
            a, b = distance[labels == sick], distance[labels == well]
            # the pair of classes' Mann-Whitney U = AUROC x the number of its pairs
            concordant += auroc(np.r_[np.ones(a.size, bool), np.zeros(b.size, bool)],
                                np.r_[a, b]) * a.size * b.size
            pairs += a.size * b.size
    return float(concordant / pairs)


def spearman(x: np.ndarray, y: np.ndarray | None) -> float | None:
    """:func:`sphr.stats.spearman`; None without ``y`` (not tracked, which an equality
    check of two runs can compare)."""
    from sphr.stats import spearman as rho

    return None if y is None else rho(x, y)


def death_concordance(distance: np.ndarray, facts: RowFacts) -> float | None:
    """Harrell's C of the distance for death (None without follow-up: not tracked; NaN
    without a death)."""
    if facts.death_time is None or facts.death_event is None:
        return None
    from sphr.survival import c_index

    time = np.asarray(facts.death_time, float)
    ok = np.isfinite(time) & np.isfinite(distance)
    return c_index(time[ok], np.asarray(facts.death_event, bool)[ok], distance[ok])


def track_epoch(z_fit: np.ndarray, y_fit: np.ndarray, facts_fit: RowFacts | None,
                z_val: np.ndarray, y_val: np.ndarray, facts_val: RowFacts | None
                ) -> tuple[float | None, ...]:
    """One model's :data:`TRACK_COLUMNS` for one epoch, from the fitting and validation rows'
    embeddings and classes (the reference: the fitting rows' bona fide healthy)."""
    reference = z_fit[np.asarray(y_fit) == BONA_FIDE_HEALTHY]
    d_fit, d_val = health_distance(z_fit, reference), health_distance(z_val, reference)
    facts_fit, facts_val = facts_fit or RowFacts(), facts_val or RowFacts()
    return (severity_concordance(d_val, y_val), severity_concordance(d_fit, y_fit),
            spearman(d_val, facts_val.age), spearman(d_fit, facts_fit.age),
            death_concordance(d_fit, facts_fit))
