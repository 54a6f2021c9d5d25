"""Configurable resources: where the export comes from, where runs live, what computes.

Their values are passed in: :func:`run_resources` builds them from a run's settings
(``python -m sphr_dagster run``); :func:`default_resources` with no arguments is what the UI
loads, configured at deployment time by the ``SPHR_*`` environment variables (``dg.EnvVar``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
import pydantic

from sphr import layout
from sphr import settings as lib
from sphr.synth.config import SynthConfig

if TYPE_CHECKING:
    from sphr.settings import RunSettings

#: the data source's fields for the synthetic cohort: ``synthetic_<SynthConfig field>``
SYNTH_PREFIX = "synthetic_"


class _DataSource(dg.ConfigurableResource):
    """The UK Biobank export to read, or the embedded synthetic cohort when none is set
    (written with the ``synthetic_*`` settings: ``sphr synth``'s, ``SynthConfig``)."""

    export_path: str | None = None
    #: folder the new-export sensor watches (csv, tsv, tab, parquet files)
    watch_folder: str | None = None

    @property
    def synthetic(self) -> bool:
        return not self.export_path

    def synth_config(self) -> SynthConfig:
        return lib.library_config("synth", {k.removeprefix(SYNTH_PREFIX): getattr(self, k)
                                            for k in type(self).model_fields
                                            if k.startswith(SYNTH_PREFIX)})

    def synthetic_version(self) -> str:
        """The synthetic export's data version: what it is generated from."""
        cfg, default = self.synth_config(), SynthConfig()
        version = f"synthetic-{cfg.world}-{cfg.participants}-{cfg.seed}"
        # the settings added since versions were first named: only when they differ, so a
        # default cohort keeps its version
        extra = [f"{k}={getattr(cfg, k)}" for k in ("format", "decoys", "linked")
                 if getattr(cfg, k) != getattr(default, k)]
        return "-".join([version, *extra])

    def export_file(self, run: Path) -> Path:
        """The export file this run reads (the synthetic one lives in the run folder)."""
        if self.export_path:
            return Path(self.export_path).expanduser().resolve()
        from sphr.synth.export import default_suffix

        name = Path(layout.SYNTHETIC_EXPORT).stem + default_suffix(self.synth_config().format)
        return layout.export_dir(run) / name


def _synth_fields() -> dict[str, Any]:
    types_, defaults = lib.stage_types("synth"), lib.stage_defaults("synth")
    docs = lib.stage_docs("synth")
    return {SYNTH_PREFIX + k: (tp, pydantic.Field(default=defaults[k], description=docs.get(k)))
            for k, tp in types_.items()}


#: the data source, with one ``synthetic_*`` field per ``SynthConfig`` field
DataSource = pydantic.create_model("DataSource", __base__=_DataSource, __module__=__name__,
                                   **_synth_fields())


class RunStorage(dg.ConfigurableResource):
    """The run directory every stage writes to (docs/ARCHITECTURE.md)."""

    root: str = layout.DEFAULT_RUN_DIR
    #: the model folder the refresh scores with; empty: the run's own (RUN/risk/model). Off by
    #: default; e.g. a model re-anchored by ``sphr score --reanchor`` (OUT/model)
    refresh_model: str = ""

    @property
    def run(self) -> Path:
        return Path(self.root).expanduser().resolve()

    @property
    def scoring_model(self) -> Path:
        """What the refresh scores with: ``refresh_model``, else the run."""
        return Path(self.refresh_model).expanduser().resolve() if self.refresh_model else self.run


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
    ``dg.build_resources`` (as ``sphr_dagster.assets.ingest.export_observation`` does):
    the unresolved field holds the ``EnvVar``, not the value.
    """
    if not os.environ.get(name):
        return None
    return dg.EnvVar.int(name) if integer else dg.EnvVar(name)


def _set(**fields: object) -> dict[str, object]:
    """The fields given a value: the others keep the resource class's default."""
    return {k: v for k, v in fields.items() if v is not None}


def default_resources(run_dir: str | None = None, *, export: str | None = None,
                      device: str | None = None, synth: Mapping[str, Any] | None = None,
                      environment: bool = True, engine: str | None = None,
                      fit_cpus: float | None = None, fit_gpus: float | None = None) -> dict:
    """The resources with these values. ``environment``: a value not given is read from the
    ``SPHR_*`` variable (the UI's deployment-time configuration, through ``dg.EnvVar``, see
    :func:`env_var`); without it, a value not given is the class default (no export: the
    synthetic cohort), so a run is exactly what it was given."""
    from sphr_dagster.fits import FitEngine
    from sphr_dagster.io_manager import ParquetIOManager

    def env(name: str, integer: bool = False) -> Any:
        return env_var(name, integer=integer) if environment else None

    root = run_dir or env("SPHR_RUN_DIR")
    synth = {SYNTH_PREFIX + k: v for k, v in lib.plain(dict(synth or {})).items()}
    return {
        "data_source": DataSource(**_set(
            export_path=export or env("SPHR_EXPORT"),
            **{"synthetic_participants": env("SPHR_SYNTHETIC_PARTICIPANTS", True),
               "synthetic_world": env("SPHR_SYNTHETIC_WORLD"), **synth},
            watch_folder=env("SPHR_WATCH_FOLDER"),
        )),
        "storage": RunStorage(**_set(root=root)),
        "compute": Compute(**_set(device=device or env("SPHR_DEVICE"))),
        "parquet_io": ParquetIOManager(**_set(root=root)),
        # where the training steps' fits run (sphr_dagster.fits: local, ray, slurm, k8s)
        "fit_engine": FitEngine(**_set(
            engine=engine or env("SPHR_FIT_ENGINE"),
            cpus_per_fit=fit_cpus, gpus_per_fit=fit_gpus,
            ray_address=env("SPHR_RAY_ADDRESS"), slurm_partition=env("SPHR_SLURM_PARTITION"))),
    }


def run_resources(settings: RunSettings) -> dict:
    """The resources of a run of ``python -m sphr_dagster run``: its settings, no environment."""
    return default_resources(settings.run_dir, export=settings.export, device=settings.device,
                             synth=settings.stages["synth"], environment=False,
                             engine=settings.engine, fit_cpus=settings.fit_cpus,
                             fit_gpus=settings.fit_gpus)


def resource_config(settings: RunSettings) -> dict[str, Any]:
    """The same values as the ``resources:`` section of a run config (the UI's launchpad)."""
    synth = {SYNTH_PREFIX + k: v for k, v in lib.plain(settings.stages["synth"]).items()}
    return {"data_source": {"config": {"export_path": settings.export, **synth}},
            "storage": {"config": {"root": settings.run_dir}},
            "parquet_io": {"config": {"root": settings.run_dir}},
            "compute": {"config": {"device": settings.device}},
            "fit_engine": {"config": {"engine": settings.engine,
                                      "cpus_per_fit": settings.fit_cpus,
                                      "gpus_per_fit": settings.fit_gpus}}}
