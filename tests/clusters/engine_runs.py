"""What the engine tests share: the cross-fit's fold fits of one sex through a fit engine,
their outputs, and a fit killed while it runs."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import dagster as dg
import numpy as np

from sphr.artifacts import read_embeddings
from sphr_dagster.definitions import ASSETS, CHECKS
from sphr_dagster.fits import FitEngine
from sphr_dagster.resources import default_resources

SEX = "female"
FOLDS = 3


def materialize_folds(run: Path, cohorts: Path, engine: FitEngine,
                      epochs: int = 3) -> dg.ExecuteInProcessResult:
    """train/fold_models of one sex on ``engine``, the cohort linked into ``run``."""
    from sphr_dagster.assets.training import fold_models

    link = run / "cohorts" / SEX
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(cohorts / SEX)
    resources = {**default_resources(str(run), environment=False), "fit_engine": engine}
    return dg.materialize(
        [*ASSETS, *CHECKS], selection=dg.AssetSelection.assets(["train", "fold_models"]),
        partition_key=SEX, resources=resources, raise_on_error=False,
        run_config={"ops": {fold_models.op.name: {"config": {"epochs": epochs,
                                                              "batch_size": 256}}}})


def fold_outputs(run: Path) -> dict[str, tuple[np.ndarray, float]]:
    """Each fold model's held-out embeddings and final loss."""
    out = {}
    for k in range(FOLDS):
        folder = run / "train" / SEX / "folds" / f"fold{k}"
        _, Z = read_embeddings(folder / "embeddings_test.parquet")
        report = json.loads((folder / "train_report.json").read_text())
        out[f"fold{k}"] = (Z, report["final_loss"])
    return out


def same_outputs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k][0], b[k][0]) and a[k][1] == b[k][1] for k in a)


def fold_metadata(result: dg.ExecuteInProcessResult) -> dict:
    event = next(e for e in result.get_asset_materialization_events()
                 if e.asset_key == dg.AssetKey(["train", "fold_models"]))
    return {k: v.value for k, v in event.materialization.metadata.items()}


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    return " ".join(str(e.step_failure_data.error.message) if e.step_failure_data.error else ""
                    for e in result.all_events if e.is_step_failure)


def kill_fit_while_it_runs(fit: str, kill: callable, *, started: callable,
                           settle_s: float = 1.0, timeout_s: float = 180) -> threading.Thread:
    """In the background: once ``started()`` says the fit runs, wait ``settle_s`` and call
    ``kill()``; the thread's ``killed`` attribute says whether it did."""
    def watch() -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if started():
                time.sleep(settle_s)
                kill()
                thread.killed = True
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True, name=f"kill {fit}")
    thread.killed = False
    thread.start()
    return thread


def fit_pattern(fit: str, run: Path) -> str:
    """The command line of ``fit`` writing under ``run`` (pgrep's -f, extended regex): this
    test's process only, not the same fit of a run elsewhere on the machine."""
    return f"--fit {fit} .*" + str(run).replace(".", r"\.")


def fit_process_running(fit: str, run: Path) -> bool:
    found = subprocess.run(["pgrep", "-f", "--", fit_pattern(fit, run)], capture_output=True)
    return found.returncode == 0


def kill_fit_process(fit: str, run: Path) -> None:
    subprocess.run(["pkill", "-9", "-f", "--", fit_pattern(fit, run)], check=False)


#: what :func:`fold_job` reads: the run directory and the engine's fields (JSON)
JOB_ENV = "SPHR_TEST_FOLD_JOB"


def fold_job() -> dg.JobDefinition:
    """train/fold_models as a job of its own, for Dagster's re-execution (which reloads the
    job by reference: :func:`dagster.reconstructable`); run dir and engine from ``JOB_ENV``.
    Dagster keeps a loaded job per reference for the process, so each engine's tests load it
    through a reference of their own (:data:`FOLD_JOBS`)."""
    spec = json.loads(os.environ[JOB_ENV])
    resources = {**default_resources(spec["run"], environment=False),
                 "fit_engine": FitEngine(**spec["engine"])}
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources=resources, jobs=[
        dg.define_asset_job("fold_fits", selection=dg.AssetSelection.assets(
            ["train", "fold_models"]), executor_def=dg.in_process_executor)])
    return defs.resolve_job_def("fold_fits")


def ray_fold_job() -> dg.JobDefinition:
    return fold_job()


def slurm_fold_job() -> dg.JobDefinition:
    return fold_job()


#: the job reference of each engine's tests
FOLD_JOBS = {"ray": ray_fold_job, "slurm": slurm_fold_job, "local": fold_job}


def execute_folds(instance: dg.DagsterInstance, run: Path, cohorts: Path, engine: dict,
                  epochs: int = 3, from_failure_of: str | None = None) -> tuple[bool, str, str]:
    """The fold fits as a Dagster job run on ``instance`` (or, given a failed run's id,
    Dagster's "re-execute from failure" of it): (success, run id, failure text)."""
    from sphr_dagster.assets.training import fold_models

    link = run / "cohorts" / SEX
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(cohorts / SEX)
    os.environ[JOB_ENV] = json.dumps({"run": str(run), "engine": engine})
    options = (dg.ReexecutionOptions.from_failure(from_failure_of, instance)
               if from_failure_of else None)
    with dg.execute_job(
            dg.reconstructable(FOLD_JOBS[engine["engine"]]), instance, raise_on_error=False,
            reexecution_options=options, tags={"dagster/partition": SEX},
            run_config=None if options else {"ops": {fold_models.op.name: {"config": {
                "epochs": epochs, "batch_size": 256}}}}) as result:
        text = " ".join(str(e.step_failure_data.error.message)
                        for e in result.all_events
                        if e.is_step_failure and e.step_failure_data.error)
        return result.success, result.run_id, text


def reexecuted_fits(instance: dg.DagsterInstance) -> dict[str, str]:
    """What the latest fold_models materialization on ``instance`` trained and kept."""
    record = instance.fetch_materializations(dg.AssetKey(["train", "fold_models"]),
                                             limit=1).records[0]
    meta = record.asset_materialization.metadata
    return {"trained": meta["trained"].value, "kept": meta["kept"].value}


def rerun_trains_only_fold1(instance: dg.DagsterInstance, run_id: str, tmp_path: Path,
                            cohorts: Path, engine: dict) -> None:
    """After ``run_id`` lost fold1: Dagster's "re-execute from failure" of that run launches
    the lost fit alone, and the run's files are then an uninterrupted run's."""
    ok, _, text = execute_folds(instance, tmp_path / "run", cohorts, engine,
                                from_failure_of=run_id)
    assert ok, text
    assert reexecuted_fits(instance) == {"trained": "fold1", "kept": "fold0, fold2"}
    whole = materialize_folds(tmp_path / "whole", cohorts, FitEngine(**engine))
    assert whole.success
    assert same_outputs(fold_outputs(tmp_path / "run"), fold_outputs(tmp_path / "whole"))
