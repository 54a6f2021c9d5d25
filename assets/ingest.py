"""Export and ingest: the UKB export (user file or synthetic cohort), baseline and follow-up."""

import dagster as dg
import pandas as pd

from pipeline import metadata as md
from pipeline.resources import DataSource, RunStorage
from sphr import layout


@dg.asset(group_name="ingest", key_prefix=["export"],
          description="The UK Biobank export: the configured file, or the embedded synthetic "
          "cohort (true UKB ukbconv format) when no export is configured.")
def ukb_export(context: dg.AssetExecutionContext, data_source: DataSource,
               storage: RunStorage) -> dg.MaterializeResult:
    from sphr.data.reader import inspect_export

    path = data_source.export_file(storage.run)
    if data_source.synthetic:
        from sphr.data.export import write_export
        from sphr.data.synth import generate_cohort

        context.log.info(f"generating {data_source.synthetic_participants} synthetic participants")
        cohort = generate_cohort(data_source.synthetic_participants, data_source.synthetic_seed)
        write_export(cohort, path, "ukbconv", seed=data_source.synthetic_seed)
    layout_ = inspect_export(path)
    return dg.MaterializeResult(metadata={
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
    },
)
def ingest(context: dg.AssetExecutionContext, data_source: DataSource, storage: RunStorage):
    from sphr.data.ingest import ingest as read_export
    from sphr.io import write_json

    path = data_source.export_file(storage.run)
    result = read_export(path)
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
