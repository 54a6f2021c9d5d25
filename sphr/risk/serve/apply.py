"""``sphr score``: risk groups for the participants of a new UK Biobank export.

Applies the model ``sphr risk`` saved under ``RUN/risk/model/``
(:meth:`sphr.risk.model.RiskModel.load`, then :meth:`~sphr.risk.model.RiskModel.score_cohort`):
nothing is refitted unless ``reanchor`` asks; what is refused, imputed and left unscored, and
why, is described in :mod:`sphr.risk.model`. Writes ``OUT/risk_groups.parquet`` / ``.csv``
(the columns of ``sphr risk``'s, ``partition`` = ``new``, ``label`` from the export's answers
where known, else -1), ``participants.csv`` (eid, sex, imputed_features, imputed),
``unscorable.csv`` (eid, sex, reason), ``absolute_risk.parquet`` (the shipped absolute-risk
candidate: eid, sex, outcome, risk_5y, risk_10y, risk_10y_low, risk_10y_high, risk_age,
risk_age_outside, partition; :mod:`sphr.risk.absolute`), ``absolute_risk_candidates.parquet``
(every candidate, with ``method`` and ``recalibrated``), ``drift.csv``
(:mod:`sphr.risk.serve.drift`, against the model's training population), ``report.md`` /
``report.html`` and ``score_report.json``, all or none.

**Are the groups ordered by risk here?** Where the export has linked records (built as the
ingest builds ``outcomes.parquet``, with ``ScoreSettings.outcomes``' outcome table and
censoring dates), the people scored are judged as the risk stage judges its held-out people
(:func:`sphr.risk.validation.beyond.scored_tables`): ``OUT/outcomes.parquet``,
``OUT/beyond_age.parquet`` and ``OUT/group_ordering.parquet`` (columns:
:mod:`sphr.risk.validation.beyond`), and the report opens with the verdict, the group-ordering
table per
sex and the gain over age per score (:mod:`sphr.risk.report.verdict_page`). Without linked
records the report says that the ordering cannot be judged on this export, and why.

**Drift** is measured before anything is scored. ``on_drift="refuse"`` stops (one
:class:`DriftError`, nothing written) when a feature has drifted or is in other units;
``"warn"`` (the default) scores and reports.

**Re-anchoring** (``ScoreSettings.reanchor``, :mod:`sphr.risk.serve.reanchor`, seeded by
``reanchor_seed``, not the bootstrap's seed): the parts the rule chose are
refitted on the export's own people (never their outcomes) and the re-anchored model is
written to ``OUT/model/`` with its provenance (``reanchor.json``), a model folder later
``sphr score OUT ...`` calls use. ``partition`` is then ``anchor``, ``calibration`` or
``scored only`` (the person's role in the refit), and drift is reported against the model
given (what moved), not the re-anchored one. The absolute-risk models are not refitted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sphr.errors import InputError
from sphr.io import staged_outputs, write_json, write_parquet, write_text
from sphr.risk.absolute import shipped
from sphr.risk.config import ON_DRIFT, REANCHOR_MIN_BFH, RiskConfig, ScoreSettings
from sphr.risk.model import RiskModel
from sphr.risk.report.pages import render_page
from sphr.risk.serve.drift import drift_line, drift_table, summarize


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


def higher_risk_bounds(model: RiskModel) -> dict[str, dict[str, dict[str, Any]]]:
    """Per sex and method, how the 99% (Higher Risk) bound was made: its calibration BFH
    ``n``, ``method`` (conformal or the fallback) and the model's ``tail`` fallback."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for sex, part in model.sexes_.items():
        for name, method in part.methods_.items():
            if (bounds := method.calibrated_bounds) is not None:
                out.setdefault(sex, {})[name] = {"n": bounds.lower.n,
                                                 "method": bounds.lower.method,
                                                 "tail": bounds.tail}
    return out


def report_page(report: dict[str, Any], table: pd.DataFrame,
                rows: pd.DataFrame | None = None,
                tables: dict[str, pd.DataFrame] | None = None) -> tuple[str, str]:
    """The score report as markdown and HTML: the verdict first, the main report's structure
    (:mod:`sphr.risk.report.verdict_page`: are the groups ordered by risk on this export's
    linked records, what each score adds to age), then drift (which features, how far) and
    who was scored."""
    from sphr.risk.report.verdict_page import verdict_blocks

    d = report["drift"]
    flagged = table[table["status"].isin(("drift", "units", "moderate"))]
    flagged = flagged.reindex(flagged["smd"].abs().sort_values(ascending=False).index)
    anchored = report.get("reanchored")
    judged = report.get("ordering") or {}
    people = ("the people scored from this export (re-anchored on some of them, never on "
              "their outcomes)" if anchored else "the people scored from this export")
    blocks = [("h1", "Risk scores of a new export"),
              ("p", f"Export {report['export']}; model {report['model']}"
                    + (f" (re-anchored from {anchored['from_model']})." if anchored else ".")),
              *verdict_blocks(tables, rows if rows is not None else pd.DataFrame(),
                              report.get("sphr"), people=people,
                              why_not=judged.get("why", "no linked records were read"),
                              bounds=report.get("higher_risk_bound")),
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


@dataclass(frozen=True)
class _Scorer:
    """The model that scores, and for a re-anchored one what the output adds: each person's
    role as ``partition``, the provenance in the report, the model folder ``OUT/model``."""

    model: RiskModel
    roles: pd.DataFrame | None = None

    @classmethod
    def of(cls, fitted: RiskModel, baseline: pd.DataFrame, settings: ScoreSettings,
           export: Path, min_bfh: int) -> _Scorer:
        """The one place the mode is read: ``fitted`` as it is, or re-anchored."""
        if not settings.reanchor:
            return cls(fitted)
        from sphr.risk.serve.reanchor import reanchor

        model, roles = reanchor(fitted, baseline, parts=settings.reanchor_parts,
                                seed=settings.reanchor_seed, source=export, min_bfh=min_bfh)
        return cls(model, roles)

    def mark(self, rows: pd.DataFrame, report: dict[str, Any]) -> None:
        """``partition``: the person's role in the refit; the report names the refit."""
        if self.roles is None:
            return
        role = self.roles.set_index("eid")["role"]
        rows["partition"] = role.reindex(rows["eid"]).fillna("scored only").to_numpy()
        report["reanchored"] = self.model.provenance_

    def save(self, stage: Path, out: Path, report: dict[str, Any]) -> None:
        """The re-anchored model as ``OUT/model``, which the report then names."""
        if self.roles is None:
            return
        from sphr.risk.serve.reanchor import save_reanchored

        save_reanchored(self.model, stage / "model")
        report["model"] = str(out / "model")


def judge_groups(ingested: Any, rows: pd.DataFrame, config: RiskConfig,
                 seed: int | None = None
                 ) -> tuple[pd.DataFrame | None, dict[str, pd.DataFrame] | None, dict[str, Any]]:
    """(outcomes, ``{"beyond_age", "group_ordering"}``, what score_report.json says) of the
    people scored, against the linked records the ingest built from the export
    (:func:`sphr.risk.validation.beyond.scored_tables`, the risk stage's yardstick; bootstrap
    ``seed``,
    the model's risk seed when None); Nones, and why, where there are none."""
    from sphr.risk.validation.beyond import judged_groups

    if ingested.outcomes is None:
        return None, None, {"judged": False, "why": ingested.report["outcomes"]["why"]}
    outcomes = ingested.outcomes.to_pandas()
    tables, state = judged_groups(rows, outcomes, "the export has no linked records",
                                  n_bootstrap=config.n_bootstrap_linked,
                                  seed=config.seed if seed is None else seed)
    return (outcomes if tables is not None else None), tables, state


def run_score(model: str | Path, export: str | Path, out: str | Path,
              settings: ScoreSettings | None = None, *, impute: bool = True,
              min_bfh: int = REANCHOR_MIN_BFH, **options: Any) -> dict[str, Any]:
    """Ingest ``export``, measure drift, score everyone with the saved risk model in ``model``
    (RUN, RUN/risk or the model folder; re-anchored first when ``settings.reanchor``), write
    ``out/``. ``options``: fields of :class:`~sphr.risk.config.ScoreSettings` over
    ``settings`` (e.g. ``device="cpu", reanchor=True``)."""
    from sphr.data.ingest import ingest
    from sphr.data.outcomes.config import load_outcome_config

    settings = dataclasses.replace(settings or ScoreSettings(), **options).check()
    fitted = RiskModel.load(model, device=settings.device)
    export, out = Path(export), Path(out)
    ingested = ingest(export, outcome_config=load_outcome_config(settings.outcomes))
    baseline = ingested.baseline.to_pandas()
    table = drift_table(baseline, fitted)
    verdict = drift_verdict(table, settings.on_drift, export)
    scorer = _Scorer.of(fitted, baseline, settings, export, min_bfh)
    rows, participants, unscorable, report, risks = scorer.model.score_cohort(
        baseline, source=export, allow_out_of_range=settings.allow_out_of_range, impute=impute)
    config = fitted.config or RiskConfig()
    report["drift"] = verdict
    report["sphr"] = fitted.sphr_
    report["higher_risk_bound"] = higher_risk_bounds(scorer.model)
    scorer.mark(rows, report)
    outcomes, tables, report["ordering"] = judge_groups(ingested, rows, config, settings.seed)
    with staged_outputs(out) as stage:
        write_parquet(shipped(risks, config.absolute_method, config.absolute_recalibrate),
                      stage / "absolute_risk.parquet")
        write_parquet(risks, stage / "absolute_risk_candidates.parquet")
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_text(participants.to_csv(index=False), stage / "participants.csv")
        write_text(unscorable.to_csv(index=False), stage / "unscorable.csv")
        write_text(table.to_csv(index=False), stage / "drift.csv")
        scorer.save(stage, out, report)
        if tables is not None:
            write_parquet(outcomes, stage / "outcomes.parquet")
            for name, frame in tables.items():
                write_parquet(frame, stage / f"{name}.parquet")
        text, page = report_page(report, table, rows, tables)
        write_text(text, stage / "report.md")
        write_text(page, stage / "report.html")
        write_json(report, stage / "score_report.json")
    return report
