"""Jobs, the weekly cohort refresh schedule and the new-export sensor."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg

from pipeline.resources import DataSource
from sphr.labels import SEXES

#: files the sensor treats as exports (the reader auto-detects the format)
EXPORT_SUFFIXES = (".csv", ".tsv", ".tab", ".txt", ".parquet")
#: a file modified more recently than this may still be being copied: wait
SETTLE_SECONDS = 30

cohort_refresh = dg.define_asset_job(
    "cohort_refresh",
    selection=dg.AssetSelection.groups("ingest", "cohorts"),
    description="Re-read the export and rebuild one sex's cohorts (splits, normalizer, BFH "
    "augmentation, triplets).",
)

sphr_pipeline = dg.define_asset_job(
    "sphr_pipeline",
    selection=dg.AssetSelection.groups("ingest", "cohorts", "training", "baselines", "evaluation",
                                       "risk"),
    description="Everything for one sex: export to risk groups.",
)

@dg.schedule(job=cohort_refresh, cron_schedule="0 3 * * 1", name="weekly_cohort_refresh",
             description="Every Monday 03:00: refresh both sexes' cohorts from the configured "
             "export.")
def weekly_cohort_refresh(context: dg.ScheduleEvaluationContext):
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [dg.RunRequest(run_key=f"weekly:{day}:{sex}", partition_key=sex) for sex in SEXES]


def _exports(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix.lower() in EXPORT_SUFFIXES
                  and not p.name.startswith(".") and not p.name.endswith(".truth.parquet"))


@dg.sensor(job=cohort_refresh, minimum_interval_seconds=60,
           description="Refresh both sexes' cohorts when a new or changed export file appears in "
           "the data source's watch_folder (each file version triggers once).")
def new_export_sensor(context: dg.SensorEvaluationContext, data_source: DataSource):
    if not data_source.watch_folder:
        return dg.SkipReason("no watch_folder configured on the data_source resource")
    folder = Path(data_source.watch_folder).expanduser()
    if not folder.is_dir():
        return dg.SkipReason(f"watch folder {folder} does not exist")
    # cursor: file -> "mtime_ns:size" of the version already requested
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    now = time.time()
    requests = []
    for path in _exports(folder):
        st = path.stat()
        stamp = f"{st.st_mtime_ns}:{st.st_size}"
        if seen.get(str(path)) == stamp or now - st.st_mtime < SETTLE_SECONDS:
            continue
        seen[str(path)] = stamp
        config = {"resources": {"data_source": {"config": {"export_path": str(path.resolve())}}}}
        requests += [dg.RunRequest(run_key=f"{path.name}:{stamp}:{sex}", partition_key=sex,
                                   run_config=config, tags={"sphr/export": path.name})
                     for sex in SEXES]
    if not requests:
        return dg.SkipReason(f"no new or changed export in {folder}")
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(seen, sort_keys=True))
