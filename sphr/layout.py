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
