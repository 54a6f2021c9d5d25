"""Export and ingest: the UKB export (user file or synthetic cohort), baseline and follow-up."""

import dagster as dg
import pandas as pd

from sphr import layout
from sphr.settings import RunSettings
from sphr_dagster import metadata as md
from sphr_dagster.config import from_settings, library_config, stage_config
from sphr_dagster.resources import DataSource, RunStorage

IngestConfig = stage_config(
    "ingest", "IngestConfig", "The outcome table's overrides and each source's censoring "
    "date (``sphr ingest --outcomes``, docs/OUTCOMES.md); defaults: the library's "
    "(``sphr.data.config.IngestSettings``).", module=__name__)


def export_version(data_source: DataSource, storage: RunStorage) -> tuple[str, dict]:
    """Data version of the configured export: its content fingerprint (sphr.data.fingerprint);
    for the embedded synthetic cohort, its size and seed (the file is written by ukb_export)."""
    from sphr.data.fingerprint import fingerprint

    if data_source.synthetic:
        version = data_source.synthetic_version()
        return version, {"data_version": version, "source": "synthetic"}
    path = data_source.export_file(storage.run)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the configured export does not exist")
    st = path.stat()
    version = fingerprint(path)
    return version, {"data_version": version, "path": md.path(path),
                     "size_mb": round(st.st_size / 2**20, 2), "modified": st.st_mtime}


@dg.observable_source_asset(
    key=["export", "ukb_export_file"], group_name="export",
    description="The export file as delivered. Observed (the UI's 'Observe sources', the "
    "new-export sensor, `python -m sphr_dagster run`) with a content fingerprint as its data "
    "version, so a changed file marks everything downstream stale.")
def ukb_export_file(data_source: DataSource, storage: RunStorage) -> dg.ObserveResult:
    version, meta = export_version(data_source, storage)
    return dg.ObserveResult(data_version=dg.DataVersion(version), metadata=meta)


def export_observation(data_source: DataSource, storage: RunStorage) -> dg.AssetObservation:
    """An observation of ukb_export_file with the export's version, for callers outside a step
    (the runner, tests) to record *before* materializing: a step's own observation would come
    after the provenance of what it materializes."""
    # outside a step the resources are not initialised: build_resources resolves their
    # dg.EnvVar fields (sphr_dagster/resources.py) as a run would
    with dg.build_resources({"data_source": data_source, "storage": storage}) as res:
        version, meta = export_version(res.data_source, res.storage)
    return dg.AssetObservation(asset_key=ukb_export_file.key, metadata=meta,
                               tags={"dagster/data_version": version})


@dg.asset(group_name="ingest", key_prefix=["export"], deps=[ukb_export_file],
          description="The UK Biobank export: the configured file, or the embedded synthetic "
          "cohort (true UKB ukbconv format) when no export is configured. Data version: the "
          "file's content fingerprint.")
def ukb_export(context: dg.AssetExecutionContext, data_source: DataSource,
               storage: RunStorage) -> dg.MaterializeResult:
    from sphr.data.export_layout import inspect_export

    path = data_source.export_file(storage.run)
    if data_source.synthetic:
        from sphr.synth.cohort import generate_cohort
        from sphr.synth.export import write_export

        synth = data_source.synth_config()
        context.log.info(f"generating {synth.participants} synthetic participants "
                         f"({synth.world} world)")
        cohort = generate_cohort(synth.participants, synth.seed, world=synth.world,
                                 linked=synth.linked)
        write_export(cohort, path, synth.format, decoys=synth.decoys, seed=synth.seed,
                     linked=synth.linked)
    layout_ = inspect_export(path)
    from sphr.data.fingerprint import fingerprint

    version = fingerprint(path)
    return dg.MaterializeResult(data_version=dg.DataVersion(version), metadata={
        "data_version": version,
        "path": md.path(path), "source": "synthetic" if data_source.synthetic else "user export",
        "format": layout_.describe(), "columns": len(layout_.header),
        "size_mb": round(path.stat().st_size / 2**20, 2),
        "modified": path.stat().st_mtime,
    })


@dg.multi_asset(
    group_name="ingest",
    deps=[ukb_export],
    outs={
        "baseline": dg.AssetOut(key=["ingest", "baseline"], io_manager_key="parquet_io",
                                description="One row per participant, instance 0: sex, age, "
                                "the 64 predictors, conditions, medication, label."),
        "followup": dg.AssetOut(key=["ingest", "followup"], io_manager_key="parquet_io",
                                description="One row per participant and later visit, with "
                                "new diagnoses since baseline."),
        "outcomes": dg.AssetOut(key=["ingest", "outcomes"], io_manager_key="parquet_io",
                                is_required=False,
                                description="Linked hospital, cancer and death records: one "
                                "row per participant and outcome (event, time_years, "
                                "prevalent); only when the export has the linked fields."),
    },
)
def ingest(context: dg.AssetExecutionContext, config: IngestConfig, data_source: DataSource,
           storage: RunStorage):
    from sphr.data.ingest import ingest as read_export
    from sphr.io import write_json

    path = data_source.export_file(storage.run)
    settings = library_config("ingest", config)
    result = read_export(path, drop_truncated_last_row=settings.drop_truncated_last_row,
                         outcome_config=settings.outcome_config())
    report = result.report
    write_json(report, layout.ingest_dir(storage.run) / "ingest_report.json")
    for warning in report["warnings"]:
        context.log.warning(warning)
    labels = pd.DataFrame(report["labels_by_sex"])
    completeness = pd.Series(report["completeness"]).sort_values()
    yield dg.Output(result.baseline.to_pandas(), output_name="baseline", metadata={
        "participants": report["participants"], "rows_read": report["rows_read"],
        "labels_by_sex": md.table(labels),
        "least_complete_fields": md.table(completeness.head(10).to_frame("completeness")),
        "special_codes": dg.MetadataValue.json(report["special_codes"]),
        "seconds": report["seconds"],
    })
    yield dg.Output(result.followup.to_pandas(), output_name="followup", metadata={
        "visits": dg.MetadataValue.json(report["followup_visits"]),
    })
    stale = layout.ingest_dir(storage.run) / "outcomes.parquet"
    if result.outcomes is not None:
        outcomes = result.outcomes
        outcomes = outcomes.to_pandas() if hasattr(outcomes, "to_pandas") else outcomes
        yield dg.Output(outcomes, output_name="outcomes", metadata={
            "rows": len(outcomes),
            "incident_events": dg.MetadataValue.json(
                outcomes[~outcomes["prevalent"]].groupby("outcome")["event"].sum()
                .astype(int).to_dict()),
        })
    elif stale.exists():  # an earlier export had linked fields, this one has none
        stale.unlink()


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    return {ingest: from_settings(IngestConfig, settings.stages["ingest"])}
