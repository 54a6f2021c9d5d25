"""benchmarks/nhanes_crossfit/fits.py: a fold that a cross-fit left unfinished keeps the sex it
fitted and continues the other from its checkpoint (``--reuse-fits``), so an hours-long
cross-fit can span sessions; without ``--reuse-fits`` every fit starts afresh."""

from __future__ import annotations

import re
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
    import sphr.risk.pipeline
    import sphr.risk.serve.apply
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
    monkeypatch.setattr(sphr.risk.serve.apply, "run_score",
                        lambda *a, **k: calls.append(("score",)))
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


def test_reuse_refits_reads_back_a_finished_refit_and_fits_only_the_others(tmp_path, monkeypatch):
    """``--reuse-refits``: a refit whose scores are in --out (written here or carried from
    another machine) is read back as it is; only the other refits are fitted, under their own
    keys; without the flag every refit is fitted."""
    import json
    from argparse import Namespace

    from nhanes_crossfit import fits

    args = Namespace(out=tmp_path, refits=2, reuse=False, reuse_refits=True, folds=2, seed=0,
                     profile="demo", jobs=1, variants=False, cohort={}, reuse_fits=False,
                     train={"anchor": 3, "checkpoint_every": 5}, risk={})
    carried = pd.DataFrame({"eid": [7, 8], "sex": ["female", "male"], "sphr_joint": [0.1, 0.2]})
    carried.to_parquet(tmp_path / "crossfit_scores_marker.parquet")  # refit 0, from elsewhere
    with pytest.raises(SystemExit, match=r"crossfit_scores\.json: missing"):
        fits.refit_score_tables(args, ("marker",))
    # kept with the settings it was fitted under: where and how fast it ran is no part of them
    (tmp_path / "crossfit_scores.json").write_text(json.dumps(fits.refit_settings(
        Namespace(**{**vars(args), "train": {"anchor": 3.0, "device": "cuda"}}), 0)))
    asked: list[tuple] = []

    def crossfit(out, folds, *a, only=None, **kw):
        asked.append(only)
        scored = {}
        for r in only:
            for k in range(folds):
                f = tmp_path / f"risk_groups_{r}_{k}.parquet"
                pd.DataFrame({"eid": [k + 1], "sex": ["female"], "method": ["sphr_joint"],
                              "score": [float(r + k)], "label": [2], "mode": ["calibrated"]}
                             ).to_parquet(f)
                scored[r * folds + k] = {"marker": str(f)}
        return None, scored

    monkeypatch.setattr(fits, "crossfit", crossfit)
    monkeypatch.setattr(fits, "death_outcome", lambda: pd.DataFrame(
        {"time_years": [5.0, 6.0], "event": [1, 0]}, index=pd.Index([1, 2], name="eid")))
    monkeypatch.setattr(fits, "reference_scores", lambda eids: pd.DataFrame(
        {"eid": eids, "age": 50.0, "phenoage_itself": 55.0}))
    runs = fits.refit_score_tables(args, ("marker",))
    assert asked == [(1,)]
    pd.testing.assert_frame_equal(runs[0]["marker"], carried)
    assert runs[1]["marker"]["sphr_joint"].tolist() == [1.0, 2.0]  # refit 1's folds 0 and 1
    assert (tmp_path / "refit1" / "crossfit_scores_marker.parquet").exists()
    fits.refit_score_tables(Namespace(**{**vars(args), "reuse_refits": False}), ("marker",))
    assert asked[-1] == (0, 1)
    runs = fits.refit_score_tables(args, ("marker",))  # both written now: nothing is fitted
    assert asked[-1] == (0, 1) and len(asked) == 2 and len(runs) == 2
    other = Namespace(**{**vars(args), "train": {"anchor": 1}})  # another candidate's scores
    with pytest.raises(SystemExit, match=re.escape("field 'training' is 'anchor=3.0', this "
                                                   "run's is 'anchor=1.0'")):
        fits.refit_score_tables(other, ("marker",))
