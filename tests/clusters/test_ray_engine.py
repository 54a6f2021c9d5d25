"""The cross-fit's fold fits as Ray jobs on a real local Ray cluster."""

from __future__ import annotations

import dagster as dg
from engine_runs import (
    FOLDS,
    SEX,
    execute_folds,
    failure_text,
    fit_process_running,
    fold_metadata,
    fold_outputs,
    kill_fit_process,
    kill_fit_while_it_runs,
    materialize_folds,
    rerun_trains_only_fold1,
    same_outputs,
)

from sphr_dagster.fits import FitEngine


def ray_jobs(address: str) -> dict[str, str]:
    """The cluster's own record: each sphr job's submission id and status."""
    from ray.job_submission import JobSubmissionClient

    return {j.submission_id: str(j.status) for j in JobSubmissionClient(address).list_jobs()
            if (j.submission_id or "").startswith("sphr-")}


def test_fold_fits_run_as_ray_jobs_with_the_local_results(ray_cluster, fold_cohorts, tmp_path):
    before = ray_jobs(ray_cluster)
    local = materialize_folds(tmp_path / "local", fold_cohorts,
                              FitEngine(engine="local", cpus_per_fit=1))
    ray = materialize_folds(tmp_path / "ray", fold_cohorts,
                            FitEngine(engine="ray", cpus_per_fit=1, ray_address=ray_cluster,
                                      poll_s=0.5))
    assert local.success and ray.success, failure_text(ray)
    assert fold_metadata(ray)["engine"] == "ray"
    assert fold_metadata(ray)["trained"] == ", ".join(f"fold{k}" for k in range(FOLDS))
    assert same_outputs(fold_outputs(tmp_path / "local"), fold_outputs(tmp_path / "ray"))
    new = {k: v for k, v in ray_jobs(ray_cluster).items() if k not in before}
    assert len(new) == FOLDS and set(new.values()) == {"SUCCEEDED"}, new


def test_a_killed_ray_fit_is_named_and_the_rerun_trains_only_it(ray_cluster, fold_cohorts,
                                                                 tmp_path):
    engine = {"engine": "ray", "cpus_per_fit": 1, "ray_address": ray_cluster, "poll_s": 0.5}
    lost = f"{SEX}/fold1"
    run = tmp_path / "run"
    killer = kill_fit_while_it_runs(lost, lambda: kill_fit_process(lost, run),
                                    started=lambda: fit_process_running(lost, run))
    with dg.instance_for_test() as instance:
        ok, run_id, text = execute_folds(instance, run, fold_cohorts, engine)
        killer.join(timeout=5)
        assert killer.killed and not ok
        assert f"1 of {FOLDS} fits lost on ray: {lost}" in text, text
        rerun_trains_only_fold1(instance, run_id, tmp_path, fold_cohorts, engine)
