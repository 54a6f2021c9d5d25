"""Risk groups per sex, and the exported cross-sex risk-group report."""

import dagster as dg

from pipeline import metadata as md
from pipeline.partitions import sex_partitions
from pipeline.resources import Compute, RunStorage
from sphr import layout


class RiskSettings(dg.Config):
    """Methods and interval modes of the health distance (SPEC 1.8); validation population."""

    methods: list[str] = ["raw_euclidean", "mahalanobis", "p0_euclidean", "deep_patient", "sphr"]
    modes: list[str] = ["paper", "bfh-distance"]
    validate_on: str = "test"


def _config(settings: RiskSettings, device: str, sexes: tuple[str, ...]):
    from sphr.risk.pipeline import RiskConfig

    return RiskConfig(methods=tuple(settings.methods), modes=tuple(settings.modes),
                      validate_on=settings.validate_on, device=device, sexes=sexes)


@dg.asset(key=["risk", "risk_groups"], group_name="risk", partitions_def=sex_partitions,
          deps=[["train", "embeddings"], ["baselines", "representations"],
                ["cohorts", "cohort_splits"]],
          description="Normal / Lower Risk / Higher Risk for every participant of one sex, by "
          "method and interval mode, with the repeat-visit validation (Table 4 shape).")
def risk_groups(context: dg.AssetExecutionContext, config: RiskSettings, storage: RunStorage,
                compute: Compute) -> dg.MaterializeResult:
    import pandas as pd

    from sphr.risk.pipeline import run_risk
    from sphr.risk.report import shares

    sex = context.partition_key
    out = layout.risk_dir(storage.run) / sex
    summary = run_risk(storage.run, out, _config(config, compute.device, (sex,)))
    rows = pd.read_parquet(out / "risk_groups.parquet")
    meta = {"path": md.path(out / "risk_groups.parquet"), "rows": len(rows),
            "group_shares_percent": md.table(shares(rows, ["method", "mode"]), index=False)}
    if summary["skipped"]:
        meta["skipped_methods"] = dg.MetadataValue.json(summary["skipped"])
    if (out / "validation.md").exists():
        meta["validation"] = dg.MetadataValue.md((out / "validation.md").read_text())
    return dg.MaterializeResult(metadata=meta)


@dg.asset(key=["risk", "risk_report"], group_name="risk_report", deps=[risk_groups],
          description="The exported risk-group report of both sexes: risk_groups.parquet/.csv, "
          "thresholds, validation and a self-contained report.html.")
def risk_report(context: dg.AssetExecutionContext, config: RiskSettings, storage: RunStorage,
                compute: Compute) -> dg.MaterializeResult:
    from sphr.labels import SEXES
    from sphr.risk.pipeline import run_risk
    from sphr.risk.report import find_chromium, render_png

    out = layout.risk_dir(storage.run)
    summary = run_risk(storage.run, out, _config(config, compute.device, tuple(SEXES)))
    meta = {"report": md.path(out / "report.html"), "csv": md.path(out / "risk_groups.csv"),
            "sexes": ", ".join(summary["sexes"]), "rows": summary["rows"],
            "methods": ", ".join(summary["methods"])}
    if find_chromium():  # a picture of the report itself, as a reader would see it
        png = render_png(out / "report.html", out / "report.png", height=2200)
        meta["preview"] = md.image(png.read_bytes(), "risk report")
    return dg.MaterializeResult(metadata=meta)
