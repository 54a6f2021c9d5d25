"""What a run checks before anything is fitted: the export, its fields, and whether each sex has
enough people of each class for every stage's settings in force.

``python -m sphr_dagster run`` calls :func:`preflight` after resolving its settings and before
it writes anything, so a problem that can be seen in the export or the settings stops the run
in seconds with one line per problem, instead of minutes later inside a stage. The checks:

1. the export exists and is readable, and has every required field (the ingest's own column
   planner, :func:`sphr.data.ingest.plan_columns`) and every P0 marker (without one, nobody can
   be bona fide healthy);
2. settings that depend on each other agree (:data:`AGREEMENTS`);
3. each sex's partitions, counted with the cohort step's own rules
   (:func:`sphr.cohorts.counts.partition_counts`), hold what every stage needs
   (:data:`REQUIREMENTS`: one entry per need, its minimum derived from the settings here and
   nowhere else, so a new need is one entry).

Above the stages (like the rest of :mod:`sphr.settings`): it imports any stage it needs and
no stage imports it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sphr.errors import ConfigError, InputError, SphrError
from sphr.labels import BONA_FIDE_HEALTHY

if TYPE_CHECKING:
    import pandas as pd

    from sphr.cohorts.counts import PartitionCounts
    from sphr.settings.run import RunSettings


class PreflightError(SphrError):
    """Every problem the pre-flight found, one line each (``problems``)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Requirement:
    """One stage's need of each sex's partitions under the run's settings."""

    #: who needs it, as the message says it ("the evaluation's kNN")
    what: str
    #: what is counted ("evaluation training participants per split")
    counted: str
    #: the fewest needed under these settings; None: the need is not in force
    minimum: Callable[[RunSettings], int | None]
    #: how many this sex has
    count: Callable[[PartitionCounts, RunSettings], int]
    #: the settings that lower the need, as the message names them
    remedy: str


def _eval_fit_size(counts: PartitionCounts, settings: RunSettings) -> int:
    """Participants each evaluation split fits on: the test partition less the split's own
    held-out share (scikit-learn's ShuffleSplit rounds the held-out count up)."""
    n = counts.total("test")
    return n - math.ceil(settings.config("evaluate").test_size * n)


def _knn_neighbours(settings: RunSettings) -> int | None:
    from sphr.evaluate.classifiers import KNN_PARAMS

    return KNN_PARAMS["n_neighbors"] if "knn" in settings.config("evaluate").classifiers \
        else None


def _calibration_minimum(settings: RunSettings) -> int | None:
    from sphr.risk.distance import MIN_CALIBRATION_BFH

    return MIN_CALIBRATION_BFH if "calibrated" in settings.config("risk").modes else None


def _supervised_folds(settings: RunSettings) -> int | None:
    risk = settings.config("risk")
    return risk.supervised_folds if "supervised_xgboost" in risk.methods else None


def _triplet_classes(counts: PartitionCounts, settings: RunSettings) -> int:
    """Triplet classes of the training rows, as the miner counts them: two classes, one of
    them with 2+ members (:func:`sphr.cohorts.triplets.mine_triplets`)."""
    sizes = list(counts.triplet_classes.values())
    return len(sizes) if any(n >= 2 for n in sizes) else min(len(sizes), 1)


def _bfh(counts: PartitionCounts, settings: RunSettings) -> int:
    return counts.classes.get(BONA_FIDE_HEALTHY, 0)


def _smallest_test_class(counts: PartitionCounts, settings: RunSettings) -> int:
    return min(counts.test.values(), default=0)


def _crossfit_bfh(settings: RunSettings) -> int | None:
    """Each fold's cohort calibrates on the other folds' BFH: at least the calibration
    minimum in every fold's share of them, so folds x that minimum in the cohort."""
    from sphr.risk.distance import MIN_CALIBRATION_BFH

    folds = settings.config("cohorts").folds
    return folds * MIN_CALIBRATION_BFH if folds >= 2 else None


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("the bona fide healthy definition", "bona fide healthy participants",
                lambda s: 1, _bfh,
                "check that the P0 markers are in UK Biobank units (glucose mmol/L, HbA1c "
                "mmol/mol, CRP mg/L), relax the ranges (`--ranges`, `[cohorts] ranges`) or add "
                "people"),
    Requirement("the cohort's classes", "classes", lambda s: 2,
                lambda c, s: len(c.classes), "add people of the missing class"),
    Requirement("the triplets", "training triplet classes (one with 2+ members)", lambda s: 2,
                _triplet_classes,
                "set `[cohorts] triplet_classes` to the other kind or add people"),
    Requirement("the evaluation's stratified splits", "people in the test partition's "
                "smallest class", lambda s: 2 if s.config("evaluate").stratify else None,
                _smallest_test_class,
                "set `[evaluate] stratify = false`, raise `[cohorts] test_size` or add people"),
    Requirement("the evaluation's kNN", "evaluation training participants per split",
                _knn_neighbours, _eval_fit_size,
                "drop knn from `[evaluate] classifiers`, lower `[evaluate] test_size`, raise "
                "`[cohorts] test_size` or add people"),
    Requirement("the risk stage's calibrated bounds", "calibration bona fide healthy "
                "participants", _calibration_minimum,
                lambda c, s: c.calibration.get(BONA_FIDE_HEALTHY, 0),
                "raise `[cohorts] calibration_size`, leave calibrated out of `[risk] modes` or "
                "add people"),
    Requirement("the cross-fit's folds", "bona fide healthy participants", _crossfit_bfh,
                _bfh, "lower `[cohorts] folds` (0: the single split) or add people"),
    Requirement("the supervised comparators' folds", "training participants",
                _supervised_folds, lambda c, s: c.total("train"),
                "lower `[risk] supervised_folds`, leave supervised_xgboost out of "
                "`[risk] methods` or add people"),
)


AGREEMENTS: tuple[Callable[[RunSettings], str | None], ...] = ()


@contextmanager
def _quiet() -> Iterator[None]:
    """The ingest's warnings and progress bar are the ingest stage's to print, not the
    pre-flight's (it reads the same export a moment before)."""
    import os

    logger = logging.getLogger("sphr")
    level, progress = logger.level, os.environ.get("SPHR_PROGRESS")
    logger.setLevel(logging.ERROR)
    os.environ["SPHR_PROGRESS"] = "0"
    try:
        yield
    finally:
        logger.setLevel(level)
        if progress is None:
            os.environ.pop("SPHR_PROGRESS", None)
        else:
            os.environ["SPHR_PROGRESS"] = progress


def check_export_fields(export: str | Path) -> None:
    """The export is a readable file with every required field and every P0 marker."""
    from sphr.data.export_layout import inspect_export
    from sphr.data.fields import BY_NAME, P0_MARKERS
    from sphr.data.headers import ColumnKey
    from sphr.data.ingest import plan_columns

    path = Path(export)
    if not path.is_file():
        raise InputError("no such export file" if not path.exists() else "not a file",
                         file=path)
    try:
        path.open("rb").close()
    except OSError as exc:
        raise InputError(f"cannot read the export: {exc.strerror}", file=path) from None
    layout = inspect_export(path)
    plan_columns(layout, [])
    for name in P0_MARKERS:
        f = BY_NAME[name]
        if ColumnKey(f.id, 0, 0) not in layout.columns:
            raise InputError(f"P0 marker {f.id} ({name}) missing: bona fide healthy cannot be "
                             "defined without it (docs/METHODS.md, classes); export the field's "
                             "instance 0", file=path, field=f"{f.id}-0.0", row=0)


def requirement_problems(counts: dict[str, PartitionCounts], settings: RunSettings) -> list[str]:
    """One line per sex and unmet :data:`REQUIREMENTS` entry."""
    problems = []
    for sex, c in counts.items():
        for req in REQUIREMENTS:
            need = req.minimum(settings)
            if need is None:
                continue
            have = req.count(c, settings)
            if have < need:
                problems.append(f"{sex}: {have} {req.counted}, {req.what} needs {need}: "
                                f"{req.remedy}")
                if req.what in ("the bona fide healthy definition", "the cohort's classes"):
                    break  # no partition can be counted without them
    return problems


def baseline_of(settings: RunSettings) -> pd.DataFrame:
    """The export's ingested baseline, in memory (nothing written)."""
    from sphr.data.ingest import ingest

    config = settings.config("ingest")
    with _quiet():  # read as the ingest stage will read it, a truncated last row included
        result = ingest(settings.export, outcome_config=config.outcome_config(),
                        drop_truncated_last_row=config.drop_truncated_last_row)
    return result.baseline.to_pandas()


def preflight(settings: RunSettings) -> None:
    """Stop with every problem found (a :class:`PreflightError`, one line each) before
    anything is written or fitted; without an export (the synthetic demo) only the settings'
    agreement is checked."""
    problems = [p for p in (rule(settings) for rule in AGREEMENTS) if p]
    if settings.export is None:
        if problems:
            raise PreflightError(problems)
        return
    from sphr.cohorts.counts import partition_counts

    try:
        check_export_fields(settings.export)
        counts = partition_counts(baseline_of(settings), settings.config("cohorts"))
    except (InputError, ConfigError) as err:
        raise PreflightError([*problems, str(err)]) from None
    problems += requirement_problems(counts, settings)
    if problems:
        raise PreflightError(problems)
