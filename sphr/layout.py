"""Where each stage's files live in a run directory (docs/ARCHITECTURE.md).

The CLI, the Dagster assets and the stages that read earlier outputs all
ask here, so a run made from the command line and one made from the UI are
the same folder.
"""

from __future__ import annotations

from pathlib import Path

#: where a run writes when no run directory is given (the Dagster resources and
#: ``python -m sphr_dagster run`` take this one)
DEFAULT_RUN_DIR = "runs/demo"
SYNTHETIC_EXPORT = "ukb_synthetic.csv"
#: what the loss comparison trained, reused or copied (in :func:`comparison_dir`)
COMPARISON_REPORT = "comparison_report.json"


def export_dir(run: str | Path) -> Path:
    return Path(run) / "export"


def ingest_dir(run: str | Path) -> Path:
    return Path(run) / "ingest"


def cohort_dir(run: str | Path, sex: str) -> Path:
    return Path(run) / "cohorts" / sex


def train_dir(run: str | Path, sex: str, loss: str = "nplb") -> Path:
    return Path(run) / "train" / sex / loss


def comparison_dir(run: str | Path, sex: str) -> Path:
    """The training stage's loss comparison: one ``<loss>/`` folder per loss."""
    return Path(run) / "train" / sex / "comparison"


def baselines_dir(run: str | Path, sex: str) -> Path:
    return Path(run) / "baselines" / sex


def evaluate_dir(run: str | Path) -> Path:
    return Path(run) / "evaluate"


def risk_dir(run: str | Path) -> Path:
    return Path(run) / "risk"


def retrieval_dir(run: str | Path, dataset: str) -> Path:
    return Path(run) / "retrieval" / dataset


def fold_dir(stage_dir: str | Path, fold: int) -> Path:
    """Fold ``fold``'s folder of the cross-fit inside a stage's per-sex folder: the fold's
    cohort (``cohorts/<sex>/folds/fold<k>``) and SPHR model (``train/<sex>/folds/fold<k>``)."""
    return Path(stage_dir) / "folds" / f"fold{fold}"


def fold_baselines_dir(run: str | Path, sex: str, fold: int) -> Path:
    """Fold ``fold``'s representations of the cross-fit (beside, not inside,
    :func:`baselines_dir`, which the baselines stage writes whole)."""
    return Path(run) / "baselines" / "folds" / sex / f"fold{fold}"


def fold_train_dir(run: str | Path, sex: str, fold: int) -> Path:
    """Fold ``fold``'s SPHR model of the cross-fit (beside the NPLB model's folder)."""
    return fold_dir(Path(run) / "train" / sex, fold)


def fold_cohort_dir(run: str | Path, sex: str, fold: int) -> Path:
    return fold_dir(cohort_dir(run, sex), fold)


def fold_count(cohort_folder: str | Path) -> int:
    """How many cross-fit folds a cohort folder holds (0: the single split only)."""
    k = 0
    while fold_dir(cohort_folder, k).is_dir():
        k += 1
    return k
