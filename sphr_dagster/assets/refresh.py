"""risk_refresh: re-score everyone in the current export with the fitted model (no refit).

``refresh/baseline`` ingests the export (the configured file, or the one the
new-export sensor found), the blocking ``export_drift`` check compares it
with the training distribution, and ``risk/refresh`` scores everyone into
``RUN/risk/refresh/<export-version>/`` (sphr.risk.serve.refresh).
"""

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from sphr_dagster import metadata as md
from sphr_dagster.assets.ingest import ukb_export_file
from sphr_dagster.resources import Compute, DataSource, RunStorage


@dg.asset(key=["refresh", "baseline"], group_name="refresh", deps=[ukb_export_file],
          io_manager_key="parquet_io",
          description="The export to re-score, ingested (one row per participant, instance 0). "
          "Kept apart from ingest/baseline, which the fitted model was built from.")
def refresh_baseline(context: dg.AssetExecutionContext, data_source: DataSource,
                     storage: RunStorage) -> pd.DataFrame:
    from sphr.data.fingerprint import fingerprint
    from sphr.data.ingest import ingest
    from sphr.errors import InputError
    from sphr.io import write_json, write_parquet

    path = data_source.export_file(storage.run)
    if not path.is_file():
        raise InputError(f"{path}: no export to refresh from (configure data_source."
                         "export_path, or materialize export/ukb_export first)")
    version = fingerprint(path)
    # the linked records as the run's own ingest built them (its outcome table and censoring
    # dates, RUN/run_settings.json), so that the refresh judges its groups on them
    result = ingest(path, outcome_config=_run_outcome_config(storage.run))
    baseline = result.baseline.to_pandas()
    folder = storage.run / "refresh"
    if result.outcomes is not None:
        write_parquet(result.outcomes, folder / "outcomes.parquet")
    else:  # an earlier export's records would pass for this one's
        (folder / "outcomes.parquet").unlink(missing_ok=True)
    write_json({"export": str(path), "export_version": version,
                "no_outcomes": None if result.outcomes is not None
                else result.report["outcomes"]["why"]},
               folder / "baseline_source.json")
    context.add_output_metadata({"export": md.path(path), "export_version": version,
                                 "participants": len(baseline)})
    return baseline


def _run_outcome_config(run: Path) -> Any:
    """The outcome table and censoring dates the run's ingest used (``stages.ingest`` of
    RUN/run_settings.json); the library's defaults where the run did not record them."""
    from sphr.data.config import IngestSettings
    from sphr.io import read_json

    path = run / "run_settings.json"
    stages = read_json(path).get("stages", {}) if path.is_file() else {}
    keys = ("outcomes", "censoring", "first_occurrence_fields")
    return IngestSettings(**{k: v for k, v in (stages.get("ingest") or {}).items()
                             if k in keys}).outcome_config()


@dg.asset_check(asset=refresh_baseline, blocking=True,
                description="Before scoring: per sex and feature, the new export against the "
                "training population (standardized mean difference, PSI, KS, out-of-range "
                "share; sphr.risk.serve.drift, the table sphr score writes). A unit mistake blocks "
                "the refresh; drift (|SMD| or PSI >= 0.25) warns.")
def export_drift(baseline: pd.DataFrame, storage: RunStorage) -> dg.AssetCheckResult:
    from sphr.errors import InputError
    from sphr.risk.serve.drift import drift_table, summarize

    try:
        table = drift_table(baseline, storage.scoring_model)
    except InputError as err:  # no fitted model yet
        return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.ERROR,
                                   metadata={"error": str(err)})
    verdict = summarize(table)
    flagged = table[table["status"] != "ok"]
    severity = (dg.AssetCheckSeverity.ERROR if verdict["unit_mistakes"]
                else dg.AssetCheckSeverity.WARN)
    return dg.AssetCheckResult(
        passed=not verdict["unit_mistakes"] and not verdict["drifted"], severity=severity,
        description=("unit mistake: " + ", ".join(verdict["unit_mistakes"])
                     if verdict["unit_mistakes"] else
                     "drift: " + ", ".join(verdict["drifted"]) if verdict["drifted"] else "ok"),
        metadata={"unit_mistakes": ", ".join(verdict["unit_mistakes"]) or "none",
                  "drifted": ", ".join(verdict["drifted"]) or "none",
                  "max_psi": float(verdict["max_psi"]), "flagged": len(flagged),
                  "per_feature": md.table(table.round(3), index=False)})


@dg.asset(key=["risk", "refresh"], group_name="refresh",
          ins={"baseline": dg.AssetIn(key=["refresh", "baseline"])},
          deps=[["risk", "risk_report"]],
          description="Every participant of the export scored with the current model (fitted "
          "normalizer, representations, calibrated thresholds; nothing refitted, model sha256 "
          "checked): RUN/risk/refresh/<export-version>/ with the risk-group export, the "
          "'changes since the previous refresh' table, imputed and unscorable participants.")
def risk_refresh(context: dg.AssetExecutionContext, baseline: pd.DataFrame,
                 storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
    from sphr.io import read_json
    from sphr.risk.serve.drift import drift_table
    from sphr.risk.serve.refresh import run_refresh

    source = read_json(storage.run / "refresh" / "baseline_source.json")
    drift = drift_table(baseline, storage.scoring_model)
    linked = storage.run / "refresh" / "outcomes.parquet"
    info = run_refresh(storage.run, baseline, source["export"], source["export_version"],
                       model=storage.scoring_model, device=compute.device, drift=drift,
                       outcomes=pd.read_parquet(linked) if linked.is_file() else None,
                       no_outcomes=source.get("no_outcomes"))
    context.log.info(f"refresh {source['export_version']}: {info['participants_scored']} scored "
                     f"in {info['seconds']} s; changes {info['changes']}")
    return dg.MaterializeResult(metadata={
        "report": md.path(f"{info['out']}/report.html"),
        "export": md.path(f"{info['out']}/risk_group_export.csv"),
        "export_version": source["export_version"],
        "previous_version": info["previous_version"] or "none",
        "scored": info["participants_scored"], "imputed": info["participants_imputed"],
        "unscorable": info["unscorable"],
        "changes": md.table(info["summary"], index=False),
        "groups_complete_vs_imputed": md.table(info["completeness"], index=False),
        "model_sha256_unchanged": True, "seconds": float(info["seconds"]),
    })
