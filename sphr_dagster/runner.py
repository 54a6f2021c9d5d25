"""Materialize asset selections in-process, or several (selection, partition) tasks side by side.

``python -m sphr_dagster run`` uses this for its middle stage: the two sex partitions
write disjoint folders (``RUN/<stage>/<sex>/``; the files that merge both sexes are
cross-sex assets that run afterwards) and the image-retrieval comparison reads
nothing of theirs, so the three run at the same time. Each worker
is a fresh (spawned) process with ``OMP_NUM_THREADS`` set to its share of the cores,
so torch, XGBoost and the Pipes training subprocess do not oversubscribe the machine.
Runs are recorded on the DAGSTER_HOME instance, as the UI's would be. What a run
materializes comes from the defined selections (:mod:`sphr_dagster.definitions`), its
resources and run config from the run's settings (:mod:`sphr.settings`): a worker gets the
settings, not environment variables.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sphr_dagster.failures import StepFailure, log_to, step_failures

if TYPE_CHECKING:
    from sphr.settings import RunSettings


@dataclass(frozen=True)
class StageResult:
    name: str
    partition: str | None
    success: bool
    run_id: str
    seconds: float
    #: why it failed, one entry per failed step (empty when it succeeded)
    failures: tuple[StepFailure, ...] = ()
    #: the file its console output went to (None: the terminal)
    log: str | None = None


def materialize_selection(selection: Any, partition: str | None, settings: RunSettings, *,
                          name: str = "", tags: Mapping[str, str] | None = None,
                          log_dir: str | os.PathLike | None = None) -> StageResult:
    """Materialize the assets (and checks) of ``selection`` for one partition on the instance
    of DAGSTER_HOME, with the resources and run config of ``settings``; with ``log_dir``, its
    console output goes to ``log_dir/<name>.log`` instead of the terminal."""
    import traceback

    t0 = time.perf_counter()
    log = None if log_dir is None else os.path.join(log_dir, f"{name or partition or 'run'}.log")
    with log_to(log):
        try:
            success, run_id, failures = _materialize(selection, partition, settings, tags)
        except Exception as exc:  # a run that could not start (its config, its instance)
            traceback.print_exc()
            success, run_id = False, ""
            failures = (StepFailure("run", type(exc).__name__, str(exc)),)
    return StageResult(name, partition, success, run_id, round(time.perf_counter() - t0, 1),
                       failures, log)


def job_name(selection: Any) -> str:
    """The defined job (:mod:`sphr_dagster.definitions`) whose assets ``selection`` is part
    of: ``retrieval_comparison`` for the image-retrieval comparison, else ``sphr_pipeline``."""
    from sphr_dagster.definitions import RETRIEVAL

    return "retrieval_comparison" if selection is RETRIEVAL else "sphr_pipeline"


def _materialize(selection: Any, partition: str | None, settings: RunSettings,
                 tags: Mapping[str, str] | None) -> tuple[bool, str, tuple[StepFailure, ...]]:
    import dagster as dg

    from sphr_dagster.config import PROFILE_TAG
    from sphr_dagster.definitions import ASSETS, CHECKS
    from sphr_dagster.resources import run_resources
    from sphr_dagster.run_config import run_config

    instance = dg.DagsterInstance.get()
    # the run carries the name of the job the UI offers for these assets (not Dagster's
    # __ephemeral_asset_job__), its steps in this process as before
    name = job_name(selection)
    job = dg.define_asset_job(name, selection=selection, executor_def=dg.in_process_executor)
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, jobs=[job],
                          resources=run_resources(settings))
    result = defs.resolve_job_def(name).execute_in_process(
        run_config=run_config(settings, selection, log_level=settings.log_level),
        instance=instance, partition_key=partition, raise_on_error=False,
        tags={PROFILE_TAG: settings.profile, **dict(tags or {})})
    failures = () if result.success else tuple(step_failures(instance, result.run_id))
    return result.success, result.run_id, failures


def _worker_init(threads: int) -> None:
    # before torch / XGBoost initialise their thread pools in this fresh process
    os.environ["OMP_NUM_THREADS"] = str(threads)
    # progress bars of processes side by side would overwrite each other's lines: the
    # assets' log messages say what each is doing
    os.environ.setdefault("SPHR_PROGRESS", "0")


def _in_worker(selection: Any, partition: str | None, settings: RunSettings,
               **kwargs: Any) -> StageResult:
    try:
        return materialize_selection(selection, partition, settings, **kwargs)
    finally:
        # joblib's loky workers (the evaluation's parallel fits) idle for 5 minutes before
        # they exit, and this worker process waits for its children when it exits
        from joblib.externals.loky import reusable_executor

        if reusable_executor._executor is not None:
            reusable_executor._executor.shutdown(wait=True)


def materialize_side_by_side(tasks: Sequence[tuple[Any, str | None, str]], settings: RunSettings,
                             *, workers: int = 2, threads: int | None = None, spawn: bool = False,
                             tags: Mapping[str, str] | None = None,
                             log_dir: str | os.PathLike | None = None) -> list[StageResult]:
    """:func:`materialize_selection` for each ``(selection, partition, name)`` task, ``workers``
    at a time, each in a fresh process with ``threads`` CPU threads (default: its share of the
    cores). ``workers=1`` runs them one after the other, in this process unless ``spawn``. The
    tasks must not write the same files (Dagster does not check this: the assets' folders do).
    ``log_dir``: each task's console output goes to ``log_dir/<name>.log``."""
    if (workers <= 1 or len(tasks) <= 1) and not spawn:
        return [materialize_selection(sel, p, settings, name=name, tags=tags, log_dir=log_dir)
                for sel, p, name in tasks]
    workers = max(1, min(workers, len(tasks)))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    # spawn, not fork: the parent may hold torch / Dagster threads and open SQLite handles
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(threads or max(1, cores // workers),)) as pool:
        futures = [pool.submit(_in_worker, sel, p, settings, name=name, tags=tags,
                               log_dir=log_dir)
                   for sel, p, name in tasks]
        return [f.result() for f in futures]


def materialize_partitions(selection: Any, partitions: Sequence[str], settings: RunSettings,
                           **kwargs: Any) -> list[StageResult]:
    """The same selection for several partitions, side by side."""
    return materialize_side_by_side([(selection, p, p) for p in partitions], settings, **kwargs)
