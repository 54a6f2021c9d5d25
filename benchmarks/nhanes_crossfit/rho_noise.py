"""How far the held-out BFH's Spearman of a standardized score with age moves by chance alone.

The standardization rule (docs/METHODS.md, "Higher risk for your age") asks |Spearman| <= 0.10
in every score and sex among the held-out bona fide healthy (BFH). With about 250 of them per
sex, a standardizer that leaves no age in the scores still draws |Spearman| > 0.10 in a cell
now and then, and the rule needs all 18 cells at once. Permuting age among one sex's held-out
BFH (one permutation for every score, so the scores' own correlation is kept) draws exactly
that: the rule's pass rate for a perfect standardizer, each cell's permutation p of the
observed Spearman, and which cells lie beyond chance after Holm's correction.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from sphr.risk.validation.groups import holm

#: the cohort label of the bona fide healthy (sphr.cohorts)
BFH = 2
#: the cross-fitted scores every candidate's run writes
SCORES = "crossfit_scores_marker.parquet"


def _centred_ranks(x: np.ndarray) -> np.ndarray:
    r = rankdata(x)
    r -= r.mean()
    return r / np.sqrt((r * r).sum())


def held_out_bfh(run: Path) -> pd.DataFrame:
    frame = pd.read_parquet(run / SCORES)
    return frame[frame["label"] == BFH]


def permutation_null(bfh: pd.DataFrame, methods: tuple[str, ...], sexes: tuple[str, ...],
                     max_rho: float, n_perm: int = 2000, seed: int = 0) -> dict:
    """Per cell (sex, method): n, the observed Spearman and its two-sided permutation p; and
    the share of permutations in which every cell's |Spearman| <= ``max_rho`` (the rule's pass
    rate for scores that hold no age at all)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EA4]))
    cells, every_cell_within = {}, np.ones(n_perm, bool)
    for sex in sexes:
        people = bfh[bfh["sex"] == sex]
        age = people["age"].to_numpy(float)
        perms = np.stack([rng.permutation(age.size) for _ in range(n_perm)])
        for m in methods:
            score = people[m].to_numpy(float)
            ok = np.isfinite(score) & np.isfinite(age)
            rs = _centred_ranks(score[ok])
            observed = float(rs @ _centred_ranks(age[ok]))
            # the permuted ages of the rows with a score, ranked among themselves
            null = np.array([rs @ _centred_ranks(age[p][ok]) for p in perms])
            every_cell_within &= np.abs(null) <= max_rho
            p = (1 + int((np.abs(null) >= abs(observed) - 1e-12).sum())) / (1 + n_perm)
            cells[(sex, m)] = {"n": int(ok.sum()), "rho": round(observed, 3), "p": p,
                               "null_sd": round(float(null.std()), 3)}
    p_holm = holm(np.array([c["p"] for c in cells.values()]))
    for cell, adjusted in zip(cells.values(), p_holm, strict=True):
        cell["p_holm"] = float(adjusted)
    return {"cells": cells, "pass_rate": round(float(every_cell_within.mean()), 4),
            "n_perm": n_perm}


def beyond_chance(null: dict, alpha: float = 0.05) -> list[str]:
    """The cells whose Spearman with age is beyond chance after Holm's correction."""
    return [f"{sex} {m}: rho {c['rho']:+.2f} (Holm p {c['p_holm']:.3f})"
            for (sex, m), c in null["cells"].items() if c["p_holm"] < alpha]
