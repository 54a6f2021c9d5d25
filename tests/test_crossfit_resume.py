"""benchmarks/nhanes_crossfit/fits.py: a fold that a cross-fit left unfinished keeps the sex it
fitted and continues the other from its checkpoint (``--reuse-fits``), so an hours-long
cross-fit can span sessions; without ``--reuse-fits`` every fit starts afresh."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from nhanes_crossfit.fits import fit_and_score

from sphr.layout import baselines_dir, train_dir


@pytest.fixture
def stages(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Every stage fit_and_score calls, replaced by one that records its call and writes what
    the next one reads (nothing is fitted)."""
    import sphr.baselines.pipeline
    import sphr.cohorts.build
    import sphr.data.ingest
    import sphr.risk.apply
    import sphr.risk.pipeline
    import sphr.train

    calls: list[tuple] = []

    def ingest(_csv, out, **_kw):
        calls.append(("ingest",))
        Path(out).mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"eid": [1], "outcome": ["death"], "time_years": [5.0], "event": [True]}
                     ).to_parquet(Path(out) / "outcomes.parquet")

    def train(cohort, out, config, *, death=None, resume=False):
        calls.append(("train", Path(cohort).name, resume))
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "model.pt").write_bytes(b"")

    def baselines(cohort, out, methods, **_kw):
        calls.append(("baselines", Path(cohort).name))
        (Path(out) / "deep_patient").mkdir(parents=True, exist_ok=True)

    monkeypatch.setattr(sphr.data.ingest, "run_ingest", ingest)
    monkeypatch.setattr(sphr.cohorts.build, "run_cohorts",
                        lambda *a, **k: calls.append(("cohorts",)))
    monkeypatch.setattr(sphr.train, "run_train", train)
    monkeypatch.setattr(sphr.baselines.pipeline, "run_baselines", baselines)
    monkeypatch.setattr(sphr.risk.pipeline, "run_risk", lambda *a, **k: calls.append(("risk",)))
    monkeypatch.setattr(sphr.risk.apply, "run_score", lambda *a, **k: calls.append(("score",)))
    return calls


def _fold(work: Path, reuse_fits: bool) -> None:
    fit_and_score(work, work / "train.csv", work / "heldout.csv",
                  Path(__file__).parent / "absent_outcomes.json", "demo", 0, ("marker",),
                  reuse_fits=reuse_fits)


def _trained(calls: list[tuple]) -> list[tuple]:
    return [c for c in calls if c[0] == "train"]


def test_reuse_fits_continues_the_sex_left_unfinished(stages, tmp_path, monkeypatch):
    import sphr.data.outcomes

    monkeypatch.setattr(sphr.data.outcomes, "load_outcome_config", lambda _path: None)
    run = tmp_path / "run"
    # a run cut short: women fitted (model and DeepPatient), men not
    train_dir(run, "female").mkdir(parents=True)
    (train_dir(run, "female") / "model.pt").write_bytes(b"")
    (baselines_dir(run, "female") / "deep_patient").mkdir(parents=True)
    _fold(tmp_path, reuse_fits=True)
    assert _trained(stages) == [("train", "male", True)]  # from its checkpoint, if it has one
    assert ("baselines", "male") in stages and ("baselines", "female") not in stages
    assert stages.index(("cohorts",)) < stages.index(("train", "male", True))
    stages.clear()
    _fold(tmp_path, reuse_fits=True)  # both sexes fitted: only the risk stage and the scoring
    assert _trained(stages) == [] and ("ingest",) not in stages
    assert stages == [("risk",), ("score",)]
    stages.clear()
    _fold(tmp_path, reuse_fits=False)  # a fresh run fits both, resuming nothing
    assert _trained(stages) == [("train", "female", False), ("train", "male", False)]
