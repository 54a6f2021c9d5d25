"""Configurable resources: where the export comes from, where runs live, what computes."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from sphr import layout


class DataSource(dg.ConfigurableResource):
    """The UK Biobank export to read, or the embedded synthetic cohort when none is set."""

    export_path: str | None = None
    synthetic_participants: int = 20_000
    synthetic_seed: int = 0
    #: the synthetic world (docs/SYNTH.md): ``linear`` (the null world) or ``nonlinear``
    synthetic_world: str = "linear"
    #: folder the new-export sensor watches (csv, tsv, tab, parquet files)
    watch_folder: str | None = None

    @property
    def synthetic(self) -> bool:
        return not self.export_path

    def export_file(self, run: Path) -> Path:
        """The export file this run reads (the synthetic one lives in the run folder)."""
        if self.export_path:
            return Path(self.export_path).expanduser().resolve()
        return layout.export_dir(run) / layout.SYNTHETIC_EXPORT


class RunStorage(dg.ConfigurableResource):
    """The run directory every stage writes to (docs/ARCHITECTURE.md)."""

    root: str = "runs/demo"

    @property
    def run(self) -> Path:
        return Path(self.root).expanduser().resolve()


class Compute(dg.ConfigurableResource):
    """Device for torch steps (auto: CUDA when present) and CPU threads (0: all cores)."""

    device: str = "auto"
    threads: int = 0

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        from sphr.device import configure_threads

        configure_threads(self.threads or None)


def default_resources(run_root: str | None = None) -> dict:
    """Resources as a fresh checkout runs them; environment variables override."""
    from pipeline.io_manager import ParquetIOManager

    root = run_root or os.environ.get("SPHR_RUN_DIR", "runs/demo")
    return {
        "data_source": DataSource(
            export_path=os.environ.get("SPHR_EXPORT") or None,
            synthetic_participants=int(os.environ.get("SPHR_SYNTHETIC_PARTICIPANTS", 20_000)),
            synthetic_world=os.environ.get("SPHR_SYNTHETIC_WORLD", "linear"),
            watch_folder=os.environ.get("SPHR_WATCH_FOLDER") or None,
        ),
        "storage": RunStorage(root=root),
        "compute": Compute(device=os.environ.get("SPHR_DEVICE", "auto")),
        "parquet_io": ParquetIOManager(root=root),
        # the training step's launcher (assets/training.py); swap in dagster_k8s.PipesK8sClient
        # for a GPU node (README, Dagster section)
        "pipes_client": dg.PipesSubprocessClient(),
    }
