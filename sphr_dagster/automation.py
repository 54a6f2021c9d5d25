"""Jobs (risk_refresh, retrain, ...), their schedules and the new-export sensor."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg

from sphr.labels import SEXES
from sphr_dagster.resources import DataSource, RunStorage

#: files the sensor treats as exports (the reader auto-detects the format)
EXPORT_SUFFIXES = (".csv", ".tsv", ".tab", ".txt", ".parquet")
#: a file modified more recently than this may still be being copied: wait
SETTLE_SECONDS = 30
#: the executor of the jobs whose steps form one chain (each needs the one before): the default
#: multiprocess executor starts each step in a fresh process that imports the code location
#: again, 4-7 s a step, for nothing to run beside it (a risk_refresh launched in the UI on the
#: tests' 2,000-participant export: 28 s, of which its three steps computed 4 s; 9.6 s in one
#: process; docs/BENCHMARKS.md)
CHAIN_EXECUTOR = dg.in_process_executor

cohort_refresh = dg.define_asset_job(
    "cohort_refresh",
    selection=dg.AssetSelection.groups("ingest", "cohorts"),
    description="Re-read the export and rebuild one sex's cohorts (splits, normalizer, BFH "
    "augmentation, triplets).",
    executor_def=CHAIN_EXECUTOR,
)

sphr_pipeline = dg.define_asset_job(
    "sphr_pipeline",
    selection=dg.AssetSelection.groups("ingest", "cohorts", "training", "baselines", "evaluation",
                                       "risk"),
    description="Everything for one sex: export to risk groups.",
    # steps in their own processes: training (Pipes) and the baselines run side by side
    executor_def=dg.multiprocess_executor.configured({"max_concurrent": 2}),
)

retrieval_comparison = dg.define_asset_job(
    "retrieval_comparison",
    selection=dg.AssetSelection.groups("retrieval"),
    description="The image-retrieval loss comparison (AdaTriplet + AutoMargin, DAMS, OCAM, "
    "NPLB) on its synthetic images; reads neither sex's folders.",
    executor_def=CHAIN_EXECUTOR,
)

risk_refresh = dg.define_asset_job(
    "risk_refresh",
    selection=dg.AssetSelection.groups("refresh"),
    description="Re-score everyone in the export with the current model (nothing refitted): "
    "ingest, blocking drift check, RUN/risk/refresh/<export-version>/ with the changes since "
    "the previous refresh.",
    executor_def=CHAIN_EXECUTOR,
)

retrain = dg.define_asset_job(
    "retrain",
    selection=dg.AssetSelection.groups("ingest", "cohorts", "training", "baselines",
                                       "evaluation", "risk"),
    description="Rebuild one sex's cohorts and models from the export (manual, or the monthly "
    "schedule, off by default); then materialize risk/risk_report to merge the sexes into the "
    "model that risk_refresh uses.",
)


@dg.schedule(job=risk_refresh, cron_schedule="0 3 * * 1", name="weekly_risk_refresh",
             description="Every Monday 03:00: re-score the configured export with the current "
             "model.")
def weekly_risk_refresh(context: dg.ScheduleEvaluationContext):
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return dg.RunRequest(run_key=f"weekly:{day}")


@dg.schedule(job=retrain, cron_schedule="0 2 1 * *", name="monthly_retrain",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="First of the month 02:00: rebuild cohorts and models for both sexes. "
             "Off by default: turn it on in the UI.")
def monthly_retrain(context: dg.ScheduleEvaluationContext):
    month = context.scheduled_execution_time.strftime("%Y-%m")
    return [dg.RunRequest(run_key=f"monthly:{month}:{sex}", partition_key=sex) for sex in SEXES]


def _exports(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix.lower() in EXPORT_SUFFIXES
                  and not p.name.startswith(".") and not p.name.endswith(".truth.parquet"))


@dg.sensor(job=risk_refresh, minimum_interval_seconds=60,
           description="Run risk_refresh when a new or changed export file appears in the data "
           "source's watch_folder: once per file version (content fingerprint), recorded as an "
           "observation of export/ukb_export_file.")
def new_export_sensor(context: dg.SensorEvaluationContext, data_source: DataSource):
    from sphr.data.fingerprint import fingerprint, stat_key

    if not data_source.watch_folder:
        return dg.SkipReason("no watch_folder configured on the data_source resource")
    folder = Path(data_source.watch_folder).expanduser()
    if not folder.is_dir():
        return dg.SkipReason(f"watch folder {folder} does not exist")
    # cursor: file -> {"stat": "size:mtime_ns", "version": fingerprint} of what was requested;
    # an unchanged stat skips re-hashing, a touched file with the same content is no new version
    seen: dict[str, dict] = json.loads(context.cursor) if context.cursor else {}
    now = time.time()
    requests, observations = [], []
    for path in _exports(folder):
        key, st = str(path), path.stat()
        before = seen.get(key) if isinstance(seen.get(key), dict) else None
        if (before and before["stat"] == stat_key(path)) or now - st.st_mtime < SETTLE_SECONDS:
            continue
        version = fingerprint(path)
        seen[key] = {"stat": stat_key(path), "version": version}
        if before and before["version"] == version:
            continue
        config = {"resources": {"data_source": {"config": {"export_path": str(path.resolve())}}}}
        requests.append(dg.RunRequest(run_key=f"{path.name}:{version}", run_config=config,
                                      tags={"sphr/export": path.name,
                                            "sphr/export_version": version}))
        observations.append(dg.AssetObservation(
            asset_key=["export", "ukb_export_file"],
            metadata={"data_version": version,
                      "path": dg.MetadataValue.path(str(path.resolve())),
                      "size_mb": round(st.st_size / 2**20, 2)},
            tags={"dagster/data_version": version}))
    if not requests:
        return dg.SensorResult(skip_reason=f"no new export version in {folder}",
                               cursor=json.dumps(seen, sort_keys=True))
    return dg.SensorResult(run_requests=requests, asset_events=observations,
                           cursor=json.dumps(seen, sort_keys=True))


#: the jobs that run unattended (schedules, the sensor): their failures are recorded as the
#: main command records its own
UNATTENDED_JOBS = (risk_refresh, retrain, cohort_refresh)
#: the run tag that carries a failed run's first reason into the UI's run list
FAILURE_TAG = "sphr/failed_because"


def job_failed_file(run_dir: Path, job: str) -> Path:
    """Where a job's last failure is recorded: ``RUN/logs/<job>_failed.json``."""
    from sphr_dagster.failures import LOG_DIR

    return run_dir / LOG_DIR / f"{job}_failed.json"


def _run_dir(run: dg.DagsterRun, storage: RunStorage) -> Path:
    """The run directory the failed run wrote to: its own run config's, else the resource's."""
    config = (run.run_config or {}).get("resources", {}).get("storage", {}).get("config", {})
    return Path(config.get("root") or storage.root).expanduser().resolve()


@dg.run_failure_sensor(monitored_jobs=list(UNATTENDED_JOBS), name="unattended_failure_reason",
                       default_status=dg.DefaultSensorStatus.RUNNING,
                       description="When a scheduled or sensor-started job fails: each failed "
                       "step's one-line reason (the library's message for bad input, else the "
                       "error's type and message) as the run's sphr/failed_because tag and in "
                       "RUN/logs/<job>_failed.json, as the main command reports its own.")
def unattended_failure_reason(context: dg.RunFailureSensorContext, storage: RunStorage):
    from sphr_dagster.failures import failure_record, step_failures, write_failed

    run = context.dagster_run
    failures = step_failures(context.instance, run.run_id)
    lines = [f"{f.step}: {f.line()}" for f in failures] or [
        " ".join((context.failure_event.message or "the run failed").split())]
    write_failed(job_failed_file(_run_dir(run, storage), run.job_name),
                 [failure_record(run.job_name, run.tags.get("dagster/partition"), run.run_id,
                                 None, failures)])
    context.instance.add_run_tags(run.run_id, {FAILURE_TAG: lines[0][:1000]})
    for line in lines:
        context.log.info(f"{run.job_name} run {run.run_id}: {line}")


@dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS,
                      monitored_jobs=list(UNATTENDED_JOBS), name="unattended_success",
                      default_status=dg.DefaultSensorStatus.RUNNING,
                      description="When such a job succeeds, its earlier failure record goes, so "
                      "RUN/logs/<job>_failed.json always speaks of the latest run.")
def unattended_success(context: dg.RunStatusSensorContext, storage: RunStorage):
    run = context.dagster_run
    job_failed_file(_run_dir(run, storage), run.job_name).unlink(missing_ok=True)
