"""The classifier results page: ``RUN/evaluate/report.html`` (self-contained) and ``.pdf``.

Rendered from ``sphr/report/templates/evaluate.html.j2`` with what
:func:`sphr.evaluate.pipeline.write_combined` has just written
(``representations.parquet``, ``losses.parquet``, per sex ``evaluate_report.json``
and the embedding pictures). The markdown tables (``tables.md``) stay the
machine-readable form; this page is for reading:

* a heatmap of weighted F1, representation x classifier per sex and task, our
  value beside the paper's (Tables 2, A3, A5), one colour scale;
* the ranking of the representations per classifier, ours beside the paper's;
* the loss comparison as a dot plot with error bars (mean ± SD over the splits),
  the paper's value beside ours (Table 3 / A2);
* generated sentences (:func:`evaluate_sentences`), never hand-written claims;
* an appendix (``<details>``, opened when printed) with the tables and pictures.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.baselines import DISPLAY_NAMES as REP_NAMES
from sphr.evaluate.names import DISPLAY_NAMES as CLF_NAMES
from sphr.evaluate.paper import LOSS_NAMES, LOSSES
from sphr.io import write_text
from sphr.labels import SEXES
from sphr.report import (
    FULL_WIDTH,
    METHOD_COLORS,
    Figure,
    figure,
    new_figure,
    print_pdf,
    render,
    style_axes,
    styled,
    table,
)

log = logging.getLogger(__name__)

SEX_TITLES = {"female": "Women", "male": "Men"}
TASK_TITLES = {"binary": "binary (unhealthy vs healthy)",
               "multi": "multi-class (unhealthy / apparently healthy / BFH)"}
TASK_SHORT = {"binary": "binary", "multi": "multi-class"}
METRIC = "weighted_f1"
REP_ORDER: tuple[str, ...] = ("raw", "pca", "ica", "diffmap", "deep_patient", "sphr")
CLF_ORDER: tuple[str, ...] = ("knn", "lda", "nn_ehr", "xgboost")


def _ordered(values, order) -> list[str]:
    present = list(dict.fromkeys(values))
    return [v for v in order if v in present] + [v for v in present if v not in order]


def _panels(table_: pd.DataFrame) -> list[tuple[str, str]]:
    keys = table_[["sex", "task"]].drop_duplicates()
    sexes = _ordered(keys["sex"], SEXES)
    return [(s, t) for s in sexes for t in ("binary", "multi")
            if ((keys["sex"] == s) & (keys["task"] == t)).any()]


# ---------------------------------------------------------------- numbers


def ranks(t: pd.DataFrame, column: str) -> dict[str, int]:
    """Rank (1 = best) of each representation by ``column`` within one classifier."""
    s = t.set_index("representation")[column].dropna().sort_values(ascending=False)
    return {rep: i + 1 for i, rep in enumerate(s.index)}


def _counts(best: dict[str, str], total: int) -> str:
    c = pd.Series(best).value_counts()
    return ", ".join(f"{REP_NAMES.get(r, r)} ({n} of {total})" for r, n in c.items())


def evaluate_sentences(reps: pd.DataFrame, losses: pd.DataFrame | None = None) -> list[str]:
    """Per sex and task, what the numbers say (weighted F1), generated from the tables."""
    out = []
    t = reps[reps["metric"] == METRIC]
    for sex, task in _panels(t):
        p = t[(t["sex"] == sex) & (t["task"] == task)]
        clfs = _ordered(p["classifier"], CLF_ORDER)
        both = p.dropna(subset=["paper_mean"])
        best = {c: p[p["classifier"] == c].sort_values("mean", ascending=False)
                ["representation"].iloc[0] for c in clfs}
        text = (f"{SEX_TITLES.get(sex, sex)}, {TASK_SHORT[task]}: best per classifier here "
                f"{_counts(best, len(clfs))}")
        paper_best = {c: both[both["classifier"] == c].sort_values("paper_mean", ascending=False)
                      ["representation"].iloc[0]
                      for c in clfs if (both["classifier"] == c).any()}
        if paper_best:
            text += f"; in the paper {_counts(paper_best, len(paper_best))}"
        text += "."
        sphr = p[p["representation"] == "sphr"]
        if len(sphr):
            text += f" SPHR {sphr['mean'].min():.3f}-{sphr['mean'].max():.3f}"
            if sphr["paper_mean"].notna().any():
                text += (f" (paper {sphr['paper_mean'].min():.3f}-"
                         f"{sphr['paper_mean'].max():.3f})")
            text += "."
        if len(both):
            diff = both["mean"] - both["paper_mean"]
            text += (f" Ours minus the paper: {diff.mean():+.3f} on average ({diff.min():+.3f} "
                     f"to {diff.max():+.3f}, {len(both)} cells).")
        out.append(text)
    return out + loss_sentences(losses)


def loss_sentences(losses: pd.DataFrame | None) -> list[str]:
    """Where NPLB ranks among the losses, ours and the paper's (weighted F1)."""
    out: list[str] = []
    if losses is not None and len(losses):
        clf = _loss_classifier(losses)
        lt = losses[(losses["metric"] == METRIC) & (losses["classifier"] == clf)]
        parts = []
        for sex, task in _panels(lt):
            g = lt[(lt["sex"] == sex) & (lt["task"] == task)].sort_values("mean", ascending=False)
            if "nplb" not in set(g["loss"]):
                continue
            part = (f"{SEX_TITLES.get(sex, sex).lower()} {TASK_SHORT[task]} "
                    f"{list(g['loss']).index('nplb') + 1} of {len(g)}")
            gp = g.dropna(subset=["paper_mean"]).sort_values("paper_mean", ascending=False)
            if "nplb" in set(gp["loss"]):
                part += f" (paper {list(gp['loss']).index('nplb') + 1} of {len(gp)})"
            parts.append(part)
        if parts:
            out.append(f"Losses ({CLF_NAMES.get(clf, clf)}): NPLB ranks " + "; ".join(parts)
                       + ".")
    return out


def _loss_classifier(losses: pd.DataFrame) -> str:
    clfs = list(dict.fromkeys(losses["classifier"]))
    return "xgboost" if "xgboost" in clfs else clfs[0]


# ---------------------------------------------------------------- figures


@styled
def heatmap(reps: pd.DataFrame) -> Figure:
    """Weighted F1, classifier (rows) x representation (ours | paper), a panel per sex and
    task, one colour scale; a hatched cell: the paper has no such number."""
    from matplotlib import colormaps

    t = reps[reps["metric"] == METRIC]
    panels = _panels(t)
    rep_list = _ordered(t["representation"], REP_ORDER)
    clfs = _ordered(t["classifier"], CLF_ORDER)
    values = np.concatenate([t["mean"].to_numpy(float), t["paper_mean"].dropna().to_numpy(float)])
    vmin, vmax = float(np.nanmin(values)), float(np.nanmax(values))
    cmap = colormaps["YlGnBu"]
    ph = 0.18 * len(clfs) + 0.6
    fig, axes = new_figure(FULL_WIDTH, ph * len(panels) + 0.55, nrows=max(1, len(panels)),
                           squeeze=False, left=0.75, right=0.95, top=0.5, bottom=0.42,
                           hspace=0.62)
    ncol = 2 * len(rep_list)
    for ax, (sex, task) in zip(axes[:, 0], panels, strict=False):
        p = t[(t["sex"] == sex) & (t["task"] == task)]
        grid = np.full((len(clfs), ncol), np.nan)
        for i, c in enumerate(clfs):
            for j, r in enumerate(rep_list):
                hit = p[(p["classifier"] == c) & (p["representation"] == r)]
                if len(hit):
                    grid[i, 2 * j] = hit["mean"].iloc[0]
                    grid[i, 2 * j + 1] = hit["paper_mean"].iloc[0]
        ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        for i in range(len(clfs)):
            for j in range(ncol):
                v = grid[i, j]
                if np.isnan(v):
                    ax.add_patch(_hatch(j, i))
                    ax.text(j, i, "-", ha="center", va="center", fontsize=7, color="#777777")
                    continue
                dark = (v - vmin) / max(vmax - vmin, 1e-9) > 0.6
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=6.4,
                        color="white" if dark else "black",
                        fontweight="bold" if j % 2 == 0 else "normal")
        for j in range(1, len(rep_list)):
            ax.axvline(2 * j - 0.5, color="white", lw=3)
        ax.set_yticks(range(len(clfs)), [CLF_NAMES.get(c, c) for c in clfs])
        last = (sex, task) == panels[-1]
        ax.set_xticks(range(ncol), ["ours", "paper"] * len(rep_list) if last else [],
                      fontsize=6.2, color="#555555")
        ax.tick_params(length=0)
        top = ax.secondary_xaxis("top")
        top.set_xticks([2 * j + 0.5 for j in range(len(rep_list))],
                       [REP_NAMES.get(r, r) for r in rep_list], fontsize=7.5)
        top.tick_params(length=0)
        top.spines["top"].set_visible(False)
        for sp in ax.spines.values():
            sp.set_visible(False)
        src = p["paper_table"].dropna().unique()
        ax.set_title(f"{SEX_TITLES.get(sex, sex)}, {TASK_TITLES[task]}"
                     + (f"  (paper: {', '.join(src)})" if len(src) else ""),
                     fontsize=8, loc="left", pad=16)
    # one colour bar for every panel
    h = fig.get_size_inches()[1]
    cax = fig.add_axes((1 - 0.78 / FULL_WIDTH, 0.42 / h, 0.1 / FULL_WIDTH, 1 - 0.92 / h))
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    cb = fig.colorbar(ScalarMappable(Normalize(vmin, vmax), cmap), cax=cax)
    cb.set_label("weighted F1 (mean over splits)", fontsize=7.5)
    cb.ax.tick_params(labelsize=7)
    fig.text(0.5, 0.08 / h, "bold: ours (mean over the seeded 80/20 splits); plain: the "
             "paper's published value; '-': the paper has no such number", ha="center",
             fontsize=7, color="#444444")
    return figure(fig, "weighted F1 heatmap, ours beside the paper's")


def _hatch(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="#f2f2f2", edgecolor="#cccccc",
                     hatch="////", lw=0)


@styled
def ranking_plot(reps: pd.DataFrame) -> Figure:
    """Rank of each representation per classifier, ours (left) joined to the paper's (right)
    by a line, over the representations both report; a panel per sex and task."""
    from matplotlib.lines import Line2D

    t = reps[(reps["metric"] == METRIC) & reps["paper_mean"].notna()]
    panels = _panels(t)
    rep_list = _ordered(t["representation"], REP_ORDER)
    clfs = _ordered(t["classifier"], CLF_ORDER)
    nrows = int(np.ceil(len(panels) / 2))
    n_rank = max([t[(t["sex"] == s) & (t["task"] == k)]["representation"].nunique()
                  for s, k in panels] or [1])
    fig, axes = new_figure(FULL_WIDTH, (0.15 * n_rank + 0.9) * nrows + 0.5, nrows=nrows,
                           ncols=2, squeeze=False, left=0.45, right=0.1, top=0.5, bottom=0.45,
                           wspace=0.35, hspace=0.85)
    for ax, (sex, task) in zip(axes.ravel(), panels, strict=False):
        p = t[(t["sex"] == sex) & (t["task"] == task)]
        for k, c in enumerate(clfs):
            pc = p[p["classifier"] == c]
            ours, paper = ranks(pc, "mean"), ranks(pc, "paper_mean")
            x0, x1 = 3 * k, 3 * k + 1
            for r in rep_list:
                if r not in ours or r not in paper:
                    continue
                color = METHOD_COLORS.get(r, "#333333")
                lw = 2.2 if r == "sphr" else 1.1
                ax.plot([x0, x1], [ours[r], paper[r]], color=color, lw=lw, marker="o", ms=3.5,
                        zorder=3 if r == "sphr" else 2)
            same = all(ours.get(r) == paper.get(r) for r in paper)
            ax.text(3 * k + 0.5, 0.35, CLF_NAMES.get(c, c) + (" =" if same else ""),
                    ha="center", va="bottom", fontsize=7, fontweight="bold")
        ax.set_xticks([x for k in range(len(clfs)) for x in (3 * k, 3 * k + 1)],
                      ["ours", "paper"] * len(clfs), fontsize=6.5)
        ax.set_ylim(n_rank + 0.5, 0.1)
        ax.set_yticks(range(1, n_rank + 1))
        ax.set_ylabel("rank (1 = best)")
        ax.set_xlim(-0.5, 3 * len(clfs) - 1.5)
        ax.set_title(f"{SEX_TITLES.get(sex, sex)}, {TASK_SHORT[task]}", pad=14)
        ax.spines[["top", "right", "bottom"]].set_visible(False)
        ax.tick_params(axis="x", length=0)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    handles = [Line2D([], [], color=METHOD_COLORS.get(r, "#333"), marker="o", ms=3.5,
                      lw=2.2 if r == "sphr" else 1.1, label=REP_NAMES.get(r, r))
               for r in rep_list]
    h = fig.get_size_inches()[1]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, 0.02 / h))
    return figure(fig, "ranking of the representations per classifier")


@styled
def loss_plot(losses: pd.DataFrame) -> Figure:
    """Weighted F1 per loss (mean ± SD over the splits), ours (dot) beside the paper's
    (diamond), a panel per sex and task."""
    from matplotlib.lines import Line2D

    clf = _loss_classifier(losses)
    t = losses[(losses["metric"] == METRIC) & (losses["classifier"] == clf)]
    panels = _panels(t)
    loss_list = _ordered(t["loss"], LOSSES)
    labels = [LOSS_NAMES.get(x, x) for x in loss_list]
    nrows = int(np.ceil(len(panels) / 2))
    import matplotlib.ticker as mticker

    fig, axes = new_figure(FULL_WIDTH, (0.18 * len(loss_list) + 0.85) * nrows + 0.5,
                           nrows=nrows, ncols=2, squeeze=False, sharey=True, left=0.95,
                           right=0.12, top=0.22, bottom=0.78, wspace=0.25, hspace=0.75)
    y = np.arange(len(loss_list))[::-1]
    for ax, (sex, task) in zip(axes.ravel(), panels, strict=False):
        style_axes(ax)
        p = t[(t["sex"] == sex) & (t["task"] == task)].set_index("loss").reindex(loss_list)
        for yy, loss in zip(y, loss_list, strict=True):
            color = METHOD_COLORS["nplb"] if loss == "nplb" else "#333333"
            m, sd = p.at[loss, "mean"], p.at[loss, "sd"]
            if np.isfinite(m):
                ax.errorbar([m], [yy + 0.12], xerr=[[np.nan_to_num(sd)], [np.nan_to_num(sd)]],
                            fmt="o", color=color, ms=4, capsize=2, elinewidth=1)
            pm, psd = p.at[loss, "paper_mean"], p.at[loss, "paper_sd"]
            if np.isfinite(pm):
                ax.errorbar([pm], [yy - 0.12], xerr=[[np.nan_to_num(psd)], [np.nan_to_num(psd)]],
                            fmt="D", color=color, mfc="white", ms=3.6, capsize=2, elinewidth=1)
        ax.set_title(f"{SEX_TITLES.get(sex, sex)}, {TASK_SHORT[task]}")
        ax.set_xlabel(f"weighted F1 ({CLF_NAMES.get(clf, clf)}; mean ± SD)")
        ax.grid(False, axis="y")
        ax.xaxis.set_major_locator(mticker.MaxNLocator(5))
    for ax in axes[:, 0]:
        ax.set_yticks(y, labels)
        for tick, loss in zip(ax.get_yticklabels(), loss_list, strict=True):
            if loss == "nplb":
                tick.set_color(METHOD_COLORS["nplb"])
                tick.set_fontweight("bold")
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    handles = [Line2D([], [], marker="o", ls="", color="#333333", ms=4,
                      label="ours: mean ± SD over the splits"),
               Line2D([], [], marker="D", ls="", color="#333333", mfc="white", ms=3.6,
                      label="paper (Table 3 / A2); absent where not published")]
    h = fig.get_size_inches()[1]
    fig.legend(handles=handles, loc="lower center", ncol=2, frameon=False,
               bbox_to_anchor=(0.5, 0.02 / h))
    return figure(fig, "loss comparison dot plot")


# ---------------------------------------------------------------- tables


def _fmt(m: float, sd: float) -> str:
    if m is None or not np.isfinite(m):
        return "-"
    return f"{m:.3f} ± {sd:.3f}" if sd is not None and np.isfinite(sd) else f"{m:.3f}"


def _wide(reps: pd.DataFrame, sex: str, task: str, metric: str) -> pd.DataFrame:
    """Rows classifier x (ours, paper), a column per representation: fits an A4 page."""
    p = reps[(reps["sex"] == sex) & (reps["task"] == task) & (reps["metric"] == metric)]
    rep_list = _ordered(p["representation"], REP_ORDER)
    rows = []
    for c in _ordered(p["classifier"], CLF_ORDER):
        for source, (m, sd) in (("ours", ("mean", "sd")), ("paper", ("paper_mean", "paper_sd"))):
            row: dict[str, str] = {"classifier": CLF_NAMES.get(c, c), "": source}
            for r in rep_list:
                hit = p[(p["classifier"] == c) & (p["representation"] == r)]
                row[REP_NAMES.get(r, r)] = _fmt(*hit[[m, sd]].iloc[0]) if len(hit) else "-"
            rows.append(row)
    return pd.DataFrame(rows)


def _loss_wide(losses: pd.DataFrame) -> pd.DataFrame:
    clf = _loss_classifier(losses)
    t = losses[(losses["metric"] == METRIC) & (losses["classifier"] == clf)]
    loss_list = _ordered(t["loss"], LOSSES)
    rows = []
    for sex, task in _panels(t):
        g = t[(t["sex"] == sex) & (t["task"] == task)].set_index("loss")
        for source, (m, sd) in (("ours", ("mean", "sd")), ("paper", ("paper_mean", "paper_sd"))):
            row = {"sex, task": f"{SEX_TITLES.get(sex, sex)}, {TASK_SHORT[task]}", "": source}
            for loss in loss_list:
                row[LOSS_NAMES.get(loss, loss)] = _fmt(g.at[loss, m], g.at[loss, sd]) \
                    if loss in g.index else "-"
            rows.append(row)
    return pd.DataFrame(rows)


def _provenance(out_dir: Path, reps: pd.DataFrame) -> list[tuple[str, str]]:
    items = []
    per_sex = {}
    for sex in _ordered(reps["sex"], SEXES):
        path = out_dir / sex / "evaluate_report.json"
        if path.exists():
            per_sex[sex] = json.loads(path.read_text())
    if per_sex:
        parts = []
        for sex, r in per_sex.items():
            proto = r.get("protocol", {})
            counts = proto.get("class_counts", {})
            parts.append(f"{SEX_TITLES.get(sex, sex)} {r.get('n_test', '?')} test participants"
                         + (f" (unhealthy / apparently healthy / BFH {counts.get('0', '?')} / "
                            f"{counts.get('1', '?')} / {counts.get('2', '?')})" if counts else ""))
        items.append(("participants", "; ".join(parts)))
        proto = next(iter(per_sex.values())).get("protocol", {})
        if proto:
            items.append(("protocol", f"{proto.get('n_splits', '?')} stratified "
                                      f"{100 * (1 - proto.get('test_size', 0.2)):.0f}/"
                                      f"{100 * proto.get('test_size', 0.2):.0f} splits, seeds "
                                      f"{proto.get('split_seeds', '?')}; mean ± SD over splits"))
        missing = sorted({m for r in per_sex.values()
                          for m in r.get("embeddings", {}).get("missing", [])})
        if missing:
            items.append(("not available", ", ".join(REP_NAMES.get(m, m) for m in missing)))
    items.append(("run", f"{out_dir.parent}; page generated {dt.datetime.now():%Y-%m-%d %H:%M}"))
    return items


def write_evaluate_report(out_dir: str | Path, *, pdf: bool = True) -> Path | None:
    """Write ``OUT/report.html`` (+ ``report.pdf``) from the combined tables in ``out_dir``;
    None when there is no ``representations.parquet`` yet."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    if not (out_dir / "representations.parquet").exists():
        return None
    reps = pd.read_parquet(out_dir / "representations.parquet")
    losses = pd.read_parquet(out_dir / "losses.parquet") \
        if (out_dir / "losses.parquet").exists() else None
    has_paper = reps["paper_mean"].notna().any()
    embed = []
    for sex in _ordered(reps["sex"], SEXES):
        png = out_dir / sex / "plots" / "representations.png"
        if png.exists():
            embed.append(Figure(png.read_bytes(), FULL_WIDTH,
                             f"{sex}: PCA of each representation",
                             f"{SEX_TITLES.get(sex, sex)}: test participants, first two "
                             "principal components of each representation, by class."))
    tables = [(f"{SEX_TITLES.get(s, s)}, {TASK_TITLES[k]}, {m.replace('_', ' ')}",
               table(_wide(reps, s, k, m), nowrap=True))
              for s in _ordered(reps["sex"], SEXES) for k in ("binary", "multi")
              for m in ("weighted_f1", "micro_f1")
              if ((reps["sex"] == s) & (reps["task"] == k) & (reps["metric"] == m)).any()]
    ctx: dict[str, Any] = {
        "title": "Downstream classification: ours beside the paper",
        "provenance": _provenance(out_dir, reps),
        "sentences": evaluate_sentences(reps),
        "loss_sentences": loss_sentences(losses),
        "heatmap": heatmap(reps),
        "ranking": ranking_plot(reps) if has_paper else None,
        "loss_fig": loss_plot(losses) if losses is not None and len(losses) else None,
        "loss_classifier": (CLF_NAMES.get(_loss_classifier(losses), "")
                            if losses is not None and len(losses) else ""),
        "tables": tables,
        "loss_table": (table(_loss_wide(losses), nowrap=True)
                       if losses is not None and len(losses) else None),
        "embed": embed,
    }
    out = write_text(render("evaluate.html.j2", **ctx), out_dir / "report.html")
    t_html = time.perf_counter() - t0
    if pdf:
        print_pdf(out)
    log.info("evaluate report: html %.1f s, pdf %.1f s", t_html,
             time.perf_counter() - t0 - t_html)
    return out
