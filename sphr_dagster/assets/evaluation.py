"""Per-sex downstream evaluation: representations x classifiers, and the loss comparison."""

import dagster as dg

from sphr import layout
from sphr.settings import RunSettings, stage_defaults
from sphr_dagster import metadata as md
from sphr_dagster.config import from_settings, library_config, stage_config
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage

EvaluationConfig = stage_config(
    "evaluate", "EvaluationConfig", "The paper's protocol (5 splits, 4 classifiers): every "
    "field of the library's ``sphr.evaluate.config.EvalConfig`` (the device is the compute "
    "resource's), and which losses the loss table shows.", module=__name__, extra={
        "losses": (list[str], list(stage_defaults("train")["comparison_losses"]),
                   "the loss table's losses, read from train/loss_comparison (empty: no loss "
                   "table)")})


@dg.asset(key=["evaluate", "tables"], group_name="evaluation", partitions_def=sex_partitions,
          deps=[["train", "embeddings"], ["train", "loss_comparison"],
                ["baselines", "representations"]],
          description="Weighted and micro F1 (mean ± SD over 5 seeded 80/20 splits of the test "
          "participants) per representation, classifier and task, beside the paper's numbers; "
          "and the loss comparison (train/loss_comparison's models). Reads the earlier stages' "
          "folders, writes only evaluate/<sex>/.")
def evaluation_tables(context: dg.AssetExecutionContext, config: EvaluationConfig,
                      storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
    from sphr.evaluate.pipeline import run_evaluate

    sex = context.partition_key
    out = layout.evaluate_dir(storage.run)
    eval_config = library_config("evaluate", config, device=compute.device)
    summary = run_evaluate(storage.run, out, sexes=[sex], eval_config=eval_config,
                           losses=config.losses, seed=eval_config.seed, device=compute.device,
                           combine=False)
    sex_dir = out / sex
    meta = {
        "path": md.path(sex_dir / "representations.md"),
        "representations": dg.MetadataValue.md((sex_dir / "representations.md").read_text()),
        "embeddings": md.image((sex_dir / "plots" / "representations.png").read_bytes(),
                               "representations"),
        "seconds": summary["total_s"],
    }
    if (sex_dir / "losses.md").exists():
        meta["losses"] = dg.MetadataValue.md((sex_dir / "losses.md").read_text())
    return dg.MaterializeResult(metadata=meta)


@dg.asset(key=["evaluate", "report"], group_name="evaluation_report", deps=[evaluation_tables],
          description="Both sexes' tables merged (tables.md, representations.parquet, "
          "losses.parquet) and the results page (report.html + report.pdf): read from the "
          "per-sex evaluation folders, nothing recomputed. A separate asset so the two sex "
          "partitions never write the same file and can run at the same time.")
def evaluation_report(storage: RunStorage) -> dg.MaterializeResult:
    from sphr.evaluate.pipeline import write_combined
    from sphr.report import current_pdf

    out = layout.evaluate_dir(storage.run)
    tables = write_combined(out)
    meta = {"path": md.path(tables)}
    # the results page: heatmap, rankings, loss dot plot
    if (out / "report.html").exists():
        meta["report"] = md.path(out / "report.html")
    pdf = current_pdf(out / "report.html")
    if pdf is not None:
        meta["report_pdf"] = md.path(pdf)
    return dg.MaterializeResult(metadata=meta)


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings: the loss table shows the
    comparison's losses when the run trains them, none otherwise."""
    losses = list(settings.stages["train"]["comparison_losses"]) if settings.losses else []
    return {evaluation_tables: from_settings(EvaluationConfig, settings.stages["evaluate"],
                                             losses=losses)}
