"""The whole tabular pipeline at UK Biobank size: every stage timed, peak memory per stage.

A synthetic export of ``--participants`` people (500,000 by default, ukbconv CSV, seed 0,
generator v3, linear world) is written first by ``sphr synth`` (timed, not counted in the
total: a user starts from their own export). Then each stage runs as its own ``sphr``
command in its own process, one after another, with every core, and reports its wall
seconds and its peak memory as ``VmHWM`` of that process (``benchmarks/_measure.py``), and
the largest peak of a child it started (``child_peak_mb``: joblib's worker processes in
evaluate and risk, whose memory comes on top of the stage's own):

================ ========================================================================
ingest           ``sphr ingest`` of the export (baseline, repeat visit, linked outcomes)
cohorts          ``sphr cohorts --profile PROFILE`` (both sexes; paper: 100,000 triplets)
train/<sex>      ``sphr train --profile PROFILE`` (paper: at most 1000 epochs at batch 256,
                 model selection on 20% of the real training rows, patience 50)
baselines/<sex>  ``sphr baselines`` (raw, PCA, ICA, DiffMap with 10,000 landmarks,
                 DeepPatient), fitted on the real training rows
comparison/<sex> ``sphr train --losses all --profile LOSS_PROFILE``: the 7-loss comparison,
                 trained as one stack (``--no-losses`` leaves it out)
evaluate/<sex>   ``sphr evaluate --sexes SEX --xgboost-method hist`` (6 representations x 4
                 classifiers x 2 tasks x 5 splits of the test participants; XGBoost on each
                 loss's embedding; ``--xgboost-method exact`` for the paper's tree method)
risk             ``sphr risk`` (every method, both modes, bootstrap intervals, report)
================ ========================================================================

The retrieval comparison (images) does not depend on the cohort's size and is left out.
Each stage's record is written to ``WORKDIR/stages.json`` as it finishes; ``--resume``
skips the stages already recorded (a failed run re-runs from the stage that failed).

    python benchmarks/ukb_scale.py [--participants 500000] [--profile paper|demo]
        [--loss-profile demo|paper] [--no-losses] [--xgboost-method hist|exact]
        [--workdir DIR] [--resume]

Last line: one JSON object with ``participants, profile, total_s, peak_mb, stages``
(``stages``: per stage ``s`` and ``peak_mb``), plus which stage bounds the time and the
memory, the loss comparison's profile and the synthetic export's generation time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure

from sphr.io import write_text

SEXES = ("female", "male")


def stage_commands(run: Path, export: Path, profile: str, loss_profile: str | None,
                   xgboost_method: str = "hist", folds: int | None = None
                   ) -> list[tuple[str, list[str]]]:
    """(stage name, ``sphr`` arguments) in pipeline order; ``folds``: the cross-fit's folds
    (None: the cohort settings' own, as a user's run gets them; 0: the single split)."""
    fold_args = [] if folds is None else ["--folds", str(folds)]
    stages: list[tuple[str, list[str]]] = [
        ("ingest", ["ingest", str(export), "--out", str(run / "ingest")]),
        ("cohorts", ["cohorts", str(run / "ingest" / "baseline.parquet"), "--out",
                     str(run / "cohorts"), "--profile", profile, "--seed", "0", *fold_args]),
    ]
    stages += [(f"train/{sex}", ["train", str(run / "cohorts" / sex), "--profile", profile])
               for sex in SEXES]
    stages += [(f"baselines/{sex}", ["baselines", str(run / "cohorts" / sex), "--out",
                                     str(run / "baselines" / sex)]) for sex in SEXES]
    if loss_profile is not None:
        stages += [(f"comparison/{sex}", ["train", str(run / "cohorts" / sex), "--losses", "all",
                                          "--profile", loss_profile]) for sex in SEXES]
    losses = ["--no-losses"] if loss_profile is None else ["--no-train-losses"]
    stages += [(f"evaluate/{sex}", ["evaluate", str(run), "--sexes", sex,
                                    "--no-fit-baselines", "--xgboost-method", xgboost_method,
                                    *losses]) for sex in SEXES]
    stages.append(("risk", ["risk", str(run)]))
    return stages


def _result(args: argparse.Namespace, records: dict[str, Any], run: Path, folds: int,
            loss_profile: str | None) -> dict[str, Any]:
    """The benchmark's JSON: every stage's time and memory, which bound each, the cohorts."""
    stages = records["stages"]
    slowest = max(stages, key=lambda k: stages[k]["s"])
    largest = max(stages, key=lambda k: stages[k]["peak_mb"])
    cohorts = {}
    for sex in SEXES:
        report = run / "cohorts" / sex / "cohort_report.json"
        if report.exists():
            d = json.loads(report.read_text())
            cohorts[sex] = {part: sum(d[part].values())
                            for part in ("train", "test", "calibration")}
    result = {
        "participants": args.participants, "profile": args.profile,
        "total_s": round(sum(v["s"] for v in stages.values()), 1),
        "peak_mb": stages[largest]["peak_mb"], "stages": stages,
        "slowest_stage": slowest, "peak_stage": largest,
        "loss_profile": loss_profile, "xgboost_method": args.xgboost_method, "folds": folds,
        "threads": len(os.sched_getaffinity(0)),
        "synth_s": records["synth"]["s"],
        "cohort_rows": cohorts,
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--participants", type=int, default=500_000)
    parser.add_argument("--profile", default="paper", choices=("demo", "paper"),
                        help="cohort and training profile (default paper: 100,000 triplets, "
                        "early stopping)")
    parser.add_argument("--loss-profile", default="demo", choices=("demo", "paper"),
                        help="training profile of the 7-loss comparison (default demo: the "
                        "paper profile is hours per sex on a 2-core CPU)")
    parser.add_argument("--no-losses", action="store_true", help="leave out the loss comparison")
    parser.add_argument("--xgboost-method", default="hist", choices=("hist", "exact"),
                        help="the evaluation's XGBoost tree method (default hist: at this size "
                        "the paper's exact method is two thirds of the evaluation's time, for "
                        "weighted F1 within 0.002 at 500k; sphr.evaluate.classifiers)")
    parser.add_argument("--folds", type=int, default=None,
                        help="folds of the cross-fit per sex (default: the cohort settings' "
                        "own, 5; 0: the single split, as before the cross-fit)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--resume", action="store_true",
                        help="skip the stages WORKDIR/stages.json already records")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sphr-scale-"))
    run = workdir / "run"
    run.mkdir(parents=True, exist_ok=True)
    export = workdir / f"ukb_{args.participants}.csv"
    env = {**os.environ, "SPHR_PROGRESS": "0"}
    py, peak_file, logs = sys.executable, workdir / "peak.json", workdir / "logs"
    logs.mkdir(exist_ok=True)
    record_file = workdir / "stages.json"
    records: dict[str, Any] = (json.loads(record_file.read_text())
                               if args.resume and record_file.exists() else {})
    if records.get("participants", args.participants) != args.participants:
        raise SystemExit(f"{record_file} is for {records['participants']} participants")
    records["participants"] = args.participants
    stages = records.setdefault("stages", {})

    if not export.exists() or "synth" not in records:
        s, mb = measure(["-m", "sphr.cli", "-q", "synth", "--participants",
                         str(args.participants), "--seed", "0", "--out", str(export)],
                        py, peak_file, env, logs / "synth.log")
        records["synth"] = {"s": round(s, 1), "peak_mb": round(mb)}
        print(f"synth: {s:.1f} s, {mb:.0f} MiB ({export.stat().st_size / 1e9:.2f} GB)",
              file=sys.stderr)
    loss_profile = None if args.no_losses else args.loss_profile
    if records.setdefault("xgboost_method", args.xgboost_method) != args.xgboost_method:
        raise SystemExit(f"{record_file} was run with --xgboost-method {records['xgboost_method']}")
    from sphr.cohorts.config import CohortConfig

    folds = CohortConfig.profile(args.profile).folds if args.folds is None else args.folds
    if records.setdefault("folds", folds) != folds:
        raise SystemExit(f"{record_file} was run with --folds {records['folds']}")
    for name, cmd in stage_commands(run, export, args.profile, loss_profile, args.xgboost_method,
                                    args.folds):
        if name in stages:
            print(f"{name}: recorded, skipped", file=sys.stderr)
            continue
        child: dict[str, float] = {}
        s, mb = measure(["-m", "sphr.cli", "-q", *cmd], py, peak_file, env,
                        logs / f"{name.replace('/', '_')}.log", child)
        stages[name] = {"s": round(s, 1), "peak_mb": round(mb),
                        "child_peak_mb": round(child.get("peak_mb", 0))}
        write_text(json.dumps(records, indent=1), record_file)
        print(f"{name}: {s:.1f} s, {mb:.0f} MiB", file=sys.stderr)

    result = _result(args, records, run, folds, loss_profile)
    write_text(json.dumps(result, indent=1), workdir / "ukb_scale.json")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
