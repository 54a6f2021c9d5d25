"""``sphr evaluate``: from a run directory's earlier outputs to the paper's tables.

Per sex found under ``RUN/cohorts`` (reading only, :mod:`sphr.evaluate.inputs`; every
file is written under ``OUT``, default ``RUN/evaluate``):

1. baselines: ``RUN/baselines/<sex>/<name>/embeddings_test.parquet``;
2. SPHR: ``RUN/train/<sex>/nplb/embeddings_test.parquet`` (skipped, and said so
   in the report and the tables, when the training stage has not run);
3. the protocol on the real test participants (:mod:`sphr.evaluate.protocol`);
4. the loss comparison (:mod:`sphr.evaluate.losses`) of the training stage's
   ``RUN/train/<sex>/comparison/<loss>/``, unless ``losses`` is empty;
5. ``OUT/<sex>/``: ``scores.parquet`` (every split), ``representations.parquet``
   + ``.md`` (with the paper's numbers), ``losses_scores.parquet``,
   ``losses.parquet`` + ``.md``, ``plots/<representation>.png`` and
   ``plots/representations.png``, ``splits.parquet`` (which eids were held out
   in which split), ``evaluate_report.json``; and for all sexes together
   ``OUT/tables.md``, ``OUT/representations.parquet``, ``OUT/losses.parquet``.

A missing input raises :class:`~sphr.errors.InputError` naming its folder and the command
that writes it; the ``sphr evaluate`` command runs the missing baselines and the loss
comparison first (:mod:`sphr.evaluate.commands`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.artifacts import Cohort, load_cohort
from sphr.baselines import REPRESENTATIONS
from sphr.errors import ConfigError, InputError
from sphr.evaluate.inputs import collect_embeddings
from sphr.evaluate.paper import LOSSES
from sphr.evaluate.protocol import (
    EvalConfig,
    EvalResult,
    classify_embeddings,
    reference_scores,
    summarize,
)
from sphr.evaluate.tables import (
    SEX_NAMES,
    loss_markdown,
    loss_table,
    representation_markdown,
    representation_table,
)
from sphr.io import staged_outputs, write_bytes, write_json, write_parquet, write_text
from sphr.labels import SEXES
from sphr.layout import cohort_dir, evaluate_dir

log = logging.getLogger(__name__)


def _splits_frame(result: EvalResult, eids: np.ndarray) -> pd.DataFrame:
    rows = []
    for s, (_, te) in enumerate(result.splits):
        held = np.zeros(len(eids), dtype=bool)
        held[te] = True
        rows.append(pd.DataFrame({"split": s, "eid": eids, "held_out": held}))
    return pd.concat(rows, ignore_index=True)


def reference_markdown(reference: pd.DataFrame, scores: pd.DataFrame) -> str:
    """Weighted F1 of raw features trained on the training partition, beside the protocol's
    raw and SPHR rows on the same held-out parts."""
    def cell(frame: pd.DataFrame, rep: str, clf: str, task: str) -> str:
        v = frame[(frame["representation"] == rep) & (frame["classifier"] == clf)
                  & (frame["task"] == task)]["weighted_f1"]
        return f"{v.mean():.4f} ± {v.std(ddof=1):.4f}" if len(v) else "-"

    n = int(reference["n_train"].iloc[0]) if len(reference) else 0
    rows = ["", f"**Reference row** (weighted F1): each classifier trained on the {n} real "
            "training-partition participants' raw features, scored on the same held-out 20% "
            "parts; the protocol's rows train the classifier on 80% of the test participants "
            "only.", "", "| classifier | task | raw, training partition | raw, protocol | "
            "SPHR, protocol |", "| --- | --- | --- | --- | --- |"]
    for (clf, task), _ in reference.groupby(["classifier", "task"], sort=False):
        rows.append(f"| {clf} | {task} | {cell(reference, 'raw_training_partition', clf, task)} "
                    f"| {cell(scores, 'raw', clf, task)} | {cell(scores, 'sphr', clf, task)} |")
    return "\n".join(rows) + "\n"


def evaluate_sex(run_dir: Path, cohort: Cohort, stage: Path, *, representations: Sequence[str],
                 eval_config: EvalConfig, losses: Sequence[str],
                 loss_classifiers: Sequence[str], seed: int) -> dict[str, Any]:
    """Everything for one sex, written into ``stage`` (moved into place by the caller)."""
    from sphr.evaluate.plots import representation_grid, representation_scatter

    sex = cohort.sex
    report: dict[str, Any] = {"sex": sex, "cohort": str(cohort.directory),
                              "n_test": len(cohort.test), "features": len(cohort.features)}
    t0 = time.perf_counter()
    Z, info = collect_embeddings(run_dir, cohort, representations)
    report["embeddings"] = info
    report["embeddings_s"] = round(time.perf_counter() - t0, 2)
    labels = cohort.test["label"].to_numpy(np.int64)
    result = classify_embeddings(Z, labels, eval_config)
    report["evaluation_s"] = round(result.wall_s, 2)
    report["protocol"] = result.settings
    table = representation_table(summarize(result.scores), sex)
    write_parquet(result.scores, stage / "scores.parquet")
    write_parquet(table, stage / "representations.parquet")
    write_parquet(_splits_frame(result, cohort.test["eid"].to_numpy()), stage / "splits.parquet")

    md = [f"### {SEX_NAMES.get(sex, sex)}: representations x classifiers\n",
          f"{len(labels)} real test participants, {result.settings['n_splits']} stratified "
          f"80/20 splits (seeds {result.settings['split_seeds']}); mean ± SD over splits.\n"]
    if info["missing"]:
        md.append(f"Not available (earlier stage not run): {', '.join(info['missing'])}.\n")
    md.append(representation_markdown(table, list(Z)))
    if "raw" in Z:
        ref = reference_scores(cohort.matrix("train", real_only=True),
                               cohort.train.loc[~cohort.train["augmented"], "label"].to_numpy(),
                               cohort.matrix("test"), labels, result.splits, eval_config)
        write_parquet(ref, stage / "reference.parquet")
        md.append(reference_markdown(ref, result.scores))
    write_text("\n".join(md), stage / "representations.md")

    plots = {}
    for name, Zr in Z.items():
        png = representation_scatter(name, Zr, labels, seed=seed)
        write_bytes(png, stage / "plots" / f"{name}.png")
        plots[name] = f"plots/{name}.png"
    write_bytes(representation_grid(Z, labels, seed=seed,
                                    title=f"{SEX_NAMES.get(sex, sex)}: test participants, PCA of "
                                          "each representation"),
                stage / "plots" / "representations.png")
    report["plots"] = {**plots, "grid": "plots/representations.png"}

    loss_tab = None
    if losses:
        from sphr.evaluate.losses import compare_losses

        loss_cfg = dataclasses.replace(eval_config, classifiers=tuple(loss_classifiers))
        scores, lres, linfo = compare_losses(run_dir, cohort, losses, eval_config=loss_cfg,
                                             prior=(Z, result))
        loss_tab = loss_table(summarize(scores, by=("loss", "classifier", "task")), sex)
        write_parquet(scores, stage / "losses_scores.parquet")
        write_parquet(loss_tab, stage / "losses.parquet")
        md = [f"### {SEX_NAMES.get(sex, sex)}: loss comparison\n",
              f"Each loss trained with the same data, triplets and config "
              f"(profile {linfo['profile']}: {linfo['config']}).\n"]
        chosen = linfo.get("model_selection")
        if chosen:
            held = linfo["stack_held_by"]
            md.append("Epoch kept by model selection (lowest validation loss): " + ", ".join(
                f"{x} {v['best_epoch']}" for x, v in chosen.items()) + ". The losses train as "
                f"one stack until every model has stopped; the last to stop was {held}, "
                f"after {chosen[held]['epochs_run']} epochs.\n")
        for clf in loss_classifiers:
            md.append(loss_markdown(loss_tab, classifier=clf))
        write_text("\n".join(md), stage / "losses.md")
        report["losses"] = {**linfo, "evaluation_s": round(lres.wall_s, 2),
                            "classifiers": list(loss_classifiers),
                            # a loss whose embedding is a representation's (the demo's NPLB
                            # is SPHR) takes that representation's scores, not a refit
                            "scores_copied": lres.settings.get("reused", {})}
    write_json(report, stage / "evaluate_report.json")
    return {"report": report, "table": table, "loss_table": loss_tab}


def cohort_sexes(run_dir: str | Path, sexes: Sequence[str] | None = None) -> list[str]:
    """The sexes to evaluate: ``sexes`` (each must have a cohort), or every one with a cohort."""
    cohorts_dir = Path(run_dir) / "cohorts"
    found = [s for s in SEXES if (cohort_dir(run_dir, s) / "test.parquet").exists()]
    if sexes:
        bad = [s for s in sexes if s not in SEXES]
        if bad:
            raise ConfigError(f"unknown sex {bad}: use {', '.join(SEXES)}")
        absent = [s for s in sexes if s not in found]
        if absent:
            raise InputError(f"no cohort for {', '.join(absent)} (run `sphr cohorts`)",
                             file=cohorts_dir)
        found = list(sexes)
    if not found:
        raise InputError("no cohort folders (female/, male/) with test.parquet", file=cohorts_dir)
    return found


def run_evaluate(run_dir: str | Path, out_dir: str | Path | None = None, *,
                 sexes: Sequence[str] | None = None,
                 representations: Sequence[str] = REPRESENTATIONS,
                 eval_config: EvalConfig | None = None, losses: Sequence[str] = LOSSES,
                 loss_classifiers: Sequence[str] = ("xgboost",), seed: int = 0,
                 device: str = "auto", combine: bool = True) -> dict[str, Any]:
    """Evaluate every sex under ``RUN/cohorts``; write tables to ``out_dir`` (default RUN/evaluate).

    Reads the earlier stages' folders and writes only under ``out_dir``; ``losses``: the
    losses of the loss table, read from ``RUN/train/<sex>/comparison`` (empty: no loss table).

    ``combine=False`` writes only ``out_dir/<sex>/``: Dagster evaluates each sex in its own
    partition, possibly at the same time, and merges with :func:`write_combined` afterwards.
    """
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else evaluate_dir(run_dir)
    eval_config = eval_config or EvalConfig(seed=seed, device=device)
    found = cohort_sexes(run_dir, sexes)

    t0 = time.perf_counter()
    reports = {}
    for sex in found:
        cohort = load_cohort(cohort_dir(run_dir, sex))
        with staged_outputs(out_dir / sex) as stage:
            res = evaluate_sex(
                run_dir, cohort, stage, representations=representations,
                eval_config=eval_config, losses=losses, loss_classifiers=loss_classifiers,
                seed=seed)
        reports[sex] = res["report"]

    summary = {"run_dir": str(run_dir), "out_dir": str(out_dir), "sexes": found,
               "total_s": round(time.perf_counter() - t0, 2), "per_sex": reports}
    if combine:
        write_combined(out_dir, loss_classifiers=loss_classifiers)
        write_json(summary, out_dir / "evaluate_report.json")
    return summary


def write_combined(out_dir: str | Path, *, loss_classifiers: Sequence[str] = ("xgboost",)) -> Path:
    """Both sexes' tables in one place (``representations.parquet``, ``tables.md``).

    Reads whatever sex folders exist under ``out_dir``, so each sex can be
    evaluated on its own (one Dagster partition at a time) and the combined
    tables stay complete.
    """
    out_dir = Path(out_dir)
    done = [s for s in SEXES if (out_dir / s / "representations.parquet").exists()]
    if not done:
        raise InputError("no evaluated sex folders", file=out_dir)
    table = pd.concat([pd.read_parquet(out_dir / s / "representations.parquet") for s in done],
                      ignore_index=True)
    write_parquet(table, out_dir / "representations.parquet")
    md = ["# Downstream evaluation: ours beside the paper's published numbers\n",
          "Cells: mean ± SD over the splits; '(paper)' columns: the paper's Tables 2, A3-A6 "
          "(and 3 / A2 for losses); '-' where the paper has no number.\n"]
    for sex in done:
        md.append((out_dir / sex / "representations.md").read_text())
        md.append(f"![{sex}]({sex}/plots/representations.png)\n")
    with_losses = [s for s in done if (out_dir / s / "losses.parquet").exists()]
    if with_losses:
        lt = pd.concat([pd.read_parquet(out_dir / s / "losses.parquet") for s in with_losses],
                       ignore_index=True)
        write_parquet(lt, out_dir / "losses.parquet")
        md.append("## Loss comparison\n")
        for clf in loss_classifiers:
            md.append(loss_markdown(lt, classifier=clf))
    path = out_dir / "tables.md"
    write_text("\n".join(md), path)
    from sphr.evaluate.report import write_evaluate_report

    write_evaluate_report(out_dir)  # report.html + report.pdf: the same numbers, for reading
    return path
