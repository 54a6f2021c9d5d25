"""Per-sex downstream evaluation: representations x classifiers, and the loss comparison."""

import dagster as dg

from sphr import layout
from sphr.evaluate.names import XGB_METHODS
from sphr.train.config import COMPARISON_LOSSES
from sphr_dagster import metadata as md
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage


class EvaluationConfig(dg.Config):
    """The paper's protocol (5 splits, 4 classifiers) and which losses the loss table shows."""

    splits: int = 5
    seed: int = 0
    classifiers: list[str] = ["knn", "lda", "nn_ehr", "xgboost"]
    #: the loss table's losses, read from train/loss_comparison (empty: no loss table)
    losses: list[str] = list(COMPARISON_LOSSES)
    nn_epochs: int = 100
    #: XGBoost's tree method on the CPU: auto (the paper's exact) or hist (UK Biobank size)
    xgboost_method: str = XGB_METHODS[0]


@dg.asset(key=["evaluate", "tables"], group_name="evaluation", partitions_def=sex_partitions,
          deps=[["train", "embeddings"], ["train", "loss_comparison"],
                ["baselines", "representations"]],
          description="Weighted and micro F1 (mean ± SD over 5 seeded 80/20 splits of the test "
          "participants) per representation, classifier and task, beside the paper's numbers; "
          "and the loss comparison (train/loss_comparison's models). Reads the earlier stages' "
          "folders, writes only evaluate/<sex>/.")
def evaluation_tables(context: dg.AssetExecutionContext, config: EvaluationConfig,
                      storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
    import dataclasses

    from sphr.evaluate.classifiers import NN_EHR_CONFIG
    from sphr.evaluate.pipeline import run_evaluate
    from sphr.evaluate.protocol import EvalConfig

    sex = context.partition_key
    out = layout.evaluate_dir(storage.run)
    eval_config = EvalConfig(n_splits=config.splits, seed=config.seed,
                             classifiers=tuple(config.classifiers), device=compute.device,
                             nn=dataclasses.replace(NN_EHR_CONFIG, epochs=config.nn_epochs),
                             xgboost_method=config.xgboost_method)
    summary = run_evaluate(storage.run, out, sexes=[sex], eval_config=eval_config,
                           losses=config.losses, seed=config.seed, device=compute.device,
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
