"""Risk groups per sex, and the exported cross-sex risk-group report."""

import dagster as dg

from sphr import layout
from sphr.settings import RunSettings
from sphr_dagster import metadata as md
from sphr_dagster.config import from_settings, library_config, stage_config
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage

RiskSettings = stage_config(
    "risk", "RiskSettings", "Methods and interval modes of the health score, bootstrap of "
    "the discrimination CIs, ...: every field of the library's ``sphr.risk.config.RiskConfig`` "
    "(the device is the compute resource's, the sexes the partition's).", module=__name__)


def _config(settings: dg.Config, device: str, sexes: tuple[str, ...]):
    return library_config("risk", settings, device=device, sexes=sexes)


@dg.asset(key=["risk", "risk_groups"], group_name="risk", partitions_def=sex_partitions,
          deps=[["train", "embeddings"], ["baselines", "representations"],
                ["cohorts", "cohort_splits"], ["train", "fold_models"],
                ["baselines", "fold_representations"]],
          description="Normal / Lower Risk / Higher Risk for every participant of one sex, by "
          "method and interval mode, with the repeat-visit validation (Table 4 shape).")
def risk_groups(context: dg.AssetExecutionContext, config: RiskSettings, storage: RunStorage,
                compute: Compute) -> dg.MaterializeResult:
    import pandas as pd

    from sphr.risk.pipeline import risk_for_sex
    from sphr.risk.validation.curves import shares

    sex = context.partition_key
    out = layout.risk_dir(storage.run) / sex
    summary = risk_for_sex(storage.run, sex, out, _config(config, compute.device, (sex,)))
    rows = pd.read_parquet(out / "risk_groups.parquet")
    meta = {"path": md.path(out / "risk_groups.parquet"), "rows": len(rows),
            "group_shares_percent": md.table(shares(rows, ["method", "mode"]), index=False)}
    if summary["skipped"]:
        meta["skipped_methods"] = dg.MetadataValue.json(summary["skipped"])
    heldout = pd.read_parquet(out / "heldout_bfh.parquet")
    meta["heldout_bfh_in_normal"] = md.table(
        heldout[heldout["partition"] == "test"].round(3), index=False)
    if (out / "discrimination.parquet").exists():
        disc = pd.read_parquet(out / "discrimination.parquet")
        meta["discrimination_any"] = md.table(disc.loc[disc["outcome"] == "any", [
            "method", "n", "events", "auroc", "auroc_low", "auroc_high", "c_index",
            "c_index_low", "c_index_high"]].round(3), index=False)
    return dg.MaterializeResult(metadata=meta)


@dg.asset(key=["risk", "risk_report"], group_name="risk_report", deps=[risk_groups],
          description="The exported risk-group report of both sexes, merged from the per-sex "
          "results (nothing refitted): risk_groups.parquet/.csv, thresholds, discrimination, "
          "validation, a self-contained report.html and its A4 report.pdf (metadata: the "
          "summary figure).")
def risk_report(context: dg.AssetExecutionContext, config: RiskSettings, storage: RunStorage,
                compute: Compute) -> dg.MaterializeResult:
    from sphr.labels import SEXES
    from sphr.report import current_pdf
    from sphr.risk.pipeline import merge_risk

    out = layout.risk_dir(storage.run)
    sexes = [s for s in SEXES if (out / s / "risk_groups.parquet").exists()]
    summary = merge_risk(storage.run, [out / s for s in sexes], out,
                         _config(config, compute.device, tuple(sexes)))
    meta = {"report": md.path(out / "report.html"), "csv": md.path(out / "risk_groups.csv"),
            "sexes": ", ".join(summary["sexes"]), "rows": summary["rows"],
            "methods": ", ".join(summary["methods"])}
    # an older PDF is from an earlier run (no Chromium this time, logged): not this report's
    pdf = current_pdf(out / "report.html", drop_stale=True)
    if pdf is not None:
        meta["pdf"] = md.path(pdf)
    if (out / "report_summary.png").exists():  # the report's central figure
        meta["summary_figure"] = md.image((out / "report_summary.png").read_bytes(),
                                          "does Higher Risk develop more new disease?")
    return dg.MaterializeResult(metadata=meta)


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    risk = from_settings(RiskSettings, settings.stages["risk"])
    return {risk_groups: risk, risk_report: risk}
