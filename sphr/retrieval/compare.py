"""The loss comparison: train every (loss, seed), evaluate, summarize, write tables and figures.

:func:`run_comparison` is the one entry point for ``sphr retrieval`` and for
the Dagster assets. Per-(dataset, loss) partitions can call it with one loss
each and merge the results with :func:`combine_results`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from sphr.errors import ConfigError
from sphr.losses.registry import RETRIEVAL, build_loss, parse_loss_spec
from sphr.retrieval.data import RetrievalData, load_retrieval_data
from sphr.retrieval.data.core import ImageSet, split_by_group, split_stratified
from sphr.retrieval.data.transforms import BatchTransform, to_display
from sphr.retrieval.losses.base import RetrievalLoss
from sphr.retrieval.losses.builders import LOSSES
from sphr.retrieval.metrics import map_score, retrieval_metrics
from sphr.retrieval.monitor import embedding_health
from sphr.retrieval.profiles import ComparisonConfig, Profile, get_profile
from sphr.retrieval.train import embed, embed_all, image_size_for, train_model

log = logging.getLogger(__name__)

#: columns of the markdown comparison table, in order (those a dataset has)
TABLE_METRICS: tuple[str, ...] = ("mAP", "mAP@R", "CMC@1", "CMC@5", "CMC@10", "R@1", "R@2", "R@4",
                                  "R@8", "AUC", "P@4", "P@10", "mAP_H16", "mAP_H64", "mAP_H16_proj",
                                  "mAP_H64_proj")
#: split seed of the validation subjects (fixed, like the test split)
VAL_SPLIT_SEED = 0
#: below this many training subjects there is no validation split
MIN_VAL_SUBJECTS = 10


def _entry(spec: str) -> Any:
    """The registry entry of a retrieval loss spec (``triplet_dams:threshold=0.9``)."""
    return LOSSES[parse_loss_spec(spec, RETRIEVAL)[0]]


def split_validation(data: RetrievalData, fraction: float,
                     seed: int = VAL_SPLIT_SEED) -> tuple[RetrievalData, ImageSet | None]:
    """Hold out ``fraction`` of the training subjects (class level: of each class's images) for
    best-epoch selection; returns the reduced data and the validation split (None when 0)."""
    if fraction <= 0:
        return data, None
    if not 0 < fraction < 1:
        raise ConfigError(f"val_fraction must be in [0, 1), got {fraction}")
    labels = data.train.labels
    if data.level == "subject" and len(np.unique(labels)) < MIN_VAL_SUBJECTS:
        log.info("%s: %d training subjects, too few to hold some out: no best-epoch selection",
                 data.name, len(np.unique(labels)))
        return data, None
    mask = (split_by_group(labels, fraction, seed) if data.level == "subject"
            else split_stratified(labels, fraction, seed))
    if mask.all() or not mask.any():
        return data, None
    train = data.train.subset(~mask)
    reduced = RetrievalData(data.name, data.level, train, data.test, data.channels,
                            data.native_size,
                            {**data.info, "val_fraction": fraction, "val_images": int(mask.sum())})
    return reduced, data.train.subset(mask)


def loss_for(spec: str, profile: Profile) -> RetrievalLoss:
    """``build_loss(spec, RETRIEVAL)`` with the profile's budget options for its scheduler family
    (``profile.loss_options``) where the spec does not set them."""
    name, opts = parse_loss_spec(spec, RETRIEVAL)
    entry = LOSSES[name]
    extra = {k: v for k, v in profile.loss_options.get(entry.scheduler, {}).items()
             if k in entry.defaults and k not in opts}
    return build_loss(spec, RETRIEVAL, **extra)


@dataclass
class ComparisonResult:
    """Everything a comparison produced. Tables are pandas DataFrames (long format unless said)."""

    dataset: str
    #: loss, metric, mean, sem, n_seeds
    table: pd.DataFrame
    #: dataset, loss, seed, metric, value
    per_seed: pd.DataFrame
    #: loss, seed, year, metric, value, n_queries (datasets with visits)
    per_year: pd.DataFrame
    #: loss, seed, epoch, loss_value, margin, beta, easy_share, mean_delta, ... (one row per epoch)
    margin_curves: pd.DataFrame
    #: loss, seed, train_seconds, train_images_per_s, epochs
    runs: pd.DataFrame
    markdown: str
    config: dict[str, Any] = field(default_factory=dict)
    #: PNG figures by file name (margin_curves.png, strips/<loss>.png)
    pngs: dict[str, bytes] = field(default_factory=dict)
    #: files written, by name, when an output folder was given
    files: dict[str, Path] = field(default_factory=dict)

    def wide(self, stat: str = "mean") -> pd.DataFrame:
        """loss x metric table of ``mean`` or ``sem``."""
        return self.table.pivot(index="loss", columns="metric", values=stat)


def summarize(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error over seeds (SE = SD / sqrt(n), SD with n - 1; NaN for one seed)."""
    g = per_seed.groupby(["loss", "metric"], sort=False)["value"]
    out = g.agg(mean="mean", sd=lambda v: v.std(ddof=1), n_seeds="count").reset_index()
    out["sem"] = out["sd"] / np.sqrt(out["n_seeds"])
    return out[["loss", "metric", "mean", "sem", "n_seeds"]]


def markdown_table(table: pd.DataFrame, metrics: Sequence[str] = TABLE_METRICS, *,
                   digits: int = 3) -> str:
    """loss x metric as 'mean ± se', best mean per column in bold."""
    present = [m for m in metrics if m in set(table["metric"])]
    losses = list(dict.fromkeys(table["loss"]))
    mean = table.pivot(index="loss", columns="metric", values="mean").reindex(losses)
    sem = table.pivot(index="loss", columns="metric", values="sem").reindex(losses)
    lines = ["| loss | " + " | ".join(present) + " |", "| --- |" + " --- |" * len(present)]
    for loss in losses:
        cells = []
        for m in present:
            v, s = mean.loc[loss, m], sem.loc[loss, m]
            text = f"{v:.{digits}f}" + (f" ± {s:.{digits}f}" if np.isfinite(s) else "")
            best = mean[m].max()
            cells.append(f"**{text}**" if np.isfinite(v) and v == best else text)
        lines.append(f"| {loss} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def per_year_markdown(per_year: pd.DataFrame, metric: str = "CMC@1", *, digits: int = 3) -> str:
    """loss x follow-up year for one metric, 'mean ± se' over seeds."""
    if per_year.empty:
        return ""
    sub = per_year[per_year["metric"] == metric]
    g = sub.groupby(["loss", "year"], sort=False)["value"]
    stats = g.agg(mean="mean", sd=lambda v: v.std(ddof=1), n="count").reset_index()
    stats["sem"] = stats["sd"] / np.sqrt(stats["n"])
    years = sorted(stats["year"].unique())
    lines = [f"| loss ({metric}) | " + " | ".join(f"year {y:g}" for y in years) + " |",
             "| --- |" + " --- |" * len(years)]
    for loss in dict.fromkeys(stats["loss"]):
        row = stats[stats["loss"] == loss].set_index("year")
        cells = [f"{row.loc[y, 'mean']:.{digits}f}" + (f" ± {row.loc[y, 'sem']:.{digits}f}"
                                                       if np.isfinite(row.loc[y, "sem"]) else "")
                 if y in row.index else "" for y in years]
        lines.append(f"| {loss} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _p_at_z(profile: Profile, data: RetrievalData) -> tuple[int, ...]:
    return tuple(profile.p_at_z.get(data.level, (10,)))


@dataclass
class _Rows:
    """The comparison's tables as rows, one run (loss x seed) at a time."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    years: list[pd.DataFrame] = field(default_factory=list)
    curves: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    #: one run's example retrievals per loss (the first seed's), for the strips
    examples: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def add(self, dataset: str, spec: str, seed: int, tr: Any, ev: Any, epochs: int) -> None:
        for name, value in ev.metrics.items():
            self.metrics.append({"dataset": dataset, "loss": spec, "seed": seed, "metric": name,
                                 "value": float(value)})
        if not ev.per_year.empty:
            self.years.append(ev.per_year.assign(loss=spec, seed=seed))
        for rec in tr.history:
            self.curves.append(
                {
                    "loss": spec,
                    "seed": seed,
                    **{("loss_value" if k == "loss" else k): v for k, v in rec.items()},
                }
            )
        self.runs.append({"loss": spec, "seed": seed, "train_seconds": tr.seconds,
                          "train_images_per_s": tr.images_per_s, "epochs": epochs,
                          "final_loss": tr.history[-1]["loss"] if tr.history else math.nan,
                          "best_epoch": -1 if tr.best_epoch is None else tr.best_epoch,
                          "collapsed_epochs": tr.collapsed_epochs})
        self.examples.setdefault(spec, ev.examples)

    def per_year(self) -> pd.DataFrame:
        columns = ["loss", "seed", "year", "metric", "value", "n_queries"]
        return (pd.concat(self.years, ignore_index=True)[columns] if self.years
                else pd.DataFrame(columns=columns))


def _load(dataset: str | Path | RetrievalData, prof: Profile,
          data_options: dict[str, Any] | None) -> RetrievalData:
    if isinstance(dataset, RetrievalData):
        return dataset
    kind = str(dataset) if str(dataset) in prof.data else "manifest"
    return load_retrieval_data(dataset, **{**prof.data.get(kind, {}), **(data_options or {})})


def _train_and_measure(spec: str, seed: int, data: RetrievalData, val: ImageSet | None,
                       transform: BatchTransform, prof: Profile, dev: torch.device
                       ) -> tuple[Any, Any]:
    """(training result, evaluation) of one loss and seed: a fresh model and fresh losses, so
    no run inherits another's state."""
    loss = loss_for(spec, prof)
    code_losses = ({int(b): loss_for(spec, prof) for b in prof.hamming_bits}
                   if prof.trains_code_heads(spec) else {})
    tr = train_model(data, loss, prof, seed=seed, device=dev, desc=f"{spec} seed {seed}", val=val,
                     code_losses=code_losses)
    emb, codes = embed_all(tr.model, data.test, transform, device=dev,
                           batch_size=prof.eval_batch_size, workers=prof.workers)
    ev = retrieval_metrics(emb, data.test.labels, data.test.years, seed=seed,
                           p_at_z=_p_at_z(prof, data), hamming_bits=prof.hamming_bits, codes=codes)
    ev.metrics.update(_run_summary(tr, emb, data, transform, prof, dev, spec, seed))
    return tr, ev


def run_comparison(dataset: str | Path | RetrievalData = "digits",
                   losses: Sequence[str] = ComparisonConfig.losses,
                   seeds: Sequence[int] = ComparisonConfig.seeds,
                   out_dir: str | Path | None = None,
                   device: str | torch.device = ComparisonConfig.device,
                   profile: str | Profile = ComparisonConfig.profile,
                   *,
                   data_options: dict[str, Any] | None = None,
                   profile_overrides: dict[str, Any] | None = None,
                   strips: bool = True) -> ComparisonResult:
    """Train and evaluate every loss on ``dataset`` for every seed; optionally write the results.

    ``dataset``: ``digits``, ``forensic``, a manifest path, or loaded
    :class:`RetrievalData`. ``losses``: names or specs with overrides
    (``triplet_dams:threshold=0.9``; see ``sphr.retrieval.losses.LOSSES``).
    The data split is fixed (``split_seed`` in ``data_options``, default 0);
    the seeds change model initialization, sampling and augmentation.

    With ``out_dir``, writes (atomically, as one set): ``comparison.md``,
    ``comparison.parquet`` (loss, metric, mean, sem, n_seeds),
    ``per_seed.parquet``, ``per_year.parquet``, ``margin_curves.parquet``,
    ``runs.parquet``, ``config.json``, ``margin_curves.png`` and
    ``strips/<loss>.png``.
    """
    from sphr.device import resolve_device

    if not losses:
        raise ConfigError("no losses to compare")
    if not seeds:
        raise ConfigError("no seeds given")
    for spec in losses:  # fail before hours of training, not after
        build_loss(spec, RETRIEVAL)
    prof = get_profile(profile, **(profile_overrides or {}))
    dev = resolve_device(device)
    data = _load(dataset, prof, data_options)
    transform = BatchTransform(image_size_for(data, prof))
    data, val = split_validation(data, prof.val_fraction)
    rows = _Rows()
    start = time.perf_counter()
    for spec in losses:
        for seed in seeds:
            tr, ev = _train_and_measure(spec, int(seed), data, val, transform, prof, dev)
            rows.add(data.name, spec, int(seed), tr, ev, prof.epochs)
            log.info("%s %s seed %s: mAP %.3f CMC@1 %.3f R@1 %.3f (%.0f s)", data.name, spec, seed,
                     ev.metrics["mAP"], ev.metrics["CMC@1"], ev.metrics["R@1"], tr.seconds)
            del tr  # the model's memory is free before the next run
    config = {"dataset": data.name, "level": data.level, "data_info": data.info,
              "losses": list(losses),
              "loss_descriptions": {s: _entry(s).description for s in losses},
              "seeds": [int(s) for s in seeds], "device": str(dev), "profile": prof.to_dict(),
              "image_size": image_size_for(data, prof), "train_images": len(data.train),
              "val_images": 0 if val is None else len(val), "test_images": len(data.test),
              "seconds": time.perf_counter() - start,
              "loss_options": {s: _resolved_options(s, prof) for s in losses},
              "cmc": "first-match CMC (not the open-reid split-credit CMC of the AdaTriplet code)"}
    result = _assemble(data.name, pd.DataFrame(rows.metrics), rows.per_year(),
                       pd.DataFrame(rows.curves), pd.DataFrame(rows.runs), config)
    if strips:
        result.pngs.update(_strip_pngs(data, rows.examples))
    if out_dir is not None:
        write_outputs(result, out_dir)
    return result


def _resolved_options(spec: str, profile: Profile) -> dict[str, Any]:
    name, opts = parse_loss_spec(spec, RETRIEVAL)
    entry = LOSSES[name]
    extra = {k: v for k, v in profile.loss_options.get(entry.scheduler, {}).items()
             if k in entry.defaults}
    return {**entry.defaults, **extra, **opts}


def _run_summary(tr: Any, emb: torch.Tensor, data: RetrievalData, transform: BatchTransform,
                 prof: Profile, dev: torch.device, spec: str, seed: int) -> dict[str, float]:
    """Per-run extras for the table: best-epoch mAP, final margins, collapse flag."""
    out: dict[str, float] = {}
    last = tr.history[-1] if tr.history else {}
    health = embedding_health(emb, data.test.labels)
    collapsed = bool(health.collapsed or last.get("collapsed", 0.0))
    if collapsed:
        log.warning("%s %s seed %s: collapsed embedding (test: mean negative-pair cosine %.3f, "
                    "effective rank %.1f; last training epoch: %.3f, %.1f)", data.name, spec, seed,
                    health.mean_negative_cosine, health.effective_rank,
                    last.get("neg_cos", math.nan), last.get("eff_rank", math.nan))
    out.update({"collapse": float(collapsed), "neg_cos": health.mean_negative_cosine,
                "eff_rank": health.effective_rank, "collapsed_epochs": float(tr.collapsed_epochs)})
    for key in ("margin", "beta", "easy_share"):
        if key in last and last[key] is not None and np.isfinite(last[key]):
            out[f"final_{key}"] = float(last[key])
    if tr.best_state is not None:
        out["best_epoch"] = float(tr.best_epoch)
        if tr.best_epoch == len(tr.history) - 1:
            out["mAP_best"] = float(map_score(emb, data.test.labels, data.test.years))
        else:
            final_state = {k: v.detach().clone() for k, v in tr.model.state_dict().items()}
            tr.model.load_state_dict(tr.best_state)
            best = embed(tr.model, data.test, transform, device=dev,
                         batch_size=prof.eval_batch_size, workers=prof.workers)
            out["mAP_best"] = float(map_score(best, data.test.labels, data.test.years))
            tr.model.load_state_dict(final_state)
    return out


def _fmt(v: float, s: float, digits: int = 3) -> str:
    if not np.isfinite(v):
        return ""
    return f"{v:.{digits}f}" + (f" ± {s:.{digits}f}" if np.isfinite(s) else "")


def selection_markdown(per_seed: pd.DataFrame, curves: pd.DataFrame,
                       families: dict[str, str] | None = None, *, digits: int = 3,
                       max_points: int = 10) -> str:
    """Per loss: last- and best-epoch mAP (mean ± SD over seeds), the best epoch, the margin curve
    (mean over seeds, at most ``max_points`` epochs shown), final margin / beta / easy share, the
    test embedding's mean negative-pair cosine and effective rank, and the collapse flag."""
    g = per_seed.groupby(["loss", "metric"], sort=False)["value"]
    st = g.agg(mean="mean", sd=lambda v: v.std(ddof=1), n="count").reset_index()
    mean = st.pivot(index="loss", columns="metric", values="mean")
    sd = st.pivot(index="loss", columns="metric", values="sd")
    n_seeds = per_seed.groupby("loss", sort=False)["seed"].nunique()
    lines = ["| loss | mAP last epoch | mAP best epoch | best epoch | margin per epoch | final "
             "margin | final beta | final easy share | neg. cos (test) | eff. rank (test) | "
             "collapse |",
             "| --- |" + " --- |" * 10]
    for loss in dict.fromkeys(per_seed["loss"]):
        def cell(metric: str, d: int = digits, loss: str = loss) -> str:
            if metric not in mean.columns or pd.isna(mean.loc[loss, metric]):
                return ""
            return _fmt(float(mean.loc[loss, metric]), float(sd.loc[loss, metric]), d)

        curve = ""
        if not curves.empty and "margin" in curves:
            sub = curves[curves["loss"] == loss].groupby("epoch")["margin"].mean()
            scheduled = (families or {}).get(loss) in {"linear", "dams", "automargin"}
            if sub.notna().any() and (scheduled or sub.max() != sub.min()):
                idx = np.unique(
                    np.linspace(0, len(sub) - 1, min(max_points, len(sub))).round().astype(int)
                )
                curve = " ".join(f"{sub.iloc[i]:.2f}" for i in idx)
        n_col = (
            int(mean.loc[loss, "collapse"] * n_seeds[loss] + 0.5)
            if "collapse" in mean.columns
            else 0
        )
        flag = f"**yes ({n_col}/{n_seeds[loss]})**" if n_col else "no"
        lines.append(f"| {loss} | {cell('mAP')} | {cell('mAP_best')} | {cell('best_epoch', 1)} | "
                     f"{curve} | {cell('final_margin')} | {cell('final_beta')} | "
                     f"{cell('final_easy_share', 2)} | {cell('neg_cos')} | "
                     f"{cell('eff_rank', 1)} | {flag} |")
    return "\n".join(lines) + "\n"


def _assemble(dataset: str, per_seed: pd.DataFrame, per_year: pd.DataFrame, curves: pd.DataFrame,
              runs: pd.DataFrame, config: dict[str, Any]) -> ComparisonResult:
    from sphr.retrieval.plots import margin_curves_png

    table = summarize(per_seed)
    md = [f"## {dataset}: loss x metric (mean ± standard error over {per_seed['seed'].nunique()} "
          "seeds)\n", markdown_table(table),
          "\nmAP_H<S>: signs of a trained S-output head (OCAM's S-bit codes; only the losses in "
          "the profile's code_heads have them); mAP_H<S>_proj: projected codes (signs of a "
          "seeded random projection of the D-d embedding), for every loss.\n",
          "\n### Best epoch, margins and collapse (mean ± SD over seeds)\n\nmAP last epoch: the "
          "model after the final epoch (the table above); mAP best epoch: the epoch with the best "
          "mAP on the validation subjects (held out from training), evaluated on the test split. "
          "Margin per epoch: the margin in force (mean over seeds). Collapse: the test embedding "
          "or the last epoch's training batches had a mean negative-pair cosine > 0.95 or an "
          "effective rank < 2.\n\n",
          selection_markdown(per_seed, curves, {s: _entry(s).scheduler
                                                for s in dict.fromkeys(per_seed["loss"])})]
    if not per_year.empty:
        for metric in ("mAP", "CMC@1"):
            md += [f"\n### {metric} by follow-up year (gallery = baseline images)\n",
                   per_year_markdown(per_year, metric)]
    result = ComparisonResult(dataset, table, per_seed, per_year, curves, runs, "".join(md), config)
    families = {s: _entry(s).scheduler for s in dict.fromkeys(per_seed["loss"])}
    png = margin_curves_png(curves, families) if not curves.empty else None
    if png is not None:
        result.pngs["margin_curves.png"] = png
    return result


def _strip_pngs(
    data: RetrievalData, examples: dict[str, dict[str, np.ndarray]]
) -> dict[str, bytes]:
    from sphr.retrieval.plots import query_strips_png

    out = {}
    for spec, ex in examples.items():
        if len(ex.get("queries", [])) == 0:
            continue
        needed = np.unique(np.concatenate([ex["queries"], ex["results"].ravel()]))
        imgs = np.zeros((len(data.test),), dtype=object)
        disp = to_display(data.test.batch(needed)).numpy()
        for i, idx in enumerate(needed):
            imgs[idx] = disp[i]
        safe = spec.replace(":", "_").replace(",", "_").replace("=", "-")
        out[f"strips/{safe}.png"] = query_strips_png(imgs, data.test.labels, data.test.years,
                                                     ex["queries"], ex["results"],
                                                     f"{data.name}: {spec} (seed of first run)")
    return out


def write_outputs(result: ComparisonResult, out_dir: str | Path) -> dict[str, Path]:
    """Write the tables, config and PNGs of ``result`` into ``out_dir`` as one atomic set."""
    from sphr.io import staged_outputs, write_bytes, write_json, write_parquets, write_text

    out_dir = Path(out_dir)
    names: list[str] = []
    with staged_outputs(out_dir) as stage:
        write_text(result.markdown, stage / "comparison.md")
        write_parquets(stage, comparison=result.table, per_seed=result.per_seed,
                       per_year=result.per_year, margin_curves=result.margin_curves,
                       runs=result.runs)
        write_json(result.config, stage / "config.json")
        for name, png in result.pngs.items():
            write_bytes(png, stage / name)
        names = [str(p.relative_to(stage)) for p in sorted(stage.rglob("*")) if p.is_file()]
    result.files = {n: out_dir / n for n in names}
    return result.files


def combine_results(results: Sequence[ComparisonResult],
                    out_dir: str | Path | None = None) -> ComparisonResult:
    """Merge comparisons of the same dataset (e.g. one Dagster partition per loss) into one."""
    if not results:
        raise ConfigError("nothing to combine")
    names = {r.dataset for r in results}
    if len(names) != 1:
        raise ConfigError(f"cannot combine different datasets: {sorted(names)}")
    config = dict(results[0].config)
    config["losses"] = [s for r in results for s in r.config.get("losses", [])]
    config["seconds"] = sum(r.config.get("seconds", 0.0) for r in results)
    out = _assemble(results[0].dataset, pd.concat([r.per_seed for r in results], ignore_index=True),
                    pd.concat([r.per_year for r in results], ignore_index=True),
                    pd.concat([r.margin_curves for r in results], ignore_index=True),
                    pd.concat([r.runs for r in results], ignore_index=True), config)
    for r in results:
        out.pngs.update({k: v for k, v in r.pngs.items() if k.startswith("strips/")})
    if out_dir is not None:
        write_outputs(out, out_dir)
    return out
