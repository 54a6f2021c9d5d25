"""Loss comparison (Table 3 / A2): each loss's test embeddings under the same protocol.

The models are the training stage's (:mod:`sphr.train.comparison`, ``sphr train COHORT
--losses ...``): one per loss, same cohort, triplets, seeds and epochs, in
``RUN/train/<sex>/comparison/<loss>/``. This module reads them
(:func:`sphr.evaluate.inputs.read_loss_comparison`) and scores them on the same splits
(default: XGBoost, as in the paper's tables).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.artifacts import Cohort
from sphr.evaluate.inputs import read_loss_comparison
from sphr.evaluate.protocol import EvalConfig, EvalResult, classify_embeddings


def load_triplets(cohort: Cohort) -> np.ndarray:
    """A cohort's offline triplets (benchmarks/train_quality.py reads them with this)."""
    from sphr.cohorts.triplets import read_triplets

    return read_triplets(cohort.directory / "triplets.npz", len(cohort.train))


def compare_losses(run_dir: str | Path, cohort: Cohort, losses: Sequence[str], *,
                   eval_config: EvalConfig,
                   prior: tuple[Mapping[str, np.ndarray], EvalResult] | None = None
                   ) -> tuple[pd.DataFrame, EvalResult, dict[str, Any]]:
    """Scores (column ``loss``) of each loss's embedding under the protocol.

    ``prior``: the representations' embeddings and their result. A loss whose embedding is
    one of them (the demo's NPLB model is the SPHR model) takes that representation's
    records for the same splits and classifier settings instead of refitting them.
    """
    Z, info = read_loss_comparison(run_dir, cohort, losses)
    labels = cohort.test["label"].to_numpy(np.int64)
    if prior is None:
        result = classify_embeddings(Z, labels, eval_config)
    else:
        reps, done = prior
        same_as = {loss: next(r for r, Zr in reps.items() if np.array_equal(Zr, Zl))
                   for loss, Zl in Z.items()
                   if any(np.array_equal(Zr, Zl) for Zr in reps.values())}
        result = classify_embeddings(Z, labels, eval_config, prior=done, same_as=same_as)
    scores = result.scores.rename(columns={"representation": "loss"})
    return scores, result, info
