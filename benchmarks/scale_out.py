"""The pipeline's many fits, one after another and on a Ray and a SLURM cluster.

N fits = 2 sexes x K folds x C candidates (default 2 x 5 x 4 = 40): the cross-fit's fold
models of the development set (its cohorts at the default profile for an export, 5 folds),
trained at the demo profile, each candidate a training seed. They run through the pipeline's
fit engine (``sphr_dagster.fits``: one Pipes fit each, one CPU thread each):

- ``serial``: the local engine, one fit at a time;
- ``ray``: a local Ray cluster with 2 CPUs (``scripts/ray_local.sh``), each fit a Ray job;
- ``slurm``: the one-node SLURM cluster of ``scripts/slurm_local.sh`` (``SLURM_CONF``), each
  fit an ``sbatch`` job.

    python benchmarks/scale_out.py [--out runs/scale_out] [--candidates 4] [--folds 5]
        [--engines serial,ray,slurm]

Last line: one JSON object, ``{"n_fits", "serial_s", "per_fit_s", "ray": {"workers",
"wall_s", "ratio", "median_start_delay_s", "scheduler_count", "identical_results",
"projected_wall_s"}, "slurm": {...}}``; ``scheduler_count`` is the engine's own count of
finished jobs (Ray's job list, SLURM's job completion log); ``identical_results``: every
fit's held-out embeddings and final loss equal the serial run's. Also written to
benchmarks/results/scale_out_<date>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import numpy as np

from sphr_dagster.fits import FitEngine

REPO = Path(__file__).resolve().parents[1]
EXPORT = REPO / "sphr" / "data" / "real" / "nhanes_ukb_dev.csv"
SEXES = ("female", "male")


def build_cohorts(out: Path, folds: int) -> Path:
    """The development set's cohorts at the default profile for an export, ``folds`` folds."""
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.data.ingest import run_ingest
    from sphr.settings import EXPORT_PROFILE, stage_defaults

    cohorts = out / "cohorts"
    if all((cohorts / s / "folds" / f"fold{folds - 1}").is_dir() for s in SEXES):
        return cohorts
    run_ingest(EXPORT, out / "ingest")
    config = {**stage_defaults("cohorts", EXPORT_PROFILE), "folds": folds}
    run_cohorts(out / "ingest" / "baseline.parquet", cohorts, CohortConfig(**config))
    return cohorts


def the_fits(cohorts: Path, out: Path, candidates: int, folds: int) -> list:
    from sphr.train.config import TrainConfig
    from sphr.train.pipes_entry import CONFIG_EXTRA
    from sphr_dagster.fits import Fit

    fits = []
    for c in range(candidates):
        extras = {CONFIG_EXTRA: TrainConfig.profile("demo", seed=c).to_dict()}
        for sex in SEXES:
            for k in range(folds):
                name = f"c{c}/{sex}/fold{k}"
                fits.append(Fit(name, ("--fold", str(k), "--fit", name, str(cohorts / sex),
                                       str(out / f"c{c}" / sex)), extras,
                                str(out / "logs")))
    return fits


def run_engine(engine, fits: list) -> tuple[float, dict]:
    """Wall seconds and each fit's reported metadata, through one Dagster step."""
    reports: dict = {}

    @dg.asset(name="scale_out_fits")
    def scale_out_fits(context, fit_engine: FitEngine) -> dg.MaterializeResult:
        reports.update(fit_engine.run_fits(context, fits))
        return dg.MaterializeResult(metadata={"fits": len(reports)})

    t0 = time.perf_counter()
    result = dg.materialize([scale_out_fits], resources={"fit_engine": engine},
                            raise_on_error=False)
    wall = time.perf_counter() - t0
    if not result.success:
        raise SystemExit(f"{engine.engine}: the fits failed")
    return wall, reports


def outputs(out: Path, fits: list) -> dict[str, tuple[np.ndarray, float]]:
    from sphr.artifacts import read_embeddings

    found = {}
    for fit in fits:
        folder = Path(fit.args[-1]) / f"fold{fit.args[1]}"
        _, Z = read_embeddings(folder / "embeddings_test.parquet")
        found[fit.name] = (Z, json.loads((folder / "train_report.json").read_text())["final_loss"])
    return found


def identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k][0], b[k][0]) and a[k][1] == b[k][1]
                                        for k in a)


def start_delays(reports: dict) -> list[float]:
    return [r["fit_started_at"] - r["fit_submitted_at"] for r in reports.values()]


def ray_count(address: str, names: set[str]) -> int:
    from ray.job_submission import JobSubmissionClient

    return sum(1 for j in JobSubmissionClient(address).list_jobs()
               if str(j.status) == "SUCCEEDED" and any(
                   (j.submission_id or "").startswith(f"sphr-{n}-") for n in names))


def slurm_count(names: set[str]) -> int:
    conf = Path(os.environ["SLURM_CONF"]).read_text()
    log = Path(re.search(r"^JobCompLoc=(\S+)", conf, re.M).group(1))
    lines = log.read_text().splitlines() if log.is_file() else []
    return sum(1 for line in lines if "JobState=COMPLETED" in line
               and (m := re.search(r"Name=(\S+)", line)) and m.group(1) in names)


def cluster_run(name: str, engine, fits: list, out: Path, serial: dict, serial_s: float,
                count) -> dict:
    wall, reports = run_engine(engine, fits)
    delays = start_delays(reports)
    per_fit = serial_s / len(fits)
    return {"workers": 2, "wall_s": round(wall, 1), "ratio": round(wall / serial_s, 3),
            # submission to the fit's own start, waiting for a free worker included; the
            # shortest is a fit that found one free: the engine's own start cost
            "median_start_delay_s": round(statistics.median(delays), 2),
            "min_start_delay_s": round(min(delays), 2),
            "scheduler_count": count(),
            "identical_results": identical(serial, outputs(out / name, fits)),
            # 2 workers of one 2-core box; on W workers (one fit each, no contention) the
            # same fits would take about n / W times a fit plus its start cost
            "projected_wall_s": {str(w): round(len(fits) / w * (per_fit + min(delays))
                                               + min(delays), 1)
                                 for w in (8, 32, 128)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "scale_out")
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--engines", default="serial,ray,slurm")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPHR_PROGRESS", "0")

    engines = args.engines.split(",")
    cohorts = build_cohorts(args.out, args.folds)
    fits = {e: the_fits(cohorts, args.out / e, args.candidates, args.folds) for e in engines}
    n = len(fits[engines[0]])
    result: dict = {"n_fits": n, "fits": f"2 sexes x {args.folds} folds x {args.candidates} "
                    "seeds, demo profile, development set", "cpus_per_fit": 1}
    serial_s, _ = run_engine(FitEngine(engine="local", cpus_per_fit=1), fits["serial"])
    result.update(serial_s=round(serial_s, 1), per_fit_s=round(serial_s / n, 2))
    serial = outputs(args.out / "serial", fits["serial"])
    if "ray" in engines:
        started = subprocess.run(["bash", str(REPO / "scripts" / "ray_local.sh"), "start", "2"],
                                 capture_output=True, text=True, check=True)
        address = started.stdout.strip().splitlines()[-1].split("=", 1)[1]
        try:
            names = {f.slug for f in fits["ray"]}
            result["ray"] = cluster_run(
                "ray", FitEngine(engine="ray", cpus_per_fit=1, ray_address=address,
                                 poll_s=0.5), fits["ray"], args.out, serial, serial_s,
                lambda: ray_count(address, names))
        finally:
            subprocess.run(["bash", str(REPO / "scripts" / "ray_local.sh"), "stop"],
                           capture_output=True)
    if "slurm" in engines:
        names = {f.slug for f in fits["slurm"]}
        result["slurm"] = cluster_run(
            "slurm", FitEngine(engine="slurm", cpus_per_fit=1, poll_s=0.5), fits["slurm"],
            args.out, serial, serial_s, lambda: slurm_count(names))
    result["date"] = dt.date.today().isoformat()
    from sphr.io import write_json

    write_json(result, REPO / "benchmarks" / "results" / f"scale_out_{result['date']}.json")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
