"""Real people: every development participant scored by a model fitted without them (docs/REAL.md).

The development set (``sphr/data/real/nhanes_ukb_dev.csv``: 4,806 NHANES adults aged
40-73 as a UK Biobank export, 496 deaths) is split into K folds, seeded and stratified by
sex and death. For each fold, the pipeline's stages are fitted on the other K - 1 folds
(ingest with the release's censoring dates, cohorts, SPHR, DeepPatient, the risk stage in
each distance space asked for) and ``sphr score`` scores the held-out fold with the saved
model, nothing refitted: the same path a locked test set takes. Every person is then
scored out of sample, so the C-index rests on all deaths, not the ~75 of one test
partition.

Scores compared (larger = worse), per sex, Harrell's C for all-cause death over the whole
follow-up with a participant-bootstrap 95% interval (the same resamples for every score):
each method's age-standardized score (``score`` of ``risk_groups``, mode calibrated),
PhenoAge itself and age alone (no fit), and the supervised comparator (it sees the
outcome). It also runs the main command once on the whole development set at the same
profile (the model a locked half would be scored with; ``--no-main`` skips it) and records
its time.

    python benchmarks/real_nhanes.py [--out runs/real_nhanes] [--folds 5] [--seed 0]
        [--profile demo] [--spaces marker,quantile] [--bootstrap 1000] [--jobs 2] [--no-main]
        [--variants] [--cohort KEY=VALUE] [--train KEY=VALUE] [--reuse | --reuse-fits]
        [--docs docs/REAL.md]
        [--absolute] [--refits K]

``--refits K``: every fold fitted K times, refit r with the seed ``refit_seed(seed, r)`` for
every random step of the fold's fits (the folds stay those of ``--seed``; refit 0 is the run
without the flag, in ``--out``, refit r >= 1 in ``--out/refit<r>``). The JSON's ``refits``
holds, per space, sex and score of the death table, the pooled cross-fitted C of each refit
(``c_index``), their mean, SD, min and max (``spread``), and each fold's C per refit
(``per_fold``); real_nhanes.md gets the refit table.

``--absolute``: the absolute-risk candidates of docs/METHODS.md ("Absolute risk and the
risk-equivalent age") instead: each fold fits ingest, cohorts and the risk stage (the raw
Euclidean distance and the candidates; no SPHR), ``sphr score`` writes the held-out fold's
absolute_risk_candidates.parquet; C, calibration slope, O/E and Brier at 10 years per sex with
bootstrap intervals, and the pre-registered rule's choice (absolute.json, absolute.md, and the
docs' ``--absolute`` generated block).

Last line: one JSON object with ``n``, ``deaths``, ``c_index`` (sex -> score -> [C, low,
high]), ``n_scored`` (sex -> score -> people), ``seconds`` and the settings.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "sphr" / "data" / "real"
EXPORT = DATA / "nhanes_ukb_dev.csv"
OUTCOMES = DATA / "nhanes_ukb_outcomes.json"
SEXES = ("female", "male")


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


def fit_and_score(work: Path, train_csv: Path, heldout_csv: Path, outcomes: Path,
                  profile: str, seed: int, spaces: tuple[str, ...], variants: bool = False,
                  cohort: dict | None = None, reuse_fits: bool = False,
                  absolute_only: bool = False, train: dict | None = None) -> dict[str, str]:
    """One fold: the stages on ``train_csv``, then ``sphr score`` of ``heldout_csv`` per space.
    ``variants`` adds the SPHR variants of the risk stage; ``cohort`` overrides cohort
    settings (e.g. ``{"triplet_classes": "severity"}``); ``absolute_only``: only what the
    absolute-risk candidates read (ingest, cohorts, the raw Euclidean distance; no SPHR or
    DeepPatient fit); ``train`` overrides training settings (e.g. ``{"selection": "severity"}``).
    SPHR's per-epoch tracking gets the training folds' deaths (never the held-out fold's)."""
    from sphr.baselines.pipeline import run_baselines
    from sphr.cohorts.build import run_cohorts
    from sphr.cohorts.config import CohortConfig
    from sphr.data.ingest import run_ingest
    from sphr.data.outcomes import load_outcome_config
    from sphr.layout import baselines_dir, cohort_dir, train_dir
    from sphr.risk.apply import run_score
    from sphr.risk.config import RiskConfig
    from sphr.risk.pipeline import run_risk
    from sphr.train import TrainConfig, run_train

    run = work / "run"
    fitted = all((train_dir(run, sex) / "model.pt").exists()
                 and (baselines_dir(run, sex) / "deep_patient").exists() for sex in SEXES)
    if not (reuse_fits and fitted):  # --reuse-fits: the risk stage again on the same models
        run_ingest(train_csv, run / "ingest", outcome_config=load_outcome_config(outcomes))
        run_cohorts(run / "ingest" / "baseline.parquet", run / "cohorts",
                    CohortConfig.profile(profile, seed=seed, **(cohort or {})))
        death = pd.read_parquet(run / "ingest" / "outcomes.parquet")
        death = death.loc[death["outcome"] == "death", ["eid", "time_years", "event"]]
        for sex in () if absolute_only else SEXES:
            # the CPU unless told (--train device=cuda compile=true: the paper profile's
            # ensembles on a GPU); the refit's seed always
            settings = {"device": "cpu", **(train or {}), "seed": seed}
            run_train(cohort_dir(run, sex), train_dir(run, sex),
                      TrainConfig.profile(profile, **settings), death=death)
            run_baselines(cohort_dir(run, sex), baselines_dir(run, sex), ["deep_patient"],
                          seed=seed, device="cpu")
    from sphr.risk.config import DEFAULT_METHODS, SPHR_VARIANTS

    methods = (*DEFAULT_METHODS, *SPHR_VARIANTS) if variants else DEFAULT_METHODS
    if absolute_only:
        methods = ("raw_euclidean",)
    scored = {}
    for space in spaces:
        run_risk(run, work / f"risk_{space}", RiskConfig(methods=methods, distance_space=space,
                                                         seed=seed, device="cpu"))
        run_score(work / f"risk_{space}", heldout_csv, work / f"score_{space}", device="cpu")
        scored[space] = str(work / f"score_{space}" / "risk_groups.parquet")
        scored[f"absolute_{space}"] = str(work / f"score_{space}" /
                                          "absolute_risk_candidates.parquet")
    return scored


def train_overrides(items: list[str]) -> dict:
    """``--train KEY=VALUE`` items as training settings: a value that reads as JSON (a
    number, true, null) is that, anything else a string."""
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _fold_worker(args: tuple) -> dict[str, str]:
    import torch

    torch.set_num_threads(1)
    return fit_and_score(*args)


def refit_seed(seed: int, refit: int) -> int:
    """The seed of every random step of refit ``refit``'s fits (cohort split, augmentation,
    triplets, SPHR's initialization and epochs, DeepPatient, the risk stage); the folds stay
    those of ``seed``. Refit 0 is ``seed`` itself (the run without ``--refits``); refit r >= 1
    the first 31-bit word of ``numpy.random.SeedSequence([seed, r])``: the derivation an
    ensemble's members take their seeds by (:func:`sphr.train.trainer.member_seed`)."""
    from sphr.train.trainer import member_seed

    if refit < 0:
        raise ValueError(f"refit must be >= 0, got {refit}")
    return member_seed(seed, refit)


def refit_dir(out: Path, refit: int) -> Path:
    """Where refit ``refit`` works: ``out`` itself for refit 0, ``out/refit<r>`` after it."""
    return out if refit == 0 else out / f"refit{refit}"


def crossfit(out: Path, folds: int, seed: int, profile: str, spaces: tuple[str, ...],
             jobs: int, variants: bool = False, cohort: dict | None = None,
             reuse_fits: bool = False, absolute_only: bool = False, refits: int = 1,
             train: dict | None = None) -> tuple[pd.DataFrame, dict[int, dict[str, str]]]:
    """Run every fold (``jobs`` at a time, one thread each); (folds table, scored files).
    ``refits`` > 1: each fold fitted again with :func:`refit_seed` (r, fold) keys, r >= 1
    in ``out/refit<r>``; the scored files are then keyed ``r * folds + fold``."""
    out.mkdir(parents=True, exist_ok=True)
    table = fold_of(EXPORT, OUTCOMES, folds, seed)
    tasks = []
    for r in range(refits):
        for k in range(folds):
            work = refit_dir(out, r) / f"fold{k}"
            work.mkdir(parents=True, exist_ok=True)
            held = set(table.loc[table["fold"] == k, "eid"].astype(int))
            train_csv = split_export(EXPORT, set(table["eid"].astype(int)) - held,
                                     work / "train.csv")
            held_csv = split_export(EXPORT, held, work / "heldout.csv")
            tasks.append((work, train_csv, held_csv, OUTCOMES, profile, refit_seed(seed, r),
                          spaces, variants, cohort, reuse_fits, absolute_only, train))
    os.environ["OMP_NUM_THREADS"] = "1"  # before the workers start their thread pools
    # spawn, not fork: the parent holds polars / pyarrow thread pools, which a forked child
    # inherits locked
    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_fold_worker, tasks))
    return table, dict(enumerate(results))


def collect(scored: dict[int, dict[str, str]], space: str) -> pd.DataFrame:
    """eid, sex, method -> the out-of-fold age-standardized score (mode calibrated)."""
    parts = [pd.read_parquet(files[space]) for files in scored.values()]
    rows = pd.concat(parts, ignore_index=True)
    rows = rows.loc[rows["mode"] == "calibrated", ["eid", "sex", "method", "score"]]
    return rows.pivot_table(index=["eid", "sex"], columns="method", values="score").reset_index()


def reference_scores(eids: np.ndarray) -> pd.DataFrame:
    """Age alone and PhenoAge itself: no fit, so no fold (read from the export's markers)."""
    from sphr.data.ingest import ingest
    from sphr.risk.phenoage import REQUIRED, phenoage

    base = ingest(EXPORT).baseline.to_pandas().set_index("eid").loc[eids].reset_index()
    return pd.DataFrame({"eid": eids, "age": base["age"].to_numpy(float),
                         "phenoage_itself": phenoage(base[list(REQUIRED)])})


def c_indices(frame: pd.DataFrame, scores: list[str], n_bootstrap: int, seed: int
              ) -> tuple[dict, dict, dict]:
    """Per sex and score: [C, low, high], n scored, and the bootstrap draws (for paired
    differences); one stream of resamples per sex, shared by every score."""
    from sphr.survival import c_index_weighted, resample_counts

    out, n_scored, draws = {}, {}, {}
    for k, sex in enumerate(SEXES):
        sub = frame.loc[frame["sex"] == sex]
        t, e = sub["time_years"].to_numpy(float), sub["died"].to_numpy(bool)
        counts = resample_counts(np.random.default_rng([seed, k]), len(sub), n_bootstrap)
        w = np.vstack([np.ones(len(sub)), counts])
        out[sex], n_scored[sex], draws[sex] = {}, {}, {}
        for name in scores:
            s = sub[name].to_numpy(float)
            ok = np.isfinite(s)
            if ok.sum() < 10:
                continue
            c = c_index_weighted(t[ok], e[ok], s[ok], w[:, ok])
            lo, hi = np.nanpercentile(c[1:], (2.5, 97.5))
            out[sex][name] = [round(float(c[0]), 4), round(float(lo), 4), round(float(hi), 4)]
            n_scored[sex][name] = int(ok.sum())
            draws[sex][name] = c
    return out, n_scored, draws


def run_main(out: Path, profile: str) -> dict:
    """The main command on the whole development set, at the folds' profile: the model a
    locked half is scored with. Its wall seconds, and the death C-index of its own held-out
    test partition (a few hundred people: the cross-fitted figures are the ones to read)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sphr_dagster", "run", "--export", str(EXPORT),
                    "--outcomes", str(OUTCOMES), "--run-dir", str(out / "main"),
                    "--profile", profile], check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    d = pd.read_parquet(out / "main" / "risk" / "linked_discrimination.parquet")
    d = d[d["outcome"] == "death"]
    return {"main_command_s": round(seconds, 1), "main_run": str(out / "main"),
            "main_test_c_index": {s: {r.method: round(float(r.c_index), 4)
                                      for r in d[d["sex"] == s].itertuples()} for s in SEXES}}


def paired(draws_a: dict, draws_b: dict, a: str, b: str) -> list[float] | None:
    """Average over the sexes of C(a) - C(b), with the 95% interval of the same difference
    over the shared bootstrap resamples (both scored on the same people)."""
    if not all(a in draws_a[s] and b in draws_b[s] for s in SEXES):
        return None
    diff = np.mean([draws_a[s][a] - draws_b[s][b] for s in SEXES], axis=0)
    lo, hi = np.nanpercentile(diff[1:], (2.5, 97.5))
    return [round(float(diff[0]), 4), round(float(lo), 4), round(float(hi), 4)]


def comparisons(draws: dict[str, dict]) -> dict:
    """The pre-registered comparisons (docs/METHODS.md): the marker space against the quantile
    space for the four marker-space methods (and their average), and every SPHR variant
    against today's SPHR."""
    from sphr.risk.config import MARKER_SPACE_METHODS

    out: dict = {}
    if {"marker", "quantile"} <= set(draws):
        m, q = draws["marker"], draws["quantile"]
        out["marker_minus_quantile"] = {x: paired(m, q, x, x) for x in MARKER_SPACE_METHODS}
        avg = {s: {"avg": np.mean([m[s][x] for x in MARKER_SPACE_METHODS], axis=0)} for s in SEXES}
        avg_q = {s: {"avg": np.mean([q[s][x] for x in MARKER_SPACE_METHODS], axis=0)}
                 for s in SEXES}
        out["marker_minus_quantile"]["average of the four"] = paired(avg, avg_q, "avg", "avg")
    first = next(iter(draws.values()))
    variants = sorted({x for s in SEXES for x in first[s]
                       if x.startswith("sphr_") and x != "sphr"})
    if variants:
        out["minus_sphr"] = {v: paired(first, first, v, "sphr") for v in variants}
    return out


#: table order and labels of the scores (the distances, then the references)
LABELS: dict[str, str] = {
    "raw_euclidean": "Euclidean (raw)", "mahalanobis": "Mahalanobis (age-group BFH)",
    "homeostatic_dysregulation": "Homeostatic dysregulation", "p0_euclidean": "P0 (Euclidean)",
    "deep_patient": "DeepPatient", "sphr": "SPHR", "sphr_age_line": "SPHR, age-line reference",
    "sphr_young": "SPHR, young reference", "sphr_joint": "SPHR + markers",
    "phenoage": "PhenoAge acceleration", "phenoage_itself": "PhenoAge itself (contains age)",
    "age": "Age alone", "supervised_death": "Supervised XGBoost, death (uses the outcome)"}
GENERATED = ("<!-- generated by benchmarks/real_nhanes.py: begin -->",
             "<!-- generated by benchmarks/real_nhanes.py: end -->")


def markdown(result: dict) -> str:
    """The C-index table of every space and the pre-registered comparisons, as markdown."""
    lines = []
    spaces = list(result["c_index"])
    for space in spaces:
        c, n = result["c_index"][space], result["n_scored"][space]
        lines += [f"Distance space `{space}`" + (" (the default)" if space == "marker" else "")
                  + ": Harrell's C for death [95% CI] (people scored)", "",
                  "| score | women | men |", "| --- | --- | --- |"]
        for key, label in LABELS.items():
            cells = [f"{c[s][key][0]:.3f} [{c[s][key][1]:.3f}, {c[s][key][2]:.3f}] "
                     f"({n[s][key]:,})" if key in c[s] else "-" for s in SEXES]
            if cells != ["-", "-"]:
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    paired = result.get("paired", {})
    for name, title in (("marker_minus_quantile", "Marker space minus quantile space"),
                        ("minus_sphr", "SPHR variant minus today's SPHR")):
        if paired.get(name):
            lines += [f"{title}, C-index averaged over the two sexes [95% CI of the paired "
                      "bootstrap difference]:", "", "| score | difference |", "| --- | --- |"]
            lines += [f"| {LABELS.get(k, k)} | {v[0]:+.4f} [{v[1]:+.4f}, {v[2]:+.4f}] |"
                      for k, v in paired[name].items() if v]
            lines.append("")
    return "\n".join(lines)


def write_docs(path: Path, text: str) -> None:
    """Replace the generated part of ``path`` (between the :data:`GENERATED` markers)."""
    doc = path.read_text()
    begin, end = doc.index(GENERATED[0]), doc.index(GENERATED[1])
    path.write_text(doc[:begin + len(GENERATED[0])] + "\n" + text + "\n" + doc[end:])


def against(args: argparse.Namespace, tables: dict[str, pd.DataFrame], draws: dict) -> dict:
    """This run's SPHR scores minus the same scores of the run in ``args.against`` (the same
    people and resamples: the folds and bootstrap are seeded alike)."""
    space = next(iter(tables))
    other = pd.read_parquet(args.against / f"crossfit_scores_{space}.parquet")
    if not np.array_equal(other["eid"].to_numpy(), tables[space]["eid"].to_numpy()):
        raise SystemExit(f"{args.against}: other people than this run's")
    names = [c for c in other.columns if c == "sphr" or c.startswith("sphr_")]
    _, _, theirs = c_indices(other, names, args.bootstrap, args.seed)
    return {f"{n} (this run - {args.against.name})": paired(draws[space], theirs, n, n)
            for n in names}


def death_outcome() -> pd.DataFrame:
    from sphr.data.ingest import ingest
    from sphr.data.outcomes import load_outcome_config

    death = ingest(EXPORT, outcome_config=load_outcome_config(OUTCOMES)).outcomes.to_pandas()
    return death.loc[death["outcome"] == "death"].set_index("eid")


def score_tables(args: argparse.Namespace, spaces: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """Every person's out-of-fold score per method, per space (fitted now, or read back with
    ``--reuse`` from an earlier run's crossfit_scores_<space>.parquet)."""
    return refit_score_tables(args, spaces)[0]


def refit_score_tables(args: argparse.Namespace, spaces: tuple[str, ...]
                       ) -> list[dict[str, pd.DataFrame]]:
    """:func:`score_tables` of every refit (``--refits``, 1 without it), refit 0 first; refit
    r >= 1 writes and reads its crossfit_scores_<space>.parquet in ``out/refit<r>``."""
    refits = getattr(args, "refits", 1)
    if args.reuse:
        return [{s: pd.read_parquet(refit_dir(args.out, r) / f"crossfit_scores_{s}.parquet")
                 for s in spaces} for r in range(refits)]
    cohort = dict(item.split("=", 1) for item in args.cohort)
    _, scored = crossfit(args.out, args.folds, args.seed, args.profile, spaces, args.jobs,
                         args.variants, cohort, args.reuse_fits, refits=refits,
                         train=train_overrides(getattr(args, "train", [])))
    death = death_outcome()
    out = []
    for r in range(refits):
        mine = {k % args.folds: f for k, f in scored.items() if k // args.folds == r}
        tables = {}
        for space in spaces:
            wide = collect(mine, space)
            wide = wide.merge(reference_scores(wide["eid"].to_numpy()), on="eid")
            wide["time_years"] = death["time_years"].reindex(wide["eid"]).to_numpy(float)
            wide["died"] = death["event"].reindex(wide["eid"]).to_numpy(int)
            wide.to_parquet(refit_dir(args.out, r) / f"crossfit_scores_{space}.parquet")
            tables[space] = wide
        out.append(tables)
    return out


def spread(values: list[float]) -> dict[str, float]:
    """Mean, SD (ddof 1; NaN for one value), min and max of one score's C over refits."""
    v = np.asarray(values, float)
    sd = float(np.std(v, ddof=1)) if v.size > 1 else float("nan")
    return {"mean": round(float(v.mean()), 4), "sd": round(sd, 4),
            "min": round(float(v.min()), 4), "max": round(float(v.max()), 4)}


def plain_c(frame: pd.DataFrame, name: str) -> float:
    """Harrell's C of one score on the rows where it is finite (no resample)."""
    from sphr.survival import c_index_weighted

    s = frame[name].to_numpy(float)
    ok = np.isfinite(s)
    t, e = frame["time_years"].to_numpy(float)[ok], frame["died"].to_numpy(bool)[ok]
    return float(c_index_weighted(t, e, s[ok], np.ones((1, int(ok.sum()))))[0])


def refit_spread(runs: list[dict[str, pd.DataFrame]], c_index: dict, folds: pd.DataFrame,
                 seed: int) -> dict:
    """Per space, sex and score of the death table (``c_index``): the pooled cross-fitted C of
    every refit and their spread; per fold, the C of every refit and the fold's SD over refits
    (``fold_sd``), summarized as their mean (``mean_fold_sd``)."""
    out: dict = {"k": len(runs), "seeds": [refit_seed(seed, r) for r in range(len(runs))],
                 "c_index": {}, "spread": {}, "per_fold": {}}
    fold = folds.set_index("eid")["fold"]
    for space, by_sex in c_index.items():
        out["c_index"][space], out["spread"][space], out["per_fold"][space] = {}, {}, {}
        for sex, scores in by_sex.items():
            subs = [run[space].loc[run[space]["sex"] == sex] for run in runs]
            cs, sp, pf = {}, {}, {}
            for name in scores:
                cs[name] = [round(plain_c(sub, name), 4) for sub in subs]
                sp[name] = spread(cs[name])
                per = [[round(plain_c(sub.loc[fold.reindex(sub["eid"]).to_numpy() == k], name), 4)
                        for sub in subs] for k in sorted(fold.unique())]
                sds = [spread(p)["sd"] for p in per]
                pf[name] = {"c": per, "fold_sd": sds,
                            "mean_fold_sd": round(float(np.mean(sds)), 4)}
            out["c_index"][space][sex], out["spread"][space][sex] = cs, sp
            out["per_fold"][space][sex] = pf
    return out


def training_tracks(out: Path, folds: int, refits: int) -> pd.DataFrame:
    """Every fold fit's SPHR per-epoch tracking (``loss_curve.parquet``; docs/METHODS.md,
    "SPHR's stability from fit to fit"): refit, fold, sex, epoch, the kept epoch and the
    tracked columns. Empty when no fit tracked (an older run)."""
    import json as _json

    from sphr.layout import train_dir

    parts = []
    for r in range(refits):
        for k in range(folds):
            for sex in SEXES:
                where = train_dir(refit_dir(out, r) / f"fold{k}" / "run", sex)
                if not (where / "loss_curve.parquet").exists():
                    continue
                curve = pd.read_parquet(where / "loss_curve.parquet")
                report = _json.loads((where / "train_report.json").read_text())
                kept = (report.get("model_selection") or {}).get("best_epoch")
                parts.append(curve.assign(refit=r, fold=k, sex=sex, kept_epoch=kept))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def heldout_fold_c(refits: dict, space: str, score: str) -> dict[tuple[int, int, str], float]:
    """(refit, fold, sex) -> the held-out fold's C of ``score`` (from :func:`refit_spread`)."""
    out = {}
    for sex in SEXES:
        per = refits["per_fold"][space].get(sex, {}).get(score)
        for k, row in enumerate(per["c"] if per else []):
            for r, c in enumerate(row):
                out[(r, k, sex)] = c
    return out


def tracking_summary(tracks: pd.DataFrame, heldout: dict) -> dict:
    """Per sex: the tracked figures at epoch 1, at the kept epoch and at the last epoch,
    averaged over fold fits, split by whether the held-out fold's SPHR C fell below 0.5
    (``inverted``) or not; and over all fits the Spearman correlation, across fits, of each
    figure at the kept epoch with the held-out C."""
    from sphr.train.tracking import TRACK_COLUMNS, spearman

    cols = [c for c in ("val_loss", "val_knn_f1", *TRACK_COLUMNS) if c in tracks.columns]
    rows = []
    for (r, k, sex), fit in tracks.groupby(["refit", "fold", "sex"]):
        fit = fit.sort_values("epoch")
        kept = fit.loc[fit["epoch"] == fit["kept_epoch"]]
        at = {"first": fit.iloc[0], "kept": kept.iloc[0] if len(kept) else fit.iloc[-1],
              "last": fit.iloc[-1]}
        row = {"refit": r, "fold": k, "sex": sex, "kept_epoch": int(at["kept"]["epoch"]),
               "epochs": int(fit["epoch"].max()), "heldout_c": heldout.get((r, k, sex))}
        row.update({f"{c}@{w}": float(at[w][c]) for w in at for c in cols})
        rows.append(row)
    fits = pd.DataFrame(rows)
    out: dict = {"fits": fits.to_dict(orient="records"), "by_sex": {}}
    for sex, sub in fits.groupby("sex"):
        inv = sub["heldout_c"].astype(float) < 0.5
        summary = {"n_fits": len(sub), "n_inverted": int(inv.sum()),
                   "kept_epoch_mean": round(float(sub["kept_epoch"].mean()), 1)}
        for group, mask in (("inverted", inv), ("not_inverted", ~inv)):
            summary[group] = {k: round(float(sub.loc[mask, k].mean()), 4)
                              for k in sub.columns if "@" in k and mask.any()}
        summary["rho_with_heldout_c"] = {
            k: round(spearman(sub[k].to_numpy(float), sub["heldout_c"].to_numpy(float)), 3)
            for k in sub.columns if k.endswith("@kept")}
        out["by_sex"][sex] = summary
    return out


def tracking_markdown(summary: dict) -> str:
    """The tracking table: per sex and tracked figure, the mean at epoch 1, the kept epoch and
    the last epoch, for fits whose held-out SPHR C fell below 0.5 and the others."""
    lines = ["SPHR during training (training rows only; mean over fold fits): epoch 1 / kept "
             "epoch / last epoch; `rho` = Spearman across fits of the figure at the kept epoch "
             "with the held-out fold's SPHR C", "",
             "| sex | fits (inverted) | figure | inverted fits | other fits | rho |",
             "| --- | --- | --- | --- | --- | --- |"]
    for sex, sm in summary["by_sex"].items():
        names = sorted({k.split("@")[0] for k in sm["rho_with_heldout_c"]})
        for name in names:
            cells = []
            for group in ("inverted", "not_inverted"):
                g = sm.get(group) or {}
                cells.append(" / ".join(f"{g[f'{name}@{w}']:.3f}" if f"{name}@{w}" in g
                                        else "-" for w in ("first", "kept", "last")))
            lines.append(f"| {sex} | {sm['n_fits']} ({sm['n_inverted']}) | {name} | "
                         f"{cells[0]} | {cells[1]} | {sm['rho_with_heldout_c'][f'{name}@kept']} |")
    return "\n".join(lines) + "\n"


#: where the measured refit spread is kept for the report (package data of sphr.risk)
SPREAD_FILE = REPO / "sphr" / "risk" / "refit_spread.json"


def candidate_name(train: dict, profile: str) -> str:
    """The training settings a refit run changed from ``profile``, as the key of its spread
    (``default``: the profile as it is), written as the report looks it up: an override that
    restates the profile's value (``ensemble=1``) changes nothing, so it is no part of the key;
    values as the saved config holds them (``anchor=1`` is ``anchor=1.0``). Where and how fast
    the fits ran (``device=cuda``, ``compile=true``) is no part of it."""
    from sphr.risk.refits import RUNTIME_SETTINGS, candidate_key
    from sphr.train.config import TrainConfig

    base = TrainConfig.profile(profile).to_dict()
    given = TrainConfig.profile(profile, **train).to_dict()
    return candidate_key({k: given[k] for k in train
                          if k not in RUNTIME_SETTINGS and base.get(k, object()) != given[k]})


def measuring_command(args: argparse.Namespace) -> str:
    """The command that measures what ``args`` asked for, without where it wrote (a machine's
    path) or whether it re-read an earlier run's scores."""
    parts = ["python benchmarks/real_nhanes.py", f"--profile {args.profile}",
             f"--refits {args.refits}", f"--folds {args.folds}", f"--seed {args.seed}",
             f"--spaces {args.spaces}", f"--bootstrap {args.bootstrap}", "--no-main",
             *(f"--train {t}" for t in args.train), "--record-spread"]
    return " ".join(parts)


def record_spread(path: Path, args: argparse.Namespace, result: dict) -> dict:
    """Keep this run's refit spread of the default space's scores in ``path`` under its
    profile and candidate (other entries kept), with the date, commit, command, n and
    deaths; the report shows it beside SPHR's rows (sphr.risk.refits)."""
    import datetime

    from sphr.io import write_json

    space = args.spaces.split(",")[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip() or None
    held = json.loads(path.read_text()) if path.exists() else {}
    entry = {"date": datetime.date.today().isoformat(), "commit": commit,
             "command": measuring_command(args),
             # --reuse: the scores of an earlier run at an earlier commit, re-read here
             "scores_reread": bool(args.reuse),
             "k": result["refits"]["k"], "folds": args.folds, "space": space,
             "n": result["n"], "deaths": result["deaths"],
             "spread": result["refits"]["spread"][space],
             "interval": result["refits"].get("interval", {}).get(space),
             "rule": result.get("rule")}
    name = candidate_name(train_overrides(args.train), args.profile)
    held.setdefault(args.profile, {})[name] = entry
    write_json(held, path)
    return entry


#: the scores the stability rule judges (docs/METHODS.md, "SPHR's stability from fit to fit")
RULE_SCORES: tuple[str, ...] = ("sphr", "sphr_joint")


def refit_intervals(runs: list[dict[str, pd.DataFrame]], space: str, n_bootstrap: int,
                    seed: int) -> dict:
    """sex -> score -> the mean over refits of each refit's bootstrap 95% interval of its
    pooled C (the same resamples in every refit)."""
    per = [c_indices(run[space], [c for c in run[space].columns if c in LABELS],
                     n_bootstrap, seed)[0] for run in runs]
    out: dict = {}
    for sex in SEXES:
        names = set.intersection(*(set(p.get(sex, {})) for p in per))
        out[sex] = {n: [round(float(np.mean([p[sex][n][i] for p in per])), 4) for i in (1, 2)]
                    for n in sorted(names)}
    return out


def stability_rule(spread: dict, intervals: dict) -> dict:
    """The pre-registered pass/fail per sex and judged score: the mean bootstrap interval of
    the pooled C above 0.5 and the refit SD at most the raw Euclidean distance's."""
    out: dict = {}
    for sex in SEXES:
        raw_sd = spread[sex]["raw_euclidean"]["sd"]
        out[sex] = {}
        for name in RULE_SCORES:
            if name not in spread[sex] or name not in intervals.get(sex, {}):
                continue
            low = intervals[sex][name][0]
            sd = spread[sex][name]["sd"]
            out[sex][name] = {"mean_c": spread[sex][name]["mean"],
                              "interval": intervals[sex][name], "sd": sd, "raw_sd": raw_sd,
                              "above_half": low > 0.5,
                              "sd_at_most_raw": sd <= raw_sd, "passes": low > 0.5 and sd <= raw_sd}
    return out


def rule_markdown(rule: dict) -> str:
    lines = ["Stability rule (docs/METHODS.md): mean C over refits [mean bootstrap 95% interval], "
             "refit SD against the raw distance's; passes = interval above 0.5 and SD at most "
             "the raw distance's", "",
             "| sex | score | mean C [interval] | SD (raw's) | passes |",
             "| --- | --- | --- | --- | --- |"]
    for sex, by in rule.items():
        for name, r in by.items():
            lines.append(f"| {sex} | {LABELS.get(name, name)} | {r['mean_c']:.3f} "
                         f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] | {r['sd']:.3f} "
                         f"({r['raw_sd']:.3f}) | {'yes' if r['passes'] else 'no'} |")
    return "\n".join(lines) + "\n"


def refit_markdown(refits: dict) -> str:
    """The refit table: per score and sex, mean, SD and min-max of the pooled C over refits,
    and the mean over folds of each fold's SD over refits."""
    lines = []
    for space, by_sex in refits["spread"].items():
        lines += [f"Distance space `{space}`, {refits['k']} refits (seeds {refits['seeds']}): "
                  "pooled cross-fitted C for death, mean, SD [min-max] over refits; fold SD = "
                  "the mean over folds of one fold's SD over refits", "",
                  "| score | women | women fold SD | men | men fold SD |",
                  "| --- | --- | --- | --- | --- |"]
        for key, label in LABELS.items():
            if not all(key in by_sex.get(s, {}) for s in SEXES):
                continue
            cells = []
            for s in SEXES:
                v = by_sex[s][key]
                cells += [f"{v['mean']:.3f}, SD {v['sd']:.3f} [{v['min']:.3f}-{v['max']:.3f}]",
                          f"{refits['per_fold'][space][s][key]['mean_fold_sd']:.3f}"]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- absolute risk
#: the absolute-risk candidates of docs/METHODS.md, fewest covariates first, then the anchor
ABSOLUTE_LABELS: dict[str, str] = {
    "age": "Cox: age", "age_distance": "Cox: age + raw Euclidean distance",
    "age_phenoage": "Cox: age + PhenoAge xb", "ridge_markers": "ridge Cox: age + markers",
    "phenoage_formula": "PhenoAge's own formula (anchor)"}
ABSOLUTE_GENERATED = ("<!-- generated by benchmarks/real_nhanes.py --absolute: begin -->",
                      "<!-- generated by benchmarks/real_nhanes.py --absolute: end -->")


def _miscalibration(m: pd.DataFrame) -> float:
    """sum over the sexes of |log O/E| + |log slope| (the recalibration rule)."""
    return float((np.abs(np.log(m["oe"])) + np.abs(np.log(m["slope"].clip(lower=1e-6)))).sum())


def absolute_rule(metrics: pd.DataFrame, draws: dict, coverage: dict) -> dict:
    """The pre-registered choice (docs/METHODS.md): per candidate the baseline the
    recalibration rule keeps, eligibility (coverage >= 95%, slope 0.8-1.2, O/E 0.8-1.25 in each
    sex), the leader by C averaged over sexes, then the fewest covariates whose paired
    difference to the leader has a 95% interval including 0."""
    from sphr.risk.absolute import CANDIDATES

    out: dict = {"candidates": {}}
    for cand in CANDIDATES:
        m = metrics.loc[metrics["method"] == cand]
        if m.empty or set(m["sex"]) != set(SEXES):
            continue
        rec, train = m.loc[m["recalibrated"]], m.loc[~m["recalibrated"]]
        recal = len(rec) == len(SEXES) and _miscalibration(rec) < _miscalibration(train)
        use = rec if recal else train
        covered = all(coverage[s].get(cand, 0) >= 0.95 for s in SEXES)
        calibrated = bool(use["slope"].between(0.8, 1.2).all()
                          and use["oe"].between(0.8, 1.25).all())
        out["candidates"][cand] = {"recalibrated": bool(recal), "coverage_ok": covered,
                                   "calibrated": calibrated, "eligible": covered and calibrated,
                                   "c_mean": round(float(use["c_index"].mean()), 4)}
    c = out["candidates"]
    pool = [k for k, v in c.items() if v["eligible"]] or [k for k, v in c.items()
                                                          if v["coverage_ok"]]
    out["calibration_failed"] = not any(v["eligible"] for v in c.values())
    if not pool:
        return out
    leader = max(pool, key=lambda k: c[k]["c_mean"])
    out["leader"], out["shipped"] = leader, leader
    out["paired_vs_leader"] = {}
    for cand in pool[:pool.index(leader)] if leader in pool else []:
        diff = np.mean([draws[s][(leader, c[leader]["recalibrated"])]
                        - draws[s][(cand, c[cand]["recalibrated"])] for s in SEXES], axis=0)
        lo, hi = np.nanpercentile(diff[1:], (2.5, 97.5))
        out["paired_vs_leader"][cand] = [round(float(diff[0]), 4), round(float(lo), 4),
                                         round(float(hi), 4)]
        if lo <= 0 and out["shipped"] == leader:
            out["shipped"] = cand  # fewer covariates, not worse beyond chance
    out["shipped_recalibrated"] = c[out["shipped"]]["recalibrated"]
    return out


def absolute_draws(data: pd.DataFrame, n_bootstrap: int, seed: int) -> dict:
    """Harrell's C (follow-up cut at 10 years) of every candidate and baseline ((method,
    recalibrated) keys) over the same participant resamples per sex (the observed first): for
    the paired differences of the rule."""
    from sphr.survival import c_index_weighted, resample_counts

    out = {}
    for k, sex in enumerate(SEXES):
        sub = data.loc[data["sex"] == sex]
        eids = np.sort(sub["eid"].unique())
        counts = resample_counts(np.random.default_rng([seed, 100 + k]), eids.size, n_bootstrap)
        out[sex] = {}
        for cand, g in sub.groupby(["method", "recalibrated"]):
            w = np.vstack([np.ones(len(g)), counts[:, np.searchsorted(eids, g["eid"])]])
            out[sex][cand] = c_index_weighted(g["time"].to_numpy(float), g["event"].to_numpy(bool),
                                              g["risk_10y"].to_numpy(float), w)
    return out


def evaluate_absolute(risks: pd.DataFrame, n_bootstrap: int, seed: int) -> dict:
    """The candidates' cross-fitted death metrics per sex, and the rule's choice."""
    from sphr.risk.absolute_validation import absolute_validation, with_outcome

    death = death_outcome().reset_index()
    outcomes = death.assign(outcome="death")
    risks = risks.loc[risks["outcome"] == "death"]
    metrics, bins = absolute_validation(risks, outcomes, n_bootstrap=n_bootstrap, seed=seed)
    people = death.merge(fold_of(EXPORT, OUTCOMES, 5, 0)[["eid", "sex"]], on="eid")
    from sphr.labels import SEX_CODE

    total = people.groupby("sex").size().rename({code: s for s, code in SEX_CODE.items()})
    scored = risks.groupby(["sex", "method"])["eid"].nunique()
    coverage = {s: {m: float(scored[s][m] / total[s]) for m in scored[s].index} for s in SEXES}
    draws = absolute_draws(with_outcome(risks, outcomes), n_bootstrap, seed)
    return {"metrics": metrics, "deciles": bins, "coverage": coverage,
            "rule": absolute_rule(metrics, draws, coverage)}


def absolute_markdown(result: dict) -> str:
    """The cross-fitted table of the candidates (death, 10 years) and the rule's choice."""
    m = result["metrics"]
    lines = ["Death by 10 years, every person scored by a model fitted without them (5 folds, "
             "fold seed 0): Harrell's C, calibration slope, observed / expected (O/E) and the "
             "IPCW Brier score [95% CI]; n people (deaths by 10 years).", "",
             "| candidate | baseline | sex | n (deaths) | C | slope | O/E | Brier |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cand, label in ABSOLUTE_LABELS.items():
        for recal in (True, False):
            for sex in SEXES:
                r = m.loc[(m["method"] == cand) & (m["recalibrated"] == recal) & (m["sex"] == sex)]
                if r.empty:
                    continue
                r = r.iloc[0]
                base = "none (not fitted)" if cand == "phenoage_formula" else \
                    ("recalibrated" if recal else "training")
                lines.append(
                    f"| {label} | {base} | {sex} | {r.n:,} ({r.events}) | "
                    f"{r.c_index:.3f} [{r.c_index_low:.3f}, {r.c_index_high:.3f}] | "
                    f"{r.slope:.2f} [{r.slope_low:.2f}, {r.slope_high:.2f}] | "
                    f"{r.oe:.2f} [{r.oe_low:.2f}, {r.oe_high:.2f}] | "
                    f"{r.brier:.4f} [{r.brier_low:.4f}, {r.brier_high:.4f}] |")
    rule = result["rule"]
    lines += ["", "The rule (docs/METHODS.md): " + "; ".join(
        f"`{k}` {'eligible' if v['eligible'] else 'not eligible'} (coverage "
        f"{'ok' if v['coverage_ok'] else 'below 95%'}, calibration "
        f"{'in the bands' if v['calibrated'] else 'outside the bands'}, "
        f"{'recalibrated' if v['recalibrated'] else 'training'} baseline, mean C {v['c_mean']:.3f})"
        for k, v in rule["candidates"].items())]
    for cand, d in rule.get("paired_vs_leader", {}).items():
        lines.append(f"- `{rule['leader']}` minus `{cand}`, C averaged over the sexes: "
                     f"{d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}]")
    if "shipped" in rule:
        lines.append(f"- ships: `{rule['shipped']}` with the "
                     f"{'recalibrated' if rule['shipped_recalibrated'] else 'training'} baseline"
                     + (" (no candidate passed the calibration bands)"
                        if rule["calibration_failed"] else ""))
    return "\n".join(lines) + "\n"


def run_absolute(args: argparse.Namespace) -> dict:
    """``--absolute``: the candidates cross-fitted (or read back with ``--reuse``), evaluated,
    the rule applied; writes absolute.json / .md (and the docs' generated block)."""
    path = args.out / "crossfit_absolute.parquet"
    t0 = time.perf_counter()
    if not args.reuse:
        _, scored = crossfit(args.out, args.folds, args.seed, args.profile, ("marker",),
                             args.jobs, absolute_only=True)
        pd.concat([pd.read_parquet(f["absolute_marker"]) for f in scored.values()],
                  ignore_index=True).to_parquet(path)
    result = evaluate_absolute(pd.read_parquet(path), args.bootstrap, args.seed)
    text = absolute_markdown(result)
    result["metrics"].to_csv(args.out / "absolute_metrics.csv", index=False)
    result["deciles"].to_csv(args.out / "absolute_deciles.csv", index=False)
    summary = {"seconds": round(time.perf_counter() - t0, 1), "coverage": result["coverage"],
               "rule": result["rule"], "bootstrap": args.bootstrap, "seed": args.seed}
    (args.out / "absolute.json").write_text(json.dumps(summary, indent=1))
    (args.out / "absolute.md").write_text(text)
    if args.docs is not None:
        doc = args.docs.read_text()
        begin, end = doc.index(ABSOLUTE_GENERATED[0]), doc.index(ABSOLUTE_GENERATED[1])
        args.docs.write_text(doc[:begin + len(ABSOLUTE_GENERATED[0])] + "\n" + text + doc[end:])
    return summary


def evaluated_on(method: str, outcome: str) -> bool:
    from sphr.risk.supervised import evaluated_on as rule

    return rule(method, outcome)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/real_nhanes"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default="demo", choices=("demo", "paper"),
                        help="training profile of every fold (demo: minutes; paper: the paper's "
                        "100,000 triplets per epoch with model selection, about 50 epochs a fit)")
    parser.add_argument("--spaces", default="marker,quantile",
                        help="distance spaces of the marker-space methods (docs/METHODS.md)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2, help="folds fitted at the same time")
    parser.add_argument("--variants", action="store_true",
                        help="also score the SPHR variants of the risk stage (docs/METHODS.md)")
    parser.add_argument("--cohort", action="append", default=[], metavar="KEY=VALUE",
                        help="a cohort setting for every fold, e.g. triplet_classes=severity")
    parser.add_argument("--train", action="append", default=[], metavar="KEY=VALUE",
                        help="a training setting for every fold's SPHR fit, e.g. "
                             "selection=severity or anchor=1 (docs/METHODS.md); device=cuda "
                             "with compile=true trains on a GPU")
    parser.add_argument("--record-spread", action="store_true",
                        help="with --refits: keep the refit spread in "
                             f"{SPREAD_FILE.relative_to(REPO)} for the report")
    parser.add_argument("--refits", type=int, default=1, metavar="K",
                        help="fit each fold K times, refit r with seed refit_seed(--seed, r) (the "
                        "folds fixed; refit 0 = the run without it) and report each score's C "
                        "over refits under 'refits' (mean, SD, min-max, per fold)")
    parser.add_argument("--reuse", action="store_true",
                        help="read the scores of an earlier run in --out instead of fitting")
    parser.add_argument("--reuse-fits", action="store_true",
                        help="keep each fold's fitted SPHR and DeepPatient from an earlier run in "
                        "--out and redo only the risk stage and the scoring")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="an earlier run's --out (other cohort settings, same folds): the "
                        "paired difference of every SPHR score of this run minus that run's")
    parser.add_argument("--docs", type=Path, default=None,
                        help="write the tables into this markdown file's generated part "
                        "(docs/REAL.md)")
    parser.add_argument("--no-main", dest="main", action="store_false",
                        help="skip the main command on the whole development set (run at the "
                        "folds' profile by default)")
    parser.add_argument("--absolute", action="store_true",
                        help="the absolute-risk candidates instead (docs/METHODS.md, \"Absolute "
                        "risk\"): folds fit ingest, cohorts and the risk stage's raw distance only")
    args = parser.parse_args()
    if args.refits < 1:
        parser.error(f"--refits must be >= 1, got {args.refits}")
    if args.absolute:
        print(json.dumps(run_absolute(args)))
        return
    spaces = tuple(s for s in args.spaces.split(",") if s)
    t0 = time.perf_counter()
    runs = refit_score_tables(args, spaces)
    tables = runs[0]
    first = next(iter(tables.values()))
    result: dict = {"n": len(first), "deaths": int(first["died"].sum()), "folds": args.folds,
                    "seed": args.seed, "profile": args.profile, "bootstrap": args.bootstrap,
                    "cohort": dict(item.split("=", 1) for item in args.cohort),
                    "train": train_overrides(args.train),
                    "c_index": {}, "n_scored": {}}
    draws = {}
    for space, wide in tables.items():
        if not np.array_equal(wide["eid"].to_numpy(), first["eid"].to_numpy()):
            raise SystemExit(f"the {space} scores cover other people than the first space's")
        # a supervised comparator is judged on the outcome it was fitted to only (death here)
        names = [c for c in wide.columns if c not in ("eid", "sex", "time_years", "died")
                 and evaluated_on(c, "death")]
        c, n, draws[space] = c_indices(wide, names, args.bootstrap, args.seed)
        result["c_index"][space], result["n_scored"][space] = c, n
    result["paired"] = comparisons(draws)
    if args.against is not None:
        result["paired"]["minus_other_run"] = against(args, tables, draws)
    if args.refits > 1:
        result["refits"] = refit_spread(runs, result["c_index"],
                                        fold_of(EXPORT, OUTCOMES, args.folds, args.seed), args.seed)
        intervals = refit_intervals(runs, spaces[0], args.bootstrap, args.seed)
        result["refits"]["interval"] = {spaces[0]: intervals}
        result["rule"] = stability_rule(result["refits"]["spread"][spaces[0]], intervals)
    tracks = training_tracks(args.out, args.folds, args.refits)
    if len(tracks):  # one refit too: each fold's held-out C beside its training's tracking
        per_fold = result.get("refits") or refit_spread(
            runs, result["c_index"], fold_of(EXPORT, OUTCOMES, args.folds, args.seed), args.seed)
        tracks.to_parquet(args.out / "tracking.parquet")
        result["tracking"] = tracking_summary(tracks, heldout_fold_c(per_fold, spaces[0], "sphr"))
    if args.record_spread and "refits" in result:
        record_spread(SPREAD_FILE, args, result)
    result["crossfit_s"] = round(time.perf_counter() - t0, 1)
    if args.main and not args.reuse:
        result.update(run_main(args.out, args.profile))
    result["seconds"] = round(time.perf_counter() - t0, 1)
    (args.out / "real_nhanes.json").write_text(json.dumps(result, indent=1))
    (args.out / "real_nhanes.md").write_text(
        markdown(result) + ("\n" + refit_markdown(result["refits"]) if "refits" in result else "")
        + ("\n" + rule_markdown(result["rule"]) if "rule" in result else "")
        + ("\n" + tracking_markdown(result["tracking"]) if "tracking" in result else ""))
    if args.docs is not None:
        write_docs(args.docs, markdown(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
