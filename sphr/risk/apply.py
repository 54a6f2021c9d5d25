"""``sphr score``: risk groups for the participants of a new UK Biobank export.

Applies the model ``sphr risk`` saved under ``RUN/risk/model/``
(:meth:`sphr.risk.model.RiskModel.load`, then :meth:`~sphr.risk.model.RiskModel.score`):
nothing is refitted unless ``reanchor`` asks; what is refused, imputed and left unscored, and
why, is described in :mod:`sphr.risk.model`. Writes ``OUT/risk_groups.parquet`` / ``.csv``
(the columns of ``sphr risk``'s, ``partition`` = ``new``, ``label`` from the export's answers
where known, else -1), ``participants.csv`` (eid, sex, imputed_features, imputed),
``unscorable.csv`` (eid, sex, reason), ``absolute_risk.parquet`` (the shipped absolute-risk
candidate: eid, sex, outcome, risk_5y, risk_10y, risk_10y_low, risk_10y_high, risk_age,
risk_age_outside, partition; :mod:`sphr.risk.absolute`), ``absolute_risk_candidates.parquet``
(every candidate, with ``method`` and ``recalibrated``), ``drift.csv``
(:mod:`sphr.risk.drift`, against the model's training population), ``report.md`` /
``report.html`` (drift first) and ``score_report.json``, all or none.

**Drift** is measured before anything is scored. ``on_drift="refuse"`` stops (one
:class:`DriftError`, nothing written) when a feature has drifted or is in other units;
``"warn"`` (the default) scores and reports.

**Re-anchoring** (``reanchor=True``, :mod:`sphr.risk.reanchor`): the parts the rule chose are
refitted on the export's own people (never their outcomes) and the re-anchored model is
written to ``OUT/model/`` with its provenance (``reanchor.json``), a model folder later
``sphr score OUT ...`` calls use. ``partition`` is then ``anchor``, ``calibration`` or
``scored only`` (the person's role in the refit), and drift is reported against the model
given (what moved), not the re-anchored one. The absolute-risk models are not refitted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sphr.errors import InputError
from sphr.io import staged_outputs, write_json, write_parquet, write_text
from sphr.risk.absolute import shipped
from sphr.risk.config import ON_DRIFT, REANCHOR_MIN_BFH, RiskConfig
from sphr.risk.drift import drift_line, drift_table, summarize
from sphr.risk.model import RiskModel
from sphr.risk.report.pages import render_page


class DriftError(InputError):
    """The export drifted from the training population and ``--on-drift refuse`` was asked."""


def drift_verdict(table: pd.DataFrame, on_drift: str, export: Path) -> dict[str, Any]:
    """The drift summary; with ``on_drift="refuse"``, a :class:`DriftError` when a feature
    drifted or is in other units."""
    if on_drift not in ON_DRIFT:
        raise InputError(f"--on-drift {on_drift!r}: choose from {', '.join(ON_DRIFT)}")
    verdict = summarize(table)
    bad = verdict["unit_mistakes"] + verdict["drifted"]
    if on_drift == "refuse" and bad:
        raise DriftError(f"{drift_line(table)}; refusing to score (--on-drift refuse): "
                         "re-anchor (--reanchor) or score with --on-drift warn", file=export)
    return {**verdict, "line": drift_line(table)}


def report_page(report: dict[str, Any], table: pd.DataFrame) -> tuple[str, str]:
    """The score report as markdown and HTML: drift first (which features, how far), then
    who was scored."""
    d = report["drift"]
    flagged = table[table["status"].isin(("drift", "units", "moderate"))]
    flagged = flagged.reindex(flagged["smd"].abs().sort_values(ascending=False).index)
    anchored = report.get("reanchored")
    blocks = [("h1", "Risk scores of a new export"),
              ("p", f"Export {report['export']}; model {report['model']}"
                    + (f" (re-anchored from {anchored['from_model']})." if anchored else ".")),
              ("h2", "Drift against the training population"),
              ("p", d["line"] + ". Thresholds: drift at |SMD| >= 0.25 or PSI >= 0.25, moderate "
                    "at 0.1 (docs/notes/TRANSPORT.md)."),
              ("table", flagged.round(3)),
              ("p", ("Re-anchored on this export's own people: " + ", ".join(anchored["reanchored"])
                     + " refitted (" + "; ".join(f"{s}: {c['bfh_anchor']} anchor BFH, "
                                                 f"{c['bfh_calibration']} calibration BFH"
                                                 for s, c in anchored["people"].items())
                     + "). Real population differences are re-anchored away with the assay "
                       "shifts: read the drift above as what was removed.")
               if anchored else "Scored unchanged (no re-anchoring)."),
              ("h2", "Scored"),
              ("table", pd.DataFrame([{"sex": s, **{k: v for k, v in r.items()
                                                     if isinstance(v, int)}}
                                      for s, r in report["sexes"].items()]))]
    return render_page(blocks + _sphr_blocks(report.get("sphr")), "Risk scores")


def _sphr_blocks(record: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """Which SPHR score ships and its measured refit spread (:mod:`sphr.risk.refits`)."""
    from sphr.risk.report.trust import sphr_trust

    shipped = (record or {}).get("shipped_sphr")
    trust = sphr_trust(record, [shipped] if shipped else [])
    if trust is None:
        return []
    blocks: list[tuple[str, Any]] = [("h2", "How far one SPHR fit can be trusted"),
                                     ("p", trust["sentence"])]
    if trust["table"] is not None:
        blocks.append(("table", trust["table"]))
    return blocks


def run_score(model: str | Path, export: str | Path, out: str | Path, *,
              allow_out_of_range: bool = False, device: str = "auto", impute: bool = True,
              on_drift: str = "warn", reanchor: bool = False,
              reanchor_parts: tuple[str, ...] | None = None, seed: int = 0,
              min_bfh: int = REANCHOR_MIN_BFH) -> dict[str, Any]:
    """Ingest ``export``, measure drift, score everyone with the saved risk model in ``model``
    (RUN, RUN/risk or the model folder; re-anchored first with ``reanchor``), write ``out/``."""
    from sphr.data.ingest import ingest

    fitted = RiskModel.load(model, device=device)
    export = Path(export)
    baseline = ingest(export).baseline.to_pandas()
    table = drift_table(baseline, fitted)
    verdict = drift_verdict(table, on_drift, export)
    scorer = fitted
    if reanchor:
        from sphr.risk.reanchor import REANCHOR_PARTS
        from sphr.risk.reanchor import reanchor as refit

        scorer = refit(fitted, baseline, parts=reanchor_parts or REANCHOR_PARTS, seed=seed,
                       source=export, min_bfh=min_bfh)
    rows, participants, unscorable, report, risks = scorer.score(
        baseline, source=export, allow_out_of_range=allow_out_of_range, impute=impute)
    config = fitted.config or RiskConfig()
    report["drift"] = verdict
    report["sphr"] = fitted.sphr_
    if reanchor:
        role = scorer.roles_.set_index("eid")["role"]
        rows["partition"] = role.reindex(rows["eid"]).fillna("scored only").to_numpy()
        report["reanchored"] = scorer.provenance_
    with staged_outputs(out) as stage:
        write_parquet(shipped(risks, config.absolute_method, config.absolute_recalibrate),
                      stage / "absolute_risk.parquet")
        write_parquet(risks, stage / "absolute_risk_candidates.parquet")
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_text(participants.to_csv(index=False), stage / "participants.csv")
        write_text(unscorable.to_csv(index=False), stage / "unscorable.csv")
        write_text(table.to_csv(index=False), stage / "drift.csv")
        if reanchor:
            from sphr.risk.reanchor import save_reanchored

            save_reanchored(scorer, stage / "model")
            report["model"] = str(Path(out) / "model")
        text, page = report_page(report, table)
        write_text(text, stage / "report.md")
        write_text(page, stage / "report.html")
        write_json(report, stage / "score_report.json")
    return report
