"""A risk refresh: re-score every participant of a new export with the current model.

Nothing is refitted and no model file is written: the model folder
(``RUN/risk/model``) is hashed (sha256 per file) before and after, and a
difference is an error. Output, one folder per export version (earlier ones
are kept), under ``RUN/risk/refresh/<export-version>/``:

* ``risk_groups.parquet`` / ``.csv``: every scorable method and mode, with
  ``imputed_features`` (how many of the participant's features were imputed);
* ``risk_group_export.csv``: one row per participant, the headline method
  (``sphr``, calibrated mode, when fitted) with group, score and the flag;
* ``unscorable.csv``: who could not be scored, and why;
* ``changes.csv`` and the report's "changes since the previous refresh"
  table: who is new, who left, who moved group;
* ``drift.csv``: per sex and feature, SMD / PSI / KS / out-of-range share and status
  against the training population (:func:`sphr.risk.serve.drift.drift_table`, the table
  ``sphr score`` writes);
* ``beyond_age.parquet`` / ``group_ordering.parquet``: where the export has linked
  records, everyone scored judged as the risk stage judges its held-out people
  (:func:`sphr.risk.validation.beyond.scored_tables`; columns: :mod:`sphr.risk.validation.beyond`);
* ``report.md`` / ``report.html`` (the verdict first, in the main report's structure:
  :mod:`sphr.risk.report.verdict_page`; without linked records it says why the ordering
  cannot be judged) and ``refresh.json`` (date, export version, model sha256, counts,
  seconds, ``ordering``).

``RUN/risk/refresh/index.json`` lists the refreshes in order; "previous" is
the latest entry for another export version.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any

import pandas as pd

from sphr.data.fingerprint import tree_sha256
from sphr.errors import InputError
from sphr.io import read_json, staged_outputs, write_json, write_parquet, write_text
from sphr.risk.model import RiskModel, find_model_dir
from sphr.risk.report.pages import render_page
from sphr.risk.serve.drift import drift_line, drift_table

HEADLINE = (("sphr", "calibrated"), ("mahalanobis", "calibrated"), ("raw_euclidean", "calibrated"))
INDEX = "index.json"


def refresh_root(run: str | Path) -> Path:
    return Path(run) / "risk" / "refresh"


def headline(rows: pd.DataFrame) -> tuple[str, str]:
    present = set(zip(rows["method"], rows["mode"], strict=True))
    for pair in HEADLINE:
        if pair in present:
            return pair
    return tuple(rows[["method", "mode"]].iloc[0]) if len(rows) else HEADLINE[0]


def read_index(root: Path) -> list[dict]:
    return read_json(root / INDEX) if (root / INDEX).is_file() else []


def previous_refresh(root: Path, version: str) -> Path | None:
    earlier = [e for e in read_index(root) if e["version"] != version
               and (root / e["version"] / "risk_group_export.csv").is_file()]
    return root / earlier[-1]["version"] if earlier else None


def changes(current: pd.DataFrame, previous: pd.DataFrame | None) -> pd.DataFrame:
    """eid, sex, change (new / left / moved / same), group_before, group_after."""
    cur = current[["eid", "sex", "group"]].rename(columns={"group": "group_after"})
    if previous is None:
        return cur.assign(change="new", group_before=None)[
            ["eid", "sex", "change", "group_before", "group_after"]]
    prev = previous[["eid", "sex", "group"]].rename(columns={"group": "group_before",
                                                             "sex": "sex_before"})
    both = cur.merge(prev, on="eid", how="outer", indicator=True)
    both["sex"] = both["sex"].fillna(both["sex_before"])
    both["change"] = "same"
    both.loc[both["_merge"] == "left_only", "change"] = "new"
    both.loc[both["_merge"] == "right_only", "change"] = "left"
    moved = (both["_merge"] == "both") & (both["group_before"] != both["group_after"])
    both.loc[moved, "change"] = "moved"
    return both[["eid", "sex", "change", "group_before", "group_after"]].sort_values(
        ["change", "eid"]).reset_index(drop=True)


def change_summary(table: pd.DataFrame) -> pd.DataFrame:
    counts = table["change"].value_counts().reindex(["new", "left", "moved", "same"], fill_value=0)
    return counts.rename_axis("change").reset_index(name="participants")


def _groups_by_completeness(export: pd.DataFrame) -> pd.DataFrame:
    status = export["imputed_features"].gt(0).map({False: "complete", True: "imputed"})
    counts = pd.crosstab([export["sex"], status.rename("values")], export["group"])
    share = counts.div(counts.sum(axis=1), axis=0).mul(100).round(1)
    share.columns = [f"{c} %" for c in share.columns]
    return share.assign(n=counts.sum(axis=1)).reset_index()


def _report(info: dict, summary: pd.DataFrame, moved: pd.DataFrame, completeness: pd.DataFrame,
            unscorable: pd.DataFrame, drift: pd.DataFrame | None, verdict: list[tuple[str, Any]]
            ) -> tuple[str, str]:
    """The report as markdown and as a self-contained HTML page (same content): the verdict
    first (``verdict``: :func:`sphr.risk.report.verdict_page.verdict_blocks`)."""
    blocks: list[tuple[str, Any]] = [
        ("h1", f"Risk refresh {info['date']}"),
        ("p", f"Export {info['export']}, version {info['export_version']}; model "
              f"{info['model']} (unchanged, sha256 checked); headline method "
              f"{info['method']} ({info['mode']})."),
        ("p", f"Scored {info['participants_scored']} participants "
              f"({info['participants_imputed']} with imputed features); "
              f"{info['unscorable']} unscorable."),
        *verdict,
        ("h2", "Changes since the previous refresh"),
        ("p", f"Previous refresh: {info['previous_version'] or 'none (first refresh)'}."),
        ("table", summary), ("p", "Moves between groups (previous -> now):"), ("table", moved),
        ("h2", "Groups of complete and imputed participants"),
        ("p", "Imputed: missing features set to the per-sex training median (0 on the normal "
              "scale; fitted on the training partition only)."),
        ("table", completeness),
        ("h2", "Unscorable participants"), ("table", unscorable)]
    if drift is not None:
        flagged = drift[~drift["status"].isin(("ok", "few values"))]
        blocks += [("h2", "Drift against the training population"),
                   ("p", f"{drift_line(drift)}. Flagged: |SMD| or PSI >= 0.1 (moderate), "
                         ">= 0.25 (drift), or most values out of range (units)."),
                   ("table", flagged.round(3))]
    return render_page(blocks, f"Risk refresh {info['export_version']}")


def _judged(rows: pd.DataFrame, fitted: RiskModel, outcomes: pd.DataFrame | None,
            why_not: str | None) -> tuple[dict[str, pd.DataFrame] | None, list[tuple[str, Any]],
                                          dict[str, Any]]:
    """The yardstick tables of everyone scored against the export's linked records (the risk
    stage's, :func:`sphr.risk.validation.beyond.scored_tables`), the report's verdict blocks and
    what
    refresh.json says; no tables, and why, without records."""
    from sphr.risk.config import RiskConfig
    from sphr.risk.report.verdict_page import verdict_blocks
    from sphr.risk.validation.beyond import judged_groups

    config = fitted.config or RiskConfig()
    tables, state = judged_groups(
        rows, outcomes, why_not or "the refresh was given no linked records of this export",
        n_bootstrap=config.n_bootstrap_linked, seed=config.seed)
    blocks = verdict_blocks(tables, rows, fitted.sphr_,
                            people="everyone scored in this refresh",
                            why_not=state.get("why", ""))
    return tables, blocks, state


def run_refresh(run: str | Path, baseline: pd.DataFrame, export: str | Path, export_version: str,
                *, model: str | Path | None = None, device: str = "auto",
                allow_out_of_range: bool = False, drift: pd.DataFrame | None = None,
                date: str | None = None, outcomes: pd.DataFrame | None = None,
                no_outcomes: str | None = None) -> dict[str, Any]:
    """Score ``baseline`` (the ingested new export) with RUN's current risk model.
    ``outcomes``: the export's linked records as the ingest builds them
    (``outcomes.parquet``'s frame), against which the groups are judged; without them the
    report says why (``no_outcomes``: the ingest's reason)."""
    t0 = time.perf_counter()
    run = Path(run)
    model_dir = find_model_dir(model or run)
    before = tree_sha256(model_dir)
    if not before:
        raise InputError("empty model folder", file=model_dir)
    root = refresh_root(run)
    prev_dir = previous_refresh(root, export_version)
    fitted = RiskModel.load(model_dir, device=device)
    if drift is None:  # the table sphr score writes, against the model that scores
        drift = drift_table(baseline, fitted)
    rows, participants, unscorable, score_report, _ = fitted.score_cohort(
        baseline, source=export, allow_out_of_range=allow_out_of_range)
    rows = rows.merge(participants[["eid", "imputed_features"]], on="eid", how="left")
    method, mode = headline(rows)
    export_rows = rows.loc[(rows["method"] == method) & (rows["mode"] == mode),
                           ["eid", "sex", "age_years", "age_group", "score", "group"]]
    export_rows = export_rows.merge(participants[["eid", "imputed_features", "imputed"]],
                                    on="eid", how="left").sort_values("eid")
    previous = pd.read_csv(prev_dir / "risk_group_export.csv") if prev_dir else None
    change_table = changes(export_rows, previous)
    summary = change_summary(change_table)
    moved = change_table[change_table["change"] == "moved"]
    moves = (moved.groupby(["group_before", "group_after"]).size().reset_index(name="participants")
             if len(moved) else pd.DataFrame(columns=["group_before", "group_after",
                                                      "participants"]))
    completeness = _groups_by_completeness(export_rows)
    tables, verdict, judged = _judged(rows, fitted, outcomes, no_outcomes)
    info = {
        "date": date or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "export": str(export), "export_version": export_version, "model": str(model_dir),
        "model_sha256": before, "method": method, "mode": mode,
        "previous_version": prev_dir.name if prev_dir else None,
        "participants_scored": len(export_rows),
        "participants_imputed": int(export_rows["imputed_features"].gt(0).sum()),
        "unscorable": len(unscorable),
        "changes": dict(zip(summary["change"], summary["participants"].astype(int), strict=True)),
        "score_report": score_report, "ordering": judged,
    }
    out = root / export_version
    with staged_outputs(out) as stage:
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_text(export_rows.to_csv(index=False), stage / "risk_group_export.csv")
        write_text(unscorable.to_csv(index=False), stage / "unscorable.csv")
        write_text(change_table.to_csv(index=False), stage / "changes.csv")
        if drift is not None:
            write_text(drift.to_csv(index=False), stage / "drift.csv")
        for name, frame in (tables or {}).items():
            write_parquet(frame, stage / f"{name}.parquet")
        text, page = _report(info, summary, moves, completeness, unscorable, drift, verdict)
        write_text(text, stage / "report.md")
        write_text(page, stage / "report.html")
        after = tree_sha256(model_dir)
        if after != before:
            raise RuntimeError(f"the model folder {model_dir} changed during a refresh")
        info["seconds"] = round(time.perf_counter() - t0, 2)
        write_json(info, stage / "refresh.json")
    index = [e for e in read_index(root) if e["version"] != export_version]
    index.append({"version": export_version, "date": info["date"], "export": str(export)})
    write_json(index, root / INDEX)
    info["out"] = str(out)
    info["summary"] = summary
    info["completeness"] = completeness
    return info
