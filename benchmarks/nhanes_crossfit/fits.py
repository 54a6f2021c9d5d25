"""The cross-fit: the folds, each fold's fits on the other folds and ``sphr score`` of the
held-out fold, run in worker processes, and every person's out-of-fold score per method."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.io import atomic_path, write_json

from .common import (
    EXPORT,
    OUTCOMES,
    SEXES,
    death_outcome,
    refit_dir,
    refit_seed,
)


def fold_of(export: Path, outcomes: Path, folds: int, seed: int) -> pd.DataFrame:
    """eid, sex, fold: folds drawn within each sex x died stratum, so every fold has deaths."""
    from sphr.data.ingest import ingest
    from sphr.data.outcomes import load_outcome_config

    result = ingest(export, outcome_config=load_outcome_config(outcomes))
    base = result.baseline.to_pandas()[["eid", "sex"]]
    death = result.outcomes.to_pandas()
    death = death.loc[death["outcome"] == "death"].set_index("eid")
    base["died"] = death["event"].reindex(base["eid"]).fillna(0).to_numpy(int)
    rng = np.random.default_rng(seed)
    base["fold"] = -1
    for _, idx in base.groupby(["sex", "died"]).groups.items():
        idx = rng.permutation(np.asarray(idx))
        base.loc[idx, "fold"] = np.arange(idx.size) % folds
    return base


def split_export(export: Path, keep: set[int], out: Path) -> Path:
    """The export's header and the rows whose eid is in ``keep``, byte for byte."""
    with open(export, "rb") as src, open(out, "wb") as dst:
        dst.write(src.readline())
        for line in src:
            if int(line.split(b",", 1)[0].strip(b'"')) in keep:
                dst.write(line)
    return out


def _fitted(run: Path, sex: str) -> bool:
    from sphr.layout import baselines_dir, train_dir

    return ((train_dir(run, sex) / "model.pt").exists()
            and (baselines_dir(run, sex) / "deep_patient").exists())


def prepare_fold(work: Path, train_csv: Path, outcomes: Path, profile: str, seed: int,
                 cohort: dict | None = None, reuse_fits: bool = False) -> None:
    """A fold's ingest and cohorts on ``train_csv`` in ``work/run`` (kept when ``reuse_fits``
    and both sexes are fitted; a run cut short between the sexes rebuilds them alike)."""
    from sphr.cohorts.build import run_cohorts
    from sphr.cohorts.config import CohortConfig
    from sphr.data.ingest import run_ingest
    from sphr.data.outcomes import load_outcome_config

    run = work / "run"
    if reuse_fits and all(_fitted(run, sex) for sex in SEXES):
        return
    run_ingest(train_csv, run / "ingest", outcome_config=load_outcome_config(outcomes))
    run_cohorts(run / "ingest" / "baseline.parquet", run / "cohorts",
                CohortConfig.profile(profile, seed=seed, **(cohort or {})))


def fit_sex(work: Path, sex: str, profile: str, seed: int, train: dict | None = None,
            reuse_fits: bool = False) -> None:
    """One sex's SPHR and DeepPatient fits on the fold's cohorts (:func:`prepare_fold` first).
    SPHR's per-epoch tracking gets the training folds' deaths (never the held-out fold's).
    ``reuse_fits``: a finished fit is kept and an unfinished one continues from its
    checkpoint (the same weights as one uninterrupted run), so an hours-long cross-fit can
    span sessions."""
    from sphr.baselines.pipeline import run_baselines
    from sphr.layout import baselines_dir, cohort_dir, train_dir
    from sphr.train import TrainConfig, run_train

    run = work / "run"
    if reuse_fits and _fitted(run, sex):
        return
    death = pd.read_parquet(run / "ingest" / "outcomes.parquet")
    death = death.loc[death["outcome"] == "death", ["eid", "time_years", "event"]]
    # the CPU unless told (--train device=cuda compile=true: the paper profile's ensembles on
    # a GPU); the refit's seed always
    settings = {"device": "cpu", **(train or {}), "seed": seed}
    run_train(cohort_dir(run, sex), train_dir(run, sex), TrainConfig.profile(profile, **settings),
              death=death, resume=reuse_fits)
    run_baselines(cohort_dir(run, sex), baselines_dir(run, sex), ["deep_patient"], seed=seed,
                  device="cpu")


def score_fold(work: Path, heldout_csv: Path, seed: int, spaces: tuple[str, ...],
               variants: bool = False, absolute_only: bool = False,
               risk: dict | None = None) -> dict[str, str]:
    """The risk stage on the fold's fits, then ``sphr score`` of ``heldout_csv``, per space;
    the scored files by space (``absolute_<space>``: the absolute-risk candidates)."""
    from sphr.risk.config import DEFAULT_METHODS, SPHR_VARIANTS, RiskConfig
    from sphr.risk.pipeline import run_risk
    from sphr.risk.serve.apply import run_score

    methods = (*DEFAULT_METHODS, *SPHR_VARIANTS) if variants else DEFAULT_METHODS
    if absolute_only:
        methods = ("raw_euclidean",)
    scored = {}
    for space in spaces:
        run_risk(work / "run", work / f"risk_{space}",
                 RiskConfig(methods=methods, distance_space=space, seed=seed, device="cpu",
                            **(risk or {})),
                 report=False)  # the folds' tables are read; their reports never are
        run_score(work / f"risk_{space}", heldout_csv, work / f"score_{space}", device="cpu")
        scored[space] = str(work / f"score_{space}" / "risk_groups.parquet")
        scored[f"absolute_{space}"] = str(work / f"score_{space}" /
                                          "absolute_risk_candidates.parquet")
    return scored


def fit_and_score(work: Path, train_csv: Path, heldout_csv: Path, outcomes: Path,
                  profile: str, seed: int, spaces: tuple[str, ...], variants: bool = False,
                  cohort: dict | None = None, reuse_fits: bool = False,
                  absolute_only: bool = False, train: dict | None = None,
                  risk: dict | None = None) -> dict[str, str]:
    """One fold in one process: :func:`prepare_fold`, :func:`fit_sex` for each sex (none when
    ``absolute_only``: only what the absolute-risk candidates read, no SPHR or DeepPatient
    fit), then :func:`score_fold`. ``variants`` adds the SPHR variants of the risk stage;
    ``cohort`` overrides cohort settings (e.g. ``{"triplet_classes": "severity"}``),
    ``train`` training settings (e.g. ``{"selection": "severity"}``) and ``risk`` the risk
    stage's (e.g. ``{"standardization": "calibration_line"}``)."""
    prepare_fold(work, train_csv, outcomes, profile, seed, cohort, reuse_fits)
    for sex in () if absolute_only else SEXES:
        fit_sex(work, sex, profile, seed, train, reuse_fits)
    return score_fold(work, heldout_csv, seed, spaces, variants, absolute_only, risk)


def _in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """A pool task: ``fn(*args)`` on one thread (the pool runs ``jobs`` of them at once)."""
    import torch

    torch.set_num_threads(1)
    return fn(*args)


def _run_phase(pool: ProcessPoolExecutor, tasks: list[tuple]) -> list[Any]:
    """Every task ``(fn, *args)`` of one phase on the pool; their results in task order."""
    return list(pool.map(_in_worker, *zip(*tasks, strict=True))) if tasks else []


def crossfit(out: Path, folds: int, seed: int, profile: str, spaces: tuple[str, ...],
             jobs: int, variants: bool = False, cohort: dict | None = None,
             reuse_fits: bool = False, absolute_only: bool = False, refits: int = 1,
             train: dict | None = None, risk: dict | None = None,
             only: tuple[int, ...] | None = None
             ) -> tuple[pd.DataFrame, dict[int, dict[str, str]]]:
    """Run every fold (``jobs`` at a time, one thread each); (folds table, scored files).
    ``refits`` > 1: each fold fitted again with :func:`refit_seed` (r, fold) keys, r >= 1
    in ``out/refit<r>``; the scored files are then keyed ``r * folds + fold``. ``only``:
    fit these refits and no other (their keys unchanged)."""
    out.mkdir(parents=True, exist_ok=True)
    table = fold_of(EXPORT, OUTCOMES, folds, seed)
    folds_todo = []
    for r in range(refits) if only is None else only:
        for k in range(folds):
            work = refit_dir(out, r) / f"fold{k}"
            work.mkdir(parents=True, exist_ok=True)
            held = set(table.loc[table["fold"] == k, "eid"].astype(int))
            train_csv = split_export(EXPORT, set(table["eid"].astype(int)) - held,
                                     work / "train.csv")
            held_csv = split_export(EXPORT, held, work / "heldout.csv")
            folds_todo.append((r * folds + k, work, train_csv, held_csv, refit_seed(seed, r)))
    os.environ["OMP_NUM_THREADS"] = "1"  # before the workers start their thread pools
    # three phases, so that each sex's fit is a task of its own: with 5 folds on 2 workers a
    # fold per task leaves one worker idle for the last fold's two fits
    prepare = [(prepare_fold, w, t, OUTCOMES, profile, s, cohort, reuse_fits)
               for _, w, t, _, s in folds_todo]
    fit = [(fit_sex, w, sex, profile, s, train, reuse_fits) for _, w, _, _, s in folds_todo
           for sex in (() if absolute_only else SEXES)]
    score = [(score_fold, w, h, s, spaces, variants, absolute_only, risk)
             for _, w, _, h, s in folds_todo]
    # spawn, not fork: the parent holds polars / pyarrow thread pools, which a forked child
    # inherits locked
    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        for phase in (prepare, fit):  # each waits for the one before
            _run_phase(pool, phase)
        results = _run_phase(pool, score)
    return table, dict(zip([key for key, *_ in folds_todo], results, strict=True))


def collect(scored: dict[int, dict[str, str]], space: str) -> pd.DataFrame:
    """eid, sex, method -> the out-of-fold age-standardized score (mode calibrated)."""
    parts = [pd.read_parquet(files[space]) for files in scored.values()]
    rows = pd.concat(parts, ignore_index=True)
    rows = rows.loc[rows["mode"] == "calibrated", ["eid", "sex", "method", "score", "label"]]
    wide = rows.pivot_table(index=["eid", "sex"], columns="method", values="score").reset_index()
    # the person's class from the export's answers (2: bona fide healthy), for the yardstick
    label = rows.drop_duplicates("eid").set_index("eid")["label"]
    return wide.assign(label=label.reindex(wide["eid"]).to_numpy())


def reference_scores(eids: np.ndarray) -> pd.DataFrame:
    """Age alone and PhenoAge itself: no fit, so no fold (read from the export's markers)."""
    from sphr.data.ingest import ingest
    from sphr.risk.phenoage import REQUIRED, phenoage

    base = ingest(EXPORT).baseline.to_pandas().set_index("eid").loc[eids].reset_index()
    return pd.DataFrame({"eid": eids, "age": base["age"].to_numpy(float),
                         "phenoage_itself": phenoage(base[list(REQUIRED)])})


def score_tables(args: argparse.Namespace, spaces: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """Every person's out-of-fold score per method, per space (fitted now, or read back with
    ``--reuse`` from an earlier run's crossfit_scores_<space>.parquet)."""
    return refit_score_tables(args, spaces)[0]


def scores_file(out: Path, refit: int, space: str) -> Path:
    """Where refit ``refit`` keeps everyone's out-of-fold scores in ``space``."""
    return refit_dir(out, refit) / f"crossfit_scores_{space}.parquet"


def settings_file(out: Path, refit: int) -> Path:
    """Where refit ``refit`` keeps the settings its scores were fitted under."""
    return refit_dir(out, refit) / "crossfit_scores.json"


def refit_settings(args: argparse.Namespace, refit: int) -> dict:
    """What refit ``refit``'s scores depend on, kept beside them (``crossfit_scores.json``):
    the development set, the folds, the refit's seed and the candidate; not where or how fast
    the fits ran (``device``, ``checkpoint_every``)."""
    import hashlib

    from .spread_file import candidate_name

    return {"export_sha256": hashlib.sha256(EXPORT.read_bytes()).hexdigest()[:16],
            "profile": args.profile, "folds": args.folds, "seed": args.seed, "refit": refit,
            "refit_seed": refit_seed(args.seed, refit),
            "training": candidate_name(args.train, args.profile),
            "cohort": args.cohort, "risk": getattr(args, "risk", {}),
            "variants": bool(args.variants)}


def carried_refit(args: argparse.Namespace, refit: int, spaces: tuple[str, ...]) -> bool:
    """``--reuse-refits``: whether refit ``refit``'s scores are in ``--out`` to be read back;
    scores kept under other settings than this run's stop it, naming the first that differs."""
    if not all(scores_file(args.out, refit, s).exists() for s in spaces):
        return False
    kept_file = settings_file(args.out, refit)
    if not kept_file.exists():
        raise SystemExit(f"{kept_file}: missing, so the refit's scores beside it cannot be "
                         "told to be this run's; remove them or run without --reuse-refits")
    kept, mine = json.loads(kept_file.read_text()), refit_settings(args, refit)
    for key, value in mine.items():
        if kept.get(key) != value:
            raise SystemExit(f"{kept_file}: field {key!r} is {kept.get(key)!r}, this run's is "
                             f"{value!r}: those scores are another cross-fit's")
    return True


def refit_score_tables(args: argparse.Namespace, spaces: tuple[str, ...]
                       ) -> list[dict[str, pd.DataFrame]]:
    """:func:`score_tables` of every refit (``--refits``, 1 without it), refit 0 first; refit
    r >= 1 writes and reads its crossfit_scores_<space>.parquet in ``out/refit<r>``."""
    refits = getattr(args, "refits", 1)

    def read_back(r: int) -> dict[str, pd.DataFrame]:
        return {s: pd.read_parquet(scores_file(args.out, r, s)) for s in spaces}

    if args.reuse:
        return [read_back(r) for r in range(refits)]
    # --reuse-refits: a refit whose scores an earlier run wrote (on this machine or carried
    # from another) is read back, so a cross-fit longer than one sitting is done refit by refit
    kept = {r for r in range(refits)
            if getattr(args, "reuse_refits", False) and carried_refit(args, r, spaces)}
    todo = tuple(r for r in range(refits) if r not in kept)
    cohort = args.cohort
    _, scored = crossfit(args.out, args.folds, args.seed, args.profile, spaces, args.jobs,
                         args.variants, cohort, args.reuse_fits, refits=refits,
                         train=getattr(args, "train", {}), risk=getattr(args, "risk", {}),
                         only=todo) if todo else (None, {})
    death = death_outcome()
    out = []
    for r in range(refits):
        if r in kept:
            out.append(read_back(r))
            continue
        mine = {k % args.folds: f for k, f in scored.items() if k // args.folds == r}
        tables = {}
        # the settings first: a refit's scores are never there without them
        write_json(refit_settings(args, r), settings_file(args.out, r))
        for space in spaces:
            wide = collect(mine, space)
            wide = wide.merge(reference_scores(wide["eid"].to_numpy()), on="eid")
            wide["time_years"] = death["time_years"].reindex(wide["eid"]).to_numpy(float)
            wide["died"] = death["event"].reindex(wide["eid"]).to_numpy(int)
            # whole or absent: --reuse-refits takes a file that is there as a finished refit
            with atomic_path(scores_file(args.out, r, space)) as tmp:
                wide.to_parquet(tmp)
            tables[space] = wide
        out.append(tables)
    return out
