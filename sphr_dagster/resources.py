"""Configurable resources: where the export comes from, where runs live, what computes."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from sphr import layout
from sphr.data.synth_config import SynthConfig


class DataSource(dg.ConfigurableResource):
    """The UK Biobank export to read, or the embedded synthetic cohort when none is set.
    The synthetic defaults are ``sphr synth``'s (``sphr.data.synth_config.SynthConfig``)."""

    export_path: str | None = None
    synthetic_participants: int = SynthConfig.participants
    synthetic_seed: int = SynthConfig.seed
    #: the synthetic world (docs/SYNTH.md): ``linear`` (the null world) or ``nonlinear``
    synthetic_world: str = SynthConfig.world
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


def env_var(name: str, *, integer: bool = False) -> str | int | None:
    """``dg.EnvVar(name)`` (``dg.EnvVar.int``) when the variable is set and non-empty, else None.

    Dagster's way to configure a resource from the environment is an ``EnvVar``
    as the field value: the variable is read when the resource is initialised
    (at run launch, in the run's own process), and the UI shows its name, not
    its value. An ``EnvVar`` whose variable is unset at that point is a config
    error, and every ``SPHR_*`` variable is optional, so one is passed only
    when the variable is set where the definitions load; otherwise the field
    keeps the default declared on the resource class above (the one place the
    defaults live). Outside a run, read such a resource through
    ``dg.build_resources`` (as ``assets.ingest.export_observation`` does): the
    unresolved field holds the ``EnvVar``, not the value.
    """
    if not os.environ.get(name):
        return None
    return dg.EnvVar.int(name) if integer else dg.EnvVar(name)


def _set(**fields: object) -> dict[str, object]:
    """The fields given a value: the others keep the resource class's default."""
    return {k: v for k, v in fields.items() if v is not None}


def default_resources(run_root: str | None = None) -> dict:
    """Resources as a fresh checkout runs them; ``SPHR_*`` environment variables override the
    class defaults (through ``dg.EnvVar``, see :func:`env_var`), and ``run_root`` overrides
    ``SPHR_RUN_DIR``."""
    from sphr_dagster.io_manager import ParquetIOManager

    root = run_root or env_var("SPHR_RUN_DIR")
    return {
        "data_source": DataSource(**_set(
            export_path=env_var("SPHR_EXPORT"),
            synthetic_participants=env_var("SPHR_SYNTHETIC_PARTICIPANTS", integer=True),
            synthetic_world=env_var("SPHR_SYNTHETIC_WORLD"),
            watch_folder=env_var("SPHR_WATCH_FOLDER"),
        )),
        "storage": RunStorage(**_set(root=root)),
        "compute": Compute(**_set(device=env_var("SPHR_DEVICE"))),
        "parquet_io": ParquetIOManager(**_set(root=root)),
        # the training step's launcher (assets/training.py); swap in dagster_k8s.PipesK8sClient
        # for a GPU node (README, Dagster section)
        "pipes_client": dg.PipesSubprocessClient(),
    }
