"""The cross-fit's fold fits as SLURM batch jobs on a real one-node cluster."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import dagster as dg
from engine_runs import (
    FOLDS,
    SEX,
    execute_folds,
    failure_text,
    fold_metadata,
    fold_outputs,
    kill_fit_while_it_runs,
    materialize_folds,
    rerun_trains_only_fold1,
    same_outputs,
)

from sphr_dagster.fits import FitEngine


def completed_jobs() -> list[str]:
    """The cluster's own record (its job completion log): the sphr jobs that ended
    COMPLETED, by name."""
    conf = Path(os.environ["SLURM_CONF"]).read_text()
    log = re.search(r"^JobCompLoc=(\S+)", conf, re.M)
    if not log or not Path(log.group(1)).is_file():
        return []
    return [m.group(1) for line in Path(log.group(1)).read_text().splitlines()
            if "JobState=COMPLETED" in line and (m := re.search(r"Name=(\S+)", line))
            and m.group(1).startswith(SEX)]


def running_job(name: str) -> str | None:
    """The id of the running SLURM job of that name, if one runs."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-n", name, "-o", "%i"],
                         capture_output=True, text=True).stdout.split()
    return out[0] if out else None


def test_fold_fits_run_as_slurm_jobs_with_the_local_results(slurm_cluster, fold_cohorts,
                                                            tmp_path):
    before = len(completed_jobs())
    local = materialize_folds(tmp_path / "local", fold_cohorts,
                              FitEngine(engine="local", cpus_per_fit=1))
    slurm = materialize_folds(tmp_path / "slurm", fold_cohorts,
                              FitEngine(engine="slurm", cpus_per_fit=1, poll_s=0.5))
    assert local.success and slurm.success, failure_text(slurm)
    assert fold_metadata(slurm)["engine"] == "slurm"
    assert same_outputs(fold_outputs(tmp_path / "local"), fold_outputs(tmp_path / "slurm"))
    assert len(completed_jobs()) - before == FOLDS
    assert list((tmp_path / "slurm" / "logs" / "fits").glob("female-fold1-*.out"))


def test_a_cancelled_slurm_fit_is_named_and_the_rerun_trains_only_it(slurm_cluster,
                                                                     fold_cohorts, tmp_path):
    engine = {"engine": "slurm", "cpus_per_fit": 1, "poll_s": 0.5}
    name = f"{SEX}-fold1"
    killer = kill_fit_while_it_runs(
        name, lambda: subprocess.run(["scancel", running_job(name) or "0"], check=False),
        started=lambda: running_job(name) is not None)
    with dg.instance_for_test() as instance:
        ok, run_id, text = execute_folds(instance, tmp_path / "run", fold_cohorts, engine)
        killer.join(timeout=5)
        assert killer.killed and not ok
        assert f"1 of {FOLDS} fits lost on slurm: {SEX}/fold1" in text, text
        assert "CANCELLED" in text, text
        rerun_trains_only_fold1(instance, run_id, tmp_path, fold_cohorts, engine)
