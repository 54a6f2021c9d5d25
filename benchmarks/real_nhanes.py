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
        [--variants] [--cohort KEY=VALUE] [--train KEY=VALUE]
        [--reuse | --reuse-fits] [--reuse-refits]
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
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sphr.errors import ConfigError
from sphr.io import atomic_path, write_text
from sphr.options import add_set_alias, add_set_option

# the parts live in benchmarks/nhanes_crossfit/ (a script's own folder is on sys.path; a test
# loading this file by path needs it added): appended, not prepended, so that benchmarks/'
# scripts (train.py, evaluate.py, ...) shadow no installed module of the same name there
sys.path.append(str(Path(__file__).resolve().parent))
from nhanes_crossfit.absolute import (
    ABSOLUTE_GENERATED,
    ABSOLUTE_LABELS,
    absolute_draws,
    absolute_markdown,
    absolute_rule,
    evaluate_absolute,
    run_absolute,
)
from nhanes_crossfit.beyond import (
    beyond_age_figures,
    beyond_markdown,
    dc_rule,
    dc_rule_markdown,
)
from nhanes_crossfit.cindex import against, c_indices, comparisons, paired, plain_c
from nhanes_crossfit.common import (
    DATA,
    EXPORT,
    OUTCOMES,
    REPO,
    SEXES,
    death_outcome,
    interval,
    refit_dir,
    refit_seed,
    stage_settings,
)
from nhanes_crossfit.fits import (
    collect,
    crossfit,
    fit_and_score,
    fold_of,
    reference_scores,
    refit_score_tables,
    score_tables,
    split_export,
)
from nhanes_crossfit.refits import (
    RULE_SCORES,
    refit_intervals,
    refit_markdown,
    refit_spread,
    rule_markdown,
    spread,
    stability_rule,
)
from nhanes_crossfit.spread_file import (
    SPREAD_FILE,
    candidate_name,
    measuring_command,
    record_spread,
)
from nhanes_crossfit.tables import GENERATED, LABELS, markdown, write_docs
from nhanes_crossfit.tracking import (
    heldout_fold_c,
    tracking_markdown,
    tracking_summary,
    training_tracks,
)

# the names this script has always offered (tests and notebooks load it by path)
__all__ = [
    "ABSOLUTE_GENERATED",
    "ABSOLUTE_LABELS",
    "DATA",
    "EXPORT",
    "GENERATED",
    "LABELS",
    "OUTCOMES",
    "REPO",
    "RULE_SCORES",
    "SEXES",
    "SPREAD_FILE",
    "absolute_draws",
    "absolute_markdown",
    "absolute_rule",
    "against",
    "beyond_age_figures",
    "c_indices",
    "candidate_name",
    "collect",
    "comparisons",
    "crossfit",
    "dc_rule",
    "death_outcome",
    "evaluate_absolute",
    "evaluated_on",
    "fit_and_score",
    "fold_of",
    "heldout_fold_c",
    "interval",
    "main",
    "markdown",
    "measuring_command",
    "paired",
    "plain_c",
    "record_spread",
    "reference_scores",
    "refit_dir",
    "refit_intervals",
    "refit_markdown",
    "refit_score_tables",
    "refit_seed",
    "refit_spread",
    "rule_markdown",
    "run_absolute",
    "run_main",
    "score_tables",
    "split_export",
    "spread",
    "stability_rule",
    "tracking_markdown",
    "tracking_summary",
    "training_tracks",
    "write_docs",
]


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


def evaluated_on(method: str, outcome: str) -> bool:
    from sphr.risk.supervised import evaluated_on as rule

    return rule(method, outcome)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of the module docstring (docs/REAL.md, docs/notes/SPHR_RISK.md)."""
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
    parser.add_argument("--device", default=None,
                        help="where every fold's SPHR fit trains (cuda with --set "
                        "train.compile=true on a GPU; default: the profile's)")
    add_set_option(parser, "a setting of every fold's fits, as the main command's --set: "
                   "cohorts.triplet_classes=severity, train.selection=severity, "
                   "train.anchor=1 (docs/METHODS.md), risk.standardization=calibration_line")
    # the older spellings stay, so the commands recorded in the spread file and the notes
    # still run: --train KEY=VALUE is --set train.KEY=VALUE
    for flag, stage in (("--cohort", "cohorts"), ("--train", "train"), ("--risk", "risk")):
        add_set_alias(parser, flag, stage, f"the same as --set {stage}.KEY=VALUE")
    parser.add_argument("--record-spread", action="store_true",
                        help="with --refits: keep the refit spread in "
                             f"{SPREAD_FILE.relative_to(REPO)} (`make refit-spread` then "
                             "releases it into the package for the report)")
    parser.add_argument("--refits", type=int, default=1, metavar="K",
                        help="fit each fold K times, refit r with seed refit_seed(--seed, r) (the "
                        "folds fixed; refit 0 = the run without it) and report each score's C "
                        "over refits under 'refits' (mean, SD, min-max, per fold)")
    parser.add_argument("--reuse", action="store_true",
                        help="read the scores of an earlier run in --out instead of fitting")
    parser.add_argument("--reuse-fits", action="store_true",
                        help="keep each fold's fitted SPHR and DeepPatient from an earlier run in "
                        "--out and redo only the risk stage and the scoring; a fit the earlier "
                        "run left unfinished continues from its checkpoint (--train "
                        "checkpoint_every=N sets how often one is written)")
    parser.add_argument("--reuse-refits", action="store_true",
                        help="read back each refit whose crossfit_scores_<space>.parquet an "
                        "earlier run left in --out (refit r >= 1 in --out/refit<r>) and fit only "
                        "the others: a cross-fit longer than one sitting runs refit by refit, "
                        "and a finished refit's scores can be carried to another machine")
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
    args = parser.parse_args(argv)
    if args.refits < 1:
        parser.error(f"--refits must be >= 1, got {args.refits}")
    try:  # refused when the arguments are read, before any fold is split
        for attr, values in stage_settings(args.overrides).items():
            setattr(args, attr, values)
    except ConfigError as err:
        parser.error(str(err))
    if args.device is not None:  # a run-wide setting in the main command, as here
        args.train["device"] = args.device
    return args


def death_table(args: argparse.Namespace, tables: dict[str, pd.DataFrame]
                ) -> tuple[dict, dict]:
    """The run's settings and, per space, sex and score, the cross-fitted C for death with its
    interval and the people scored; (result, the bootstrap draws per space)."""
    first = next(iter(tables.values()))
    result: dict = {"n": len(first), "deaths": int(first["died"].sum()), "folds": args.folds,
                    "seed": args.seed, "profile": args.profile, "bootstrap": args.bootstrap,
                    "cohort": args.cohort, "train": args.train, "risk": args.risk,
                    "c_index": {}, "n_scored": {}}
    draws = {}
    for space, wide in tables.items():
        if not np.array_equal(wide["eid"].to_numpy(), first["eid"].to_numpy()):
            raise SystemExit(f"the {space} scores cover other people than the first space's")
        # a supervised comparator is judged on the outcome it was fitted to only (death here)
        names = [c for c in wide.columns if c not in ("eid", "sex", "time_years", "died", "label")
                 and evaluated_on(c, "death")]
        c, n, draws[space] = c_indices(wide, names, args.bootstrap, args.seed)
        result["c_index"][space], result["n_scored"][space] = c, n
        # the primary figure: what each score adds to age (docs/METHODS.md)
        result.setdefault("beyond_age", {})[space] = beyond_age_figures(
            wide, names, args.bootstrap, args.seed)[0]
    return result, draws


def add_refits_and_tracking(args: argparse.Namespace, result: dict,
                            runs: list[dict[str, pd.DataFrame]], spaces: tuple[str, ...]) -> None:
    """``--refits`` > 1: the spread over refits, their intervals and the stability rule; every
    run: the fold fits' tracking beside each held-out fold's C (when the fits tracked);
    ``--record-spread``: the spread kept for the report."""
    if args.refits > 1:
        result["refits"] = refit_spread(runs, result["c_index"],
                                        fold_of(EXPORT, OUTCOMES, args.folds, args.seed), args.seed)
        intervals = refit_intervals(runs, spaces[0], args.bootstrap, args.seed)
        result["refits"]["interval"] = {spaces[0]: intervals}
        # SPHR's rule by dC (docs/METHODS.md, "Higher risk for your age"): every refit's
        # yardstick on the same resamples
        judged = ["raw_euclidean", *RULE_SCORES]
        per_refit = [beyond_age_figures(run[spaces[0]], [n for n in judged
                                                         if n in run[spaces[0]]],
                                        args.bootstrap, args.seed) for run in runs]
        result["refits"]["beyond_age"] = {spaces[0]: [f for f, _ in per_refit]}
        result["rule"] = dc_rule([f for f, _ in per_refit], [d for _, d in per_refit],
                                 result["refits"]["spread"][spaces[0]])
    tracks = training_tracks(args.out, args.folds, args.refits)
    if len(tracks):  # one refit too: each fold's held-out C beside its training's tracking
        per_fold = result.get("refits") or refit_spread(
            runs, result["c_index"], fold_of(EXPORT, OUTCOMES, args.folds, args.seed), args.seed)
        with atomic_path(args.out / "tracking.parquet") as tmp:
            tracks.to_parquet(tmp)
        result["tracking"] = tracking_summary(tracks, heldout_fold_c(per_fold, spaces[0], "sphr"))
    if args.record_spread and "refits" in result:
        record_spread(SPREAD_FILE, args, result)


def write_outputs(args: argparse.Namespace, result: dict) -> None:
    """real_nhanes.json and real_nhanes.md in ``--out``, and the docs' generated block."""
    # atomically: a run stopped mid-write leaves the last whole result, not half of one
    write_text(json.dumps(result, indent=1), args.out / "real_nhanes.json")
    text = (markdown(result)
            + ("\n" + refit_markdown(result["refits"]) if "refits" in result else "")
            + ("\n" + dc_rule_markdown(result["rule"], LABELS) if "rule" in result else "")
            + ("\n" + beyond_markdown(result, LABELS) if "beyond_age" in result else "")
            + ("\n" + tracking_markdown(result["tracking"]) if "tracking" in result else ""))
    write_text(text, args.out / "real_nhanes.md")
    if args.docs is not None:
        write_docs(args.docs, markdown(result) + "\n" + beyond_markdown(result, LABELS))


def main() -> None:
    args = parse_args()
    if args.absolute:
        print(json.dumps(run_absolute(args)))
        return
    spaces = tuple(s for s in args.spaces.split(",") if s)
    t0 = time.perf_counter()
    runs = refit_score_tables(args, spaces)
    tables = runs[0]
    result, draws = death_table(args, tables)
    result["paired"] = comparisons(draws)
    if args.against is not None:
        result["paired"]["minus_other_run"] = against(args, tables, draws)
    add_refits_and_tracking(args, result, runs, spaces)
    result["crossfit_s"] = round(time.perf_counter() - t0, 1)
    if args.main and not args.reuse:
        result.update(run_main(args.out, args.profile))
    result["seconds"] = round(time.perf_counter() - t0, 1)
    write_outputs(args, result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
