"""What every part of the cross-fitted NHANES benchmark shares: the development set's files,
the sexes, the refit seeds and directories, the death outcome, ``--set`` items read as the
folds' settings, the percentile interval of a row of bootstrap draws, and a table's rows of
scores by sex."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "sphr" / "data" / "real"
EXPORT = DATA / "nhanes_ukb_dev.csv"
OUTCOMES = DATA / "nhanes_ukb_outcomes.json"
SEXES = ("female", "male")


#: the tables a cross-fit's ``--set STAGE.KEY=VALUE`` may name, and the attribute of the
#: parsed arguments each fills (the settings of every fold's fits)
SET_STAGES: dict[str, str] = {"cohorts": "cohort", "train": "train", "risk": "risk"}


def stage_settings(items: list) -> dict[str, dict]:
    """``--set`` items (:class:`sphr.options.Override`) as each stage's settings for every
    fold, checked by the main command's check of a settings file's tables (an unknown key or
    a value of the wrong type is a ConfigError naming it)."""
    from sphr.errors import ConfigError
    from sphr.options import override_tables
    from sphr.settings.run import check_tables

    tables = check_tables(override_tables(items), "--set")
    other = sorted(set(tables) - set(SET_STAGES))
    if other:
        raise ConfigError(f"--set {other[0]}.*: a cross-fit's folds take "
                          + ", ".join(f"[{s}]" for s in SET_STAGES))
    return {attr: dict(tables.get(stage, {})) for stage, attr in SET_STAGES.items()}


def refit_seed(seed: int, refit: int) -> int:
    """The seed of every random step of refit ``refit``'s fits (cohort split, augmentation,
    triplets, SPHR's initialization and epochs, DeepPatient, the risk stage); the folds stay
    those of ``seed``. Refit 0 is ``seed`` itself (the run without ``--refits``); refit r >= 1
    the first 31-bit word of ``numpy.random.SeedSequence([seed, r])``: the derivation an
    ensemble's members take their seeds by (:func:`sphr.train.trainer.member_seed`)."""
    from sphr.train.trainer import member_seed

    if refit < 0:
        raise ValueError(f"refit must be >= 0, got {refit}")
    return member_seed(seed, refit)


def refit_dir(out: Path, refit: int) -> Path:
    """Where refit ``refit`` works: ``out`` itself for refit 0, ``out/refit<r>`` after it."""
    return out if refit == 0 else out / f"refit{refit}"


def death_outcome() -> pd.DataFrame:
    from sphr.data.ingest import ingest
    from sphr.data.outcomes import load_outcome_config

    death = ingest(EXPORT, outcome_config=load_outcome_config(OUTCOMES)).outcomes.to_pandas()
    return death.loc[death["outcome"] == "death"].set_index("eid")


def interval(draws: np.ndarray) -> list[float]:
    """[observed, low, high] of a statistic's draws (the observed first, then the bootstrap
    resamples): the 95% percentile interval over the resamples, each rounded to 4 places."""
    lo, hi = np.nanpercentile(draws[1:], (2.5, 97.5))
    return [round(float(draws[0]), 4), round(float(lo), 4), round(float(hi), 4)]


def score_rows(by_sex: dict, labels: dict[str, str],
               cells: Callable[[str, str], list[str]]) -> list[str]:
    """One markdown row per labelled score present in both sexes: its label, then
    ``cells(sex, key)`` for each sex in :data:`SEXES` order."""
    return [f"| {label} | " + " | ".join(c for s in SEXES for c in cells(s, key)) + " |"
            for key, label in labels.items()
            if all(key in by_sex.get(s, {}) for s in SEXES)]
