"""Result tables in the paper's shape, with the paper's published number beside ours.

* representation x classifier, one table per sex, task and metric (Tables 2, A3-A6)
* loss x task (Table 3 / A2)

Each is a long DataFrame (written as parquet) and markdown, where every
representation (or loss) has two columns: ours (mean ± SD over the splits) and
the paper's ("-" where the paper has no number). Under each table a line gives
the order of the representations for each classifier, ours and the paper's
(over the representations both have), so agreement is visible at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sphr.baselines import DISPLAY_NAMES as REP_NAMES
from sphr.evaluate.names import DISPLAY_NAMES as CLF_NAMES
from sphr.evaluate.paper import LOSS_NAMES, LOSSES, paper_loss, paper_representation

SEX_NAMES = {"female": "Women", "male": "Men"}
TASK_NAMES = {"binary": "binary (unhealthy vs healthy)",
              "multi": "multi-class (unhealthy / apparently healthy / BFH)"}
METRIC_NAMES = {"weighted_f1": "weighted F1", "micro_f1": "micro F1"}


def _ours_beside_paper(row: dict[str, str], name: str, hit: pd.DataFrame) -> None:
    """Fill ``row[name]`` and ``row[name + " (paper)"]`` from the first matching score row."""
    if hit.empty:
        row[name] = row[f"{name} (paper)"] = "-"
        return
    h = hit.iloc[0]
    row[name] = fmt(h["mean"], h["sd"])
    row[f"{name} (paper)"] = fmt(h["paper_mean"], h["paper_sd"], 4)


def fmt(mean: float, sd: float | None = None, digits: int = 4) -> str:
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "-"
    if sd is None or (isinstance(sd, float) and np.isnan(sd)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (pandas ``to_markdown``, i.e. tabulate's ``pipe``).

    Cells are already formatted text ("0.6093 ± 0.0020", "-"): no number parsing, and a
    ``|`` inside a cell is escaped so it does not split the cell.
    """
    cells = df.astype(str).apply(lambda col: col.str.replace("|", "\\|", regex=False))
    cells.columns = [str(c).replace("|", "\\|") for c in df.columns]
    return cells.to_markdown(index=False, tablefmt="pipe", disable_numparse=True)


def _with_paper(summary: pd.DataFrame, lookup) -> pd.DataFrame:
    paper = [lookup(r) for r in summary.itertuples(index=False)]
    return summary.assign(
        paper_mean=[p[0] if p else np.nan for p in paper],
        paper_sd=[p[1] if p else np.nan for p in paper],
        paper_table=[p[2] if p else None for p in paper],
    )


def representation_table(summary: pd.DataFrame, sex: str) -> pd.DataFrame:
    """``summarize`` output for one sex + the paper's numbers (long format)."""
    out = summary.assign(sex=sex)
    out = _with_paper(out, lambda r: paper_representation(sex, r.task, r.metric, r.representation,
                                                          r.classifier))
    cols = ["sex", "task", "metric", "representation", "classifier", "mean", "sd", "n_splits",
            "paper_mean", "paper_sd", "paper_table"]
    return out[cols].reset_index(drop=True)


def loss_table(summary: pd.DataFrame, sex: str) -> pd.DataFrame:
    """Loss comparison summary (column ``loss`` in place of representation) + the paper's."""
    out = summary.assign(sex=sex)
    out = _with_paper(out, lambda r: paper_loss(sex, r.task, r.loss)
                      if r.metric == "weighted_f1" and r.classifier == "xgboost" else None)
    cols = ["sex", "task", "metric", "loss", "classifier", "mean", "sd", "n_splits",
            "paper_mean", "paper_sd", "paper_table"]
    return out[cols].reset_index(drop=True)


def _order(values: dict[str, float]) -> str:
    items = sorted(((v, k) for k, v in values.items() if not np.isnan(v)), reverse=True)
    return " > ".join(REP_NAMES.get(k, k) for _, k in items)


def ordering(table: pd.DataFrame, classifier: str) -> tuple[str, str]:
    """(our order, the paper's order) of representations, over those both have."""
    t = table[(table["classifier"] == classifier) & table["paper_mean"].notna()]
    ours = dict(zip(t["representation"], t["mean"], strict=True))
    paper = dict(zip(t["representation"], t["paper_mean"], strict=True))
    return _order(ours), _order(paper)


def representation_markdown(table: pd.DataFrame, representations: Sequence[str] | None = None
                            ) -> str:
    """One markdown table per (sex, task, metric): classifiers x (ours,
    paper) per representation."""
    parts = []
    reps = list(representations or dict.fromkeys(table["representation"]))
    for (sex, task, metric), t in table.groupby(["sex", "task", "metric"], sort=False):
        src = t["paper_table"].dropna().unique()
        where = f"paper: {', '.join(src)}" if len(src) else "the paper has no such table"
        parts.append(f"#### {SEX_NAMES.get(sex, sex)}, {TASK_NAMES[task]}, "
                     f"{METRIC_NAMES[metric]} ({where})\n")
        rows = []
        for clf in dict.fromkeys(t["classifier"]):
            row = {"classifier": CLF_NAMES.get(clf, clf)}
            for rep in reps:
                hit = t[(t["classifier"] == clf) & (t["representation"] == rep)]
                _ours_beside_paper(row, REP_NAMES.get(rep, rep), hit)
            rows.append(row)
        parts.append(to_markdown(pd.DataFrame(rows)))
        if len(src):
            lines = []
            for clf in dict.fromkeys(t["classifier"]):
                ours, paper = ordering(t, clf)
                same = "same order" if ours == paper else "order differs"
                lines.append(f"- {CLF_NAMES.get(clf, clf)}: ours {ours}; paper {paper} ({same})")
            parts.append("\nOrder over the representations both report:\n\n" + "\n".join(lines))
        parts.append("")
    return "\n".join(parts)


def loss_markdown(table: pd.DataFrame, classifier: str = "xgboost",
                  metric: str = "weighted_f1") -> str:
    """Rows: sex x task; columns: each loss, ours and the paper's (Table 3 / A2 shape)."""
    t = table[(table["classifier"] == classifier) & (table["metric"] == metric)]
    if t.empty:
        return ""
    losses = [x for x in LOSSES if x in set(t["loss"])] + sorted(set(t["loss"]) - set(LOSSES))
    rows = []
    for (sex, task), g in t.groupby(["sex", "task"], sort=False):
        row = {"": f"{SEX_NAMES.get(sex, sex)}: {'binary' if task == 'binary' else 'multi-class'}"}
        for loss in losses:
            _ours_beside_paper(row, LOSS_NAMES.get(loss, loss), g[g["loss"] == loss])
        rows.append(row)
    head = (f"#### Loss comparison: {CLF_NAMES.get(classifier, classifier)}, "
            f"{METRIC_NAMES[metric]} (paper: Table 3, Table A2)\n")
    return head + "\n" + to_markdown(pd.DataFrame(rows)) + "\n"
