"""The Dagster code location: definitions, checks, schedule, sensor, one materialization."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import dagster as dg
import pandas as pd
import pytest

from sphr_dagster.automation import SETTLE_SECONDS, new_export_sensor
from sphr_dagster.definitions import ASSETS, CHECKS, defs
from sphr_dagster.resources import DataSource, default_resources


def test_definitions_load_and_validate():
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    for key in ("export/ukb_export", "ingest/baseline", "ingest/followup", "cohorts/cohort_splits",
                "cohorts/normalizer", "cohorts/augmentation", "cohorts/triplets",
                "train/sphr_model", "train/embeddings", "train/loss_comparison",
                "baselines/representations", "evaluate/tables"):
        assert key in keys
    assert {j.name for j in defs.resolve_all_job_defs()} >= {"cohort_refresh", "sphr_pipeline",
                                                              "risk_refresh", "retrain"}


@pytest.mark.parametrize("profile", ["demo", "paper"])
@pytest.mark.parametrize("losses", [True, False])
def test_run_config_names_real_ops(profile, losses):
    """`python -m sphr_dagster run` keys each asset's config by the op Dagster gives it; every
    configured asset gets one, and a selection's config names only its own ops."""
    from sphr.settings import resolve
    from sphr_dagster.definitions import INGEST, PER_SEX
    from sphr_dagster.run_config import op_configs, run_config

    settings = resolve(profile=profile, losses=losses)
    ops = {a.op.name for a in ASSETS if isinstance(a, dg.AssetsDefinition)}
    every = run_config(settings)["ops"]
    assert set(every) <= ops
    assert set(every) == {a.op.name for a in op_configs(settings)}
    per_sex = run_config(settings, PER_SEX)["ops"]
    assert "ingest" not in per_sex and "evaluate__report" not in per_sex
    assert set(run_config(settings, INGEST)["ops"]) == {"ingest"}


def test_no_losses_skips_the_comparison_asset():
    """`python -m sphr_dagster run --no-losses`: no train/loss_comparison, no loss table; the
    evaluation reads the comparison, it never trains one."""
    from sphr.settings import resolve
    from sphr_dagster.assets import evaluation, training
    from sphr_dagster.definitions import LOSS_COMPARISON, PER_SEX
    from sphr_dagster.run_config import op_configs

    graph = defs.resolve_asset_graph()
    every = {k.to_user_string() for k in PER_SEX.resolve(graph)}
    skipped = {k.to_user_string() for k in (PER_SEX - LOSS_COMPARISON).resolve(graph)}
    assert every - skipped == {"train/loss_comparison"}
    configs = op_configs(resolve(losses=False))
    assert configs[evaluation.evaluation_tables].losses == []
    assert configs[training.loss_comparison].losses  # the asset's own list is kept
    tables = graph.get(dg.AssetKey(["evaluate", "tables"]))
    assert training.loss_comparison.key in tables.parent_keys
    assert graph.get(training.loss_comparison.key).group_name == "training"


def test_schedules_target_risk_refresh_and_retrain():
    schedule = defs.resolve_schedule_def("weekly_risk_refresh")
    assert schedule.job_name == "risk_refresh"
    assert schedule.cron_schedule == "0 3 * * 1"
    import datetime

    ctx = dg.build_schedule_context(scheduled_execution_time=datetime.datetime(2026, 11, 23, 3),
                                    repository_def=defs.get_repository_def())
    requests = schedule.evaluate_tick(ctx).run_requests
    assert len(requests) == 1 and requests[0].run_key == "weekly:2026-11-23"
    monthly = defs.resolve_schedule_def("monthly_retrain")
    assert monthly.job_name == "retrain"
    assert monthly.default_status == dg.DefaultScheduleStatus.STOPPED
    requests = monthly.evaluate_tick(ctx).run_requests
    assert sorted(r.partition_key for r in requests) == ["female", "male"]
    job = defs.resolve_job_def("cohort_refresh")
    assert set(job.partitions_def.get_partition_keys()) == {"female", "male"}
    # the two chains run their steps in the run's own process (sphr_dagster.automation)
    assert [defs.resolve_job_def(j).executor_def.name for j in ("cohort_refresh", "risk_refresh",
            "sphr_pipeline")] == ["in_process", "in_process", "multiprocess"]
    selected = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert {"ingest/baseline", "cohorts/triplets"} <= selected
    assert "train/sphr_model" not in selected
    selected = {k.to_user_string() for k in
                defs.resolve_job_def("retrain").asset_layer.executable_asset_keys}
    assert {"cohorts/triplets", "train/sphr_model", "risk/risk_groups"} <= selected


def _sensor_requests(folder, cursor=None):
    ctx = dg.build_sensor_context(cursor=cursor,
                                  resources={"data_source": DataSource(watch_folder=str(folder))})
    result = new_export_sensor(ctx)
    if isinstance(result, dg.SkipReason):
        return [], cursor
    return list(result.run_requests or []), result.cursor


def _age(path, seconds=SETTLE_SECONDS + 5):
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_sensor_requests_one_refresh_per_new_file(tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    requests, cursor = _sensor_requests(folder)
    assert requests == []

    (folder / "ukb_a.csv").write_text("eid,31-0.0\n1,0\n")
    (folder / "notes.md").write_text("not an export")
    _age(folder / "ukb_a.csv")
    requests, cursor = _sensor_requests(folder, cursor)
    # one risk_refresh of the new file, keyed on the file version (content fingerprint)
    assert len(requests) == 1 and requests[0].partition_key is None
    assert all(r.run_config["resources"]["data_source"]["config"]["export_path"]
               .endswith("ukb_a.csv") for r in requests)
    first_key = requests[0].run_key

    again, _ = _sensor_requests(folder, cursor)
    assert again == []  # unchanged file: nothing

    (folder / "ukb_b.csv").write_text("eid,31-0.0\n2,1\n")
    requests, cursor3 = _sensor_requests(folder, cursor)
    assert requests == []  # still being written (too recent): wait
    _age(folder / "ukb_b.csv")
    requests, cursor3 = _sensor_requests(folder, cursor)
    assert {r.run_config["resources"]["data_source"]["config"]["export_path"].rsplit("/", 1)[-1]
            for r in requests} == {"ukb_b.csv"}

    _age(folder / "ukb_a.csv", SETTLE_SECONDS + 9)  # touched, same content: no new version
    requests, cursor3 = _sensor_requests(folder, cursor3)
    assert requests == []
    (folder / "ukb_a.csv").write_text("eid,31-0.0\n1,0\n3,1\n")  # changed content
    _age(folder / "ukb_a.csv", SETTLE_SECONDS + 1)
    requests, cursor4 = _sensor_requests(folder, cursor3)
    # one refresh of ukb_a.csv's new version: another run key than its first version's
    assert [r.run_config["resources"]["data_source"]["config"]["export_path"]
            .rsplit("/", 1)[-1] for r in requests] == ["ukb_a.csv"]
    assert requests[0].run_key != first_key and cursor4 != cursor3
    assert _sensor_requests(folder, cursor4)[0] == []  # and that version only once


def test_sensor_without_folder_skips(tmp_path):
    ctx = dg.build_sensor_context(resources={"data_source": DataSource()})
    assert isinstance(new_export_sensor(ctx), dg.SkipReason)


def _resources(run_dir, export):
    return default_resources(str(run_dir), export=str(export), environment=False)


def test_broken_export_blocks_downstream(tmp_path, synthetic_cohort):
    """An export without men: the blocking label check fails and no cohort is built."""
    from sphr.synth.cohort import SyntheticCohort
    from sphr.synth.export import write_export

    visits = synthetic_cohort.visits
    women = SyntheticCohort(visits=visits[visits["sex"] == 0], truth=synthetic_cohort.truth)
    export = write_export(women, tmp_path / "women_only.csv", "ukbconv", decoys=0)
    result = dg.materialize(
        [*ASSETS, *CHECKS],
        selection=dg.AssetSelection.groups("ingest", "cohorts"), partition_key="female",
        resources=_resources(tmp_path / "run", export), raise_on_error=False)
    assert not result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["label_counts_nonzero"] is False
    materialized = {k.to_user_string() for k in (
        e.asset_key for e in result.get_asset_materialization_events())}
    assert "ingest/baseline" in materialized
    assert not any(k.startswith("cohorts/") for k in materialized)
    assert not (tmp_path / "run" / "cohorts" / "female").exists()


def test_library_never_imports_dagster():
    code = ("import importlib, pkgutil, sys, sphr\n"
            "for m in pkgutil.walk_packages(sphr.__path__, 'sphr.'):\n"
            "    importlib.import_module(m.name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'dagster')\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_materialize_every_asset_for_one_partition(tmp_path, ukb_export):
    """Export -> evaluation tables for women, small settings; every check passes."""
    from sphr.settings import resolve
    from sphr_dagster.definitions import INGEST, PER_SEX
    from sphr_dagster.run_config import run_config

    res = _resources(tmp_path / "run", ukb_export)
    (tmp_path / "small.toml").write_text(
        '[cohorts]\nn_triplets = 4000\nfolds = 2\n[train]\nepochs = 3\nbatch_size = 512\n'
        'comparison_losses = ["triplet", "nplb"]\n[baselines]\ndeep_patient_epochs = 2\n'
        '[evaluate]\nn_splits = 2\n[evaluate.nn]\nepochs = 5\n')
    settings = resolve(tmp_path / "small.toml")
    ingest = dg.materialize([*ASSETS, *CHECKS], selection=INGEST, resources=res,
                            run_config=run_config(settings, INGEST))
    assert ingest.success
    result = dg.materialize([*ASSETS, *CHECKS], selection=PER_SEX, partition_key="female",
                            resources=res, run_config=run_config(settings, PER_SEX))
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert {(e.asset_key.path[0], e.check_name) for e in evaluations} == {
        ("cohorts", "bfh_share_plausible"), ("cohorts", "no_test_participant_in_training"),
        ("train", "embedding_finite"), ("baselines", "embedding_finite")}
    assert all(e.passed for e in evaluations)
    run = tmp_path / "run"
    assert (run / "train" / "female" / "nplb" / "model.pt").exists()
    assert (run / "train" / "female" / "comparison" / "triplet"
            / "embeddings_test.parquet").exists()
    # a partition writes only its own folders; the cross-sex asset merges them
    assert not (run / "evaluate" / "tables.md").exists()
    assert (run / "evaluate" / "female" / "representations.md").read_text().count("|") > 20
    # the cross-fit: both folds' SPHR and DeepPatient fitted, every participant out of fold
    for k in (0, 1):
        assert (run / "train" / "female" / "folds" / f"fold{k}" / "model.pt").exists()
        assert (run / "baselines" / "folds" / "female" / f"fold{k}" / "deep_patient"
                / "model.joblib").exists()
    rows = pd.read_parquet(run / "risk" / "female" / "risk_groups.parquet")
    rows = rows.loc[rows["mode"] == "calibrated"]
    assert set(rows["fold"].dropna().astype(int)) == {0, 1}
    assert (rows["partition"] == "test").all() and rows["centile"].notna().any()
    folds = pd.read_parquet(run / "cohorts" / "female" / "folds.parquet").set_index("eid")
    assert (rows.set_index("eid")["fold"].astype(int)
            == folds["fold"].reindex(rows["eid"]).to_numpy()).all()
    merged = dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups(
        "evaluation_report"), resources=res)
    assert merged.success
    assert "Women" in (run / "evaluate" / "tables.md").read_text()


def test_command_line_runs_carry_the_name_of_the_job_the_ui_offers(tmp_path, ukb_export,
                                                                    monkeypatch):
    """The main command's runs appear in the UI under ``sphr_pipeline`` (and the retrieval
    comparison under its own job), not Dagster's ``__ephemeral_asset_job__``."""
    from sphr.settings import resolve
    from sphr_dagster.definitions import INGEST, RETRIEVAL
    from sphr_dagster.runner import job_name, materialize_selection

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    settings = resolve(export=str(ukb_export), run_dir=str(tmp_path / "run"))
    assert materialize_selection(INGEST, None, settings).success
    with dg.DagsterInstance.get() as instance:
        assert [r.job_name for r in instance.get_runs()] == ["sphr_pipeline"]
    assert job_name(RETRIEVAL) == "retrieval_comparison"
    assert job_name(RETRIEVAL) in {j.name for j in defs.resolve_all_job_defs()}
