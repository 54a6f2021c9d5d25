"""Materialize asset groups in-process, or several (groups, partition) tasks side by side.

``python -m sphr_dagster run`` uses this for its middle stage: the two sex partitions
write disjoint folders (``RUN/<stage>/<sex>/``; the files that merge both sexes are
cross-sex assets that run afterwards) and the image-retrieval comparison reads
nothing of theirs, so the three run at the same time. Each worker
is a fresh (spawned) process with ``OMP_NUM_THREADS`` set to its share of the cores,
so torch, XGBoost and the Pipes training subprocess do not oversubscribe the machine.
Runs are recorded on the DAGSTER_HOME instance, as the UI's would be.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StageResult:
    groups: tuple[str, ...]
    partition: str | None
    success: bool
    run_id: str
    seconds: float


def group_selection(groups: Sequence[str], skip: Sequence[str] = ()) -> Any:
    """Every asset of ``groups`` but the asset keys in ``skip`` (``train/loss_comparison``)."""
    import dagster as dg

    selection = dg.AssetSelection.groups(*groups)
    if skip:
        selection = selection - dg.AssetSelection.assets(
            *(dg.AssetKey.from_user_string(k) for k in skip))
    return selection


def materialize_groups(groups: Sequence[str], partition: str | None = None,
                       run_config: Mapping[str, Any] | None = None,
                       tags: Mapping[str, str] | None = None,
                       log_level: str = "INFO", skip: Sequence[str] = ()) -> StageResult:
    """Materialize every asset (and check) of ``groups`` for one partition, on the instance
    of DAGSTER_HOME, with the resources of the environment (``SPHR_RUN_DIR``, ...).
    ``skip``: asset keys (``train/loss_comparison``) of those groups to leave out."""
    import dagster as dg

    from sphr_dagster.definitions import ASSETS, CHECKS, defs
    from sphr_dagster.resources import default_resources

    t0 = time.perf_counter()
    assets = [*ASSETS, *CHECKS]
    selection = group_selection(groups, skip)
    keys = selection.resolve(defs.resolve_asset_graph())
    # source assets (the observed export file) have no op to configure
    ops = {a.op.name for a in assets if isinstance(a, dg.AssetsDefinition) and a.keys & keys}
    config = {"ops": {k: v for k, v in (run_config or {}).get("ops", {}).items() if k in ops},
              # Dagster's own step events are DEBUG; the assets' messages are INFO
              "loggers": {"console": {"config": {"log_level": log_level}}}}
    result = dg.materialize(assets, selection=selection, partition_key=partition,
                            instance=dg.DagsterInstance.get(),
                            resources=default_resources(os.environ.get("SPHR_RUN_DIR")),
                            run_config=config, raise_on_error=False, tags=dict(tags or {}))
    return StageResult(tuple(groups), partition, result.success, result.run_id,
                       round(time.perf_counter() - t0, 1))


def _worker_init(threads: int) -> None:
    # before torch / XGBoost initialise their thread pools in this fresh process
    os.environ["OMP_NUM_THREADS"] = str(threads)
    # progress bars of processes side by side would overwrite each other's lines: the
    # assets' log messages say what each is doing
    os.environ.setdefault("SPHR_PROGRESS", "0")


def _in_worker(groups: Sequence[str], partition: str | None, **kwargs: Any) -> StageResult:
    try:
        return materialize_groups(groups, partition, **kwargs)
    finally:
        # joblib's loky workers (the evaluation's parallel fits) idle for 5 minutes before
        # they exit, and this worker process waits for its children when it exits
        from joblib.externals.loky import reusable_executor

        if reusable_executor._executor is not None:
            reusable_executor._executor.shutdown(wait=True)


def materialize_side_by_side(tasks: Sequence[tuple[Sequence[str], str | None]], *,
                             workers: int = 2, threads: int | None = None, spawn: bool = False,
                             **kwargs: Any) -> list[StageResult]:
    """:func:`materialize_groups` for each ``(groups, partition)`` task, ``workers`` at a time,
    each in a fresh process with ``threads`` CPU threads (default: its share of the cores).
    ``workers=1`` runs them one after the other, in this process unless ``spawn``. The tasks
    must not write the same files (Dagster does not check this: the assets' folders do)."""
    if (workers <= 1 or len(tasks) <= 1) and not spawn:
        return [materialize_groups(groups, p, **kwargs) for groups, p in tasks]
    workers = max(1, min(workers, len(tasks)))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    # spawn, not fork: the parent may hold torch / Dagster threads and open SQLite handles
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(threads or max(1, cores // workers),)) as pool:
        futures = [pool.submit(_in_worker, groups, p, **kwargs) for groups, p in tasks]
        return [f.result() for f in futures]


def materialize_partitions(groups: Sequence[str], partitions: Sequence[str], **kwargs: Any
                           ) -> list[StageResult]:
    """The same asset groups for several partitions, side by side."""
    return materialize_side_by_side([(groups, p) for p in partitions], **kwargs)
