"""``sphr score``: risk groups for the participants of a new UK Biobank export.

Applies the model ``sphr risk`` saved under ``RUN/risk/model/``
(:meth:`sphr.risk.model.RiskModel.load`, then :meth:`~sphr.risk.model.RiskModel.score`):
nothing is refitted; what is refused, imputed and left unscored, and why, is described in
:mod:`sphr.risk.model`. Writes ``OUT/risk_groups.parquet`` / ``.csv`` (the columns of
``sphr risk``'s, ``partition`` = ``new``, ``label`` from the export's answers where known,
else -1), ``participants.csv`` (eid, sex, imputed_features, imputed), ``unscorable.csv``
(eid, sex, reason), ``absolute_risk.parquet`` (the shipped absolute-risk candidate: eid, sex,
outcome, risk_5y, risk_10y, risk_10y_low, risk_10y_high, risk_age, risk_age_outside,
partition; :mod:`sphr.risk.absolute`), ``absolute_risk_candidates.parquet`` (every candidate,
with ``method`` and ``recalibrated``) and ``score_report.json``, all or none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphr.io import staged_outputs, write_json, write_parquet, write_text
from sphr.risk.absolute import shipped
from sphr.risk.config import RiskConfig
from sphr.risk.model import RiskModel


def run_score(model: str | Path, export: str | Path, out: str | Path, *,
              allow_out_of_range: bool = False, device: str = "auto", impute: bool = True
              ) -> dict[str, Any]:
    """Ingest ``export``, score everyone with the saved risk model in ``model`` (RUN,
    RUN/risk or the model folder), write ``out/``."""
    from sphr.data.ingest import ingest

    fitted = RiskModel.load(model, device=device)
    export = Path(export)
    baseline = ingest(export).baseline.to_pandas()
    rows, participants, unscorable, report, risks = fitted.score(
        baseline, source=export, allow_out_of_range=allow_out_of_range, impute=impute)
    config = fitted.config or RiskConfig()
    with staged_outputs(out) as stage:
        write_parquet(shipped(risks, config.absolute_method, config.absolute_recalibrate),
                      stage / "absolute_risk.parquet")
        write_parquet(risks, stage / "absolute_risk_candidates.parquet")
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_text(participants.to_csv(index=False), stage / "participants.csv")
        write_text(unscorable.to_csv(index=False), stage / "unscorable.csv")
        write_json(report, stage / "score_report.json")
    return report
