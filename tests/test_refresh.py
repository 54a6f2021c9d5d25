"""risk_refresh: versioned export, re-scoring without refit, changes table, imputation, drift."""

from __future__ import annotations

import json
import os
import time

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from test_risk import _cli, write_small_deep_models

from sphr.data.fingerprint import fingerprint, stat_key, tree_sha256
from sphr_dagster.automation import SETTLE_SECONDS, new_export_sensor
from sphr_dagster.definitions import ASSETS, CHECKS, defs
from sphr_dagster.resources import DataSource, default_resources

# ----------------------------------------------------------------------------- fingerprint

def test_fingerprint_is_content_not_mtime(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("eid,31-0.0\n1,0\n2,1\n")
    v = fingerprint(f)
    assert v.startswith("full-")
    s = stat_key(f)
    os.utime(f, (time.time() - 100, time.time() - 100))
    assert fingerprint(f) == v and stat_key(f) != s  # touched: same version
    f.write_text("eid,31-0.0\n1,0\n2,0\n")
    assert fingerprint(f) != v
    big = tmp_path / "big.csv"
    big.write_bytes(b"eid,31-0.0\n" + b"1,0\n" * 2_000_000)
    sampled = fingerprint(big, full_hash_limit=2**20)
    assert sampled.startswith("sampled-")
    big.write_bytes(b"eid,31-0.1\n" + b"1,0\n" * 2_000_000)  # header changed
    assert fingerprint(big, full_hash_limit=2**20) != sampled


# ----------------------------------------------------------------------------- a fitted RUN

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, ingest_dir, cohorts_dir):
    """RUN with the fixture ingest (baseline and follow-up only) and cohorts, a tiny
    DeepPatient, a small real SPHR (test_risk's) and ``sphr risk``'s model."""
    run = tmp_path_factory.mktemp("refresh_run")
    (run / "ingest").mkdir()
    for name in ("baseline.parquet", "followup.parquet", "ingest_report.json"):
        if (ingest_dir / name).exists():
            (run / "ingest" / name).symlink_to(ingest_dir / name)
    (run / "cohorts").symlink_to(cohorts_dir)
    write_small_deep_models(run, cohorts_dir)
    assert _cli(["risk", str(run), "--bootstrap", "20", "--methods",
                 "raw_euclidean,mahalanobis,deep_patient,sphr,phenoage"]) == 0
    return run


@pytest.fixture(scope="module")
def risk_out(run_dir):
    return run_dir / "risk"


# ----------------------------------------------------------------------------- exports

def _cohort(visits, truth, linked=None):
    from sphr.synth.cohort import SyntheticCohort

    try:
        return SyntheticCohort(visits, truth, linked)
    except TypeError:  # pragma: no cover - older SyntheticCohort without linked records
        return SyntheticCohort(visits, truth)


@pytest.fixture(scope="module")
def exports(tmp_path_factory, synthetic_cohort):
    """Export A (the fitted cohort's 2,000) and B: 50 removed, 100 new, values changed for 200."""
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import write_export

    folder = tmp_path_factory.mktemp("exports")
    a = write_export(synthetic_cohort, folder / "ukb_a.csv", "ukbconv", decoys=0, seed=11)
    visits, truth = synthetic_cohort.visits, synthetic_cohort.truth
    eids = np.sort(truth["eid"].unique())
    rng = np.random.default_rng(5)
    removed = rng.choice(eids, 50, replace=False)
    extra = generate_cohort(160, seed=99)
    fresh = [e for e in extra.truth["eid"].unique() if e not in set(eids)][:100]
    changed = rng.choice(np.setdiff1d(eids, removed), 200, replace=False)
    v = visits[~visits["eid"].isin(removed)].copy()
    hit = v["eid"].isin(changed)
    for col in ("glucose", "crp", "bmi"):
        v.loc[hit, col] = v.loc[hit, col] * 1.6
    v = pd.concat([v, extra.visits[extra.visits["eid"].isin(fresh)]], ignore_index=True) \
        .sort_values(["eid", "instance"], ignore_index=True)  # the writer wants eids in order
    t = pd.concat([truth[~truth["eid"].isin(removed)], extra.truth[extra.truth["eid"].isin(fresh)]],
                  ignore_index=True).sort_values("eid", ignore_index=True)
    b = write_export(_cohort(v, t), folder / "ukb_b.csv", "ukbconv", decoys=0, seed=12)
    mg = synthetic_cohort.visits.assign(glucose=synthetic_cohort.visits["glucose"] * 18.016)
    mgdl = write_export(_cohort(mg, truth), folder / "mgdl" / "ukb_mgdl.csv", "ukbconv",
                        decoys=0, seed=11)
    return {"a": a, "b": b, "mgdl": mgdl, "removed": set(removed.tolist()),
            "new": set(int(e) for e in fresh), "folder": folder}


def _resources(run, export):
    return default_resources(str(run), export=str(export), environment=False)


def _refresh(run, export):
    return dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups("refresh"),
                          resources=_resources(run, export), raise_on_error=False)


def _age(path, seconds=SETTLE_SECONDS + 5):
    t = time.time() - seconds
    os.utime(path, (t, t))


def _sensor(folder, cursor):
    ctx = dg.build_sensor_context(cursor=cursor,
                                  resources={"data_source": DataSource(watch_folder=str(folder))})
    result = new_export_sensor(ctx)
    return list(result.run_requests or []), result.cursor, result


# ----------------------------------------------------------------------------- the refresh

def test_refresh_rescores_reports_changes_and_keeps_the_model(risk_out, run_dir, exports,
                                                              tmp_path):
    model = run_dir / "risk" / "model"
    before = tree_sha256(model)
    watch = tmp_path / "watch"
    watch.mkdir()
    # the sensor: exactly one risk_refresh per file version
    (watch / "ukb.csv").write_bytes(exports["a"].read_bytes())
    _age(watch / "ukb.csv")
    requests, cursor, result = _sensor(watch, None)
    assert len(requests) == 1 and requests[0].job_name in (None, "risk_refresh")
    assert result.asset_events and result.asset_events[0].tags["dagster/data_version"] == \
        fingerprint(exports["a"])
    assert _sensor(watch, cursor)[0] == []
    _age(watch / "ukb.csv", SETTLE_SECONDS + 50)  # touched, same content: no new version
    again, cursor, _ = _sensor(watch, cursor)
    assert again == []

    result = _refresh(run_dir, requests[0].run_config["resources"]["data_source"]["config"]
                      ["export_path"])
    assert result.success
    root = run_dir / "risk" / "refresh"
    va, vb = fingerprint(exports["a"]), fingerprint(exports["b"])
    first = pd.read_csv(root / va / "risk_group_export.csv")

    (watch / "ukb.csv").write_bytes(exports["b"].read_bytes())
    _age(watch / "ukb.csv")
    requests, cursor, _ = _sensor(watch, cursor)
    assert len(requests) == 1 and requests[0].tags["sphr/export_version"] == vb
    assert _sensor(watch, cursor)[0] == []
    result = _refresh(run_dir, exports["b"])
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["export_drift"].passed or checks["export_drift"].severity == \
        dg.AssetCheckSeverity.WARN
    assert "per_feature" in checks["export_drift"].metadata

    second = pd.read_csv(root / vb / "risk_group_export.csv")
    unscorable = pd.read_csv(root / vb / "unscorable.csv")
    assert (root / va / "report.html").is_file()  # earlier refresh kept
    ids = set(second["eid"])
    assert not ids & exports["removed"]
    assert exports["new"] <= ids | set(unscorable["eid"])
    assert exports["new"] & ids
    report = (root / vb / "report.md").read_text()
    assert "Changes since the previous refresh" in report and va in report
    ch = pd.read_csv(root / vb / "changes.csv")
    counts = ch["change"].value_counts()
    prev, now = set(first["eid"]), ids
    assert counts.get("new", 0) == len(now - prev)
    assert counts.get("left", 0) == len(prev - now)
    both = first.merge(second, on="eid", suffixes=("_a", "_b"))
    assert counts.get("moved", 0) == int((both["group_a"] != both["group_b"]).sum())
    assert set(ch.loc[ch["change"] == "new", "eid"]) >= exports["new"] & ids
    assert set(ch.loc[ch["change"] == "left", "eid"]) <= exports["removed"]
    meta = next(e.materialization.metadata for e in result.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey(["risk", "refresh"]))
    assert meta["previous_version"].value == va
    assert tree_sha256(model) == before  # no model file touched


def test_unit_shifted_export_is_blocked_before_scoring(risk_out, run_dir, exports):
    result = _refresh(run_dir, exports["mgdl"])
    assert not result.success
    check = {e.check_name: e for e in result.get_asset_check_evaluations()}["export_drift"]
    assert check.passed is False and check.severity == dg.AssetCheckSeverity.ERROR
    assert "glucose" in check.metadata["unit_mistakes"].value
    assert not (run_dir / "risk" / "refresh" / fingerprint(exports["mgdl"])).exists()
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert "risk/refresh" not in materialized


def test_missing_features_are_imputed_from_the_model_only(risk_out, run_dir, cohorts_dir):
    """A participant with missing features is scored and flagged; the imputed value is the
    training partition's median (what the normalizer kept), whatever the test data hold."""
    from sphr.cohorts.normalize import QuantileNormalizer
    from sphr.risk.impute import training_medians
    from sphr.risk.model import RiskModel, find_model_dir

    baseline = pd.read_parquet(run_dir / "ingest" / "baseline.parquet")
    model = find_model_dir(run_dir)
    norm = QuantileNormalizer.load(model / "female" / "normalizer.json")
    women = baseline[baseline["sex"] == 0]
    complete = women[women[norm.features_].notna().all(axis=1)]
    target, sparse = int(complete["eid"].iloc[0]), int(complete["eid"].iloc[1])
    holes = ["glucose", "hdl", "crp"]
    frame = baseline.copy()
    frame.loc[frame["eid"] == target, holes] = np.nan
    frame.loc[frame["eid"] == sparse, norm.features_[1:40]] = np.nan
    fitted = RiskModel.load(model)
    rows, people, unscorable, _, _ = fitted.score_cohort(frame, source=run_dir / "x.csv")
    person = people.set_index("eid").loc[target]
    assert person["imputed_features"] == 3 and set(person["imputed"].split(";")) == set(holes)
    assert target in set(rows["eid"])
    assert unscorable.set_index("eid").loc[sparse, "reason"].startswith("39 of")
    # the training partition's medians, not the export's (nor any test participant's)
    train = pd.read_parquet(cohorts_dir / "female" / "train_raw.parquet")
    train = train[~train["augmented"].astype(bool)]  # the normalizer saw real rows only
    test = pd.read_parquet(cohorts_dir / "female" / "test_raw.parquet")
    med = dict(zip(norm.features_, training_medians(norm), strict=True))
    for h in holes:
        assert med[h] == pytest.approx(float(train[h].median()), rel=1e-3, abs=1e-6)
    # the test partition's own values (the cohort fills its missing ones with the training
    # medians too: those are left out here)
    filled = pd.read_parquet(cohorts_dir / "female" / "imputed.parquet").set_index("eid")
    filled = filled["imputed"].reindex(test["eid"]).fillna("").str.split(";")
    own = {h: test.loc[[h not in f for f in filled], h] for h in holes}
    assert any(float(own[h].median()) != pytest.approx(med[h], rel=1e-3) for h in holes)
    # shifting every other participant's values changes nothing for the imputed one
    moved = frame.copy()
    others = moved["eid"] != target
    moved.loc[others, holes] = moved.loc[others, holes] * 1.3
    rows2, _, _, _, _ = fitted.score_cohort(moved, source=run_dir / "x.csv",
                                            allow_out_of_range=True)
    a = rows[rows["eid"] == target].sort_values(["method", "mode"])["distance"].to_numpy()
    b = rows2[rows2["eid"] == target].sort_values(["method", "mode"])["distance"].to_numpy()
    assert a == pytest.approx(b)


# ----------------------------------------------------------------------------- definitions

def test_definitions_hold_refresh_and_retrain():
    jobs = {j.name for j in defs.resolve_all_job_defs()}
    assert {"risk_refresh", "retrain"} <= jobs
    assert defs.resolve_schedule_def("weekly_risk_refresh").job_name == "risk_refresh"
    assert defs.resolve_sensor_def("new_export_sensor").job_name == "risk_refresh"
    monthly = defs.resolve_schedule_def("monthly_retrain")
    assert monthly.job_name == "retrain"
    assert monthly.default_status == dg.DefaultScheduleStatus.STOPPED
    selected = {k.to_user_string() for k in
                defs.resolve_job_def("risk_refresh").asset_layer.executable_asset_keys}
    assert selected == {"refresh/baseline", "risk/refresh"}


def test_changed_export_marks_downstream_stale(tmp_path, exports):
    """The export's data version is its content fingerprint: a changed file, once observed (as
    the sensor does), makes ukb_export and everything after it stale."""
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    def resolver():
        return CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))

    export = tmp_path / "ukb.csv"
    export.write_bytes(exports["a"].read_bytes())
    instance = dg.DagsterInstance.ephemeral()
    from sphr_dagster.assets.ingest import export_observation

    res = _resources(tmp_path / "run", export)
    # observed first, as the sensor and `python -m pipeline run` do
    instance.report_runless_asset_event(export_observation(res["data_source"], res["storage"]))
    result = dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups("ingest"),
                            resources=res, instance=instance)
    assert result.success
    graph = defs.resolve_asset_graph()
    keys = [dg.AssetKey(["export", "ukb_export"]), dg.AssetKey(["ingest", "baseline"])]
    status = resolver()
    assert [status.get_status(k) for k in keys] == [StaleStatus.FRESH] * 2
    export_key = dg.AssetKey(["export", "ukb_export_file"])
    assert status.get_current_data_version(export_key).value == fingerprint(export)
    export.write_bytes(exports["b"].read_bytes())
    instance.report_runless_asset_event(dg.AssetObservation(
        asset_key=export_key, tags={"dagster/data_version": fingerprint(export)}))
    status = resolver()
    assert status.get_status(keys[0]) == StaleStatus.STALE
    assert "ukb_export_file" in str(status.get_stale_causes(keys[0]))


def test_a_refresh_without_its_export_fails_with_one_reason_recorded(tmp_path):
    """An unattended job's failure is told as the main command tells its own: the library's
    one-line reason (an InputError naming the file) as the run's tag and in the run
    directory's record, which the job's next success removes."""
    from sphr_dagster.automation import (
        FAILURE_TAG,
        job_failed_file,
        unattended_failure_reason,
        unattended_success,
    )
    from sphr_dagster.resources import RunStorage

    run = tmp_path / "run"
    missing = tmp_path / "gone.csv"
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups("refresh"),
                            resources=_resources(run, missing), raise_on_error=False,
                            instance=instance)
    assert not result.success
    event = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    resources = {"storage": RunStorage(root=str(run))}
    ctx = dg.build_run_status_sensor_context(
        sensor_name="unattended_failure_reason", dagster_event=event, dagster_instance=instance,
        dagster_run=result.dagster_run, resources=resources).for_run_failure()
    unattended_failure_reason(ctx)
    reason = f"refresh__baseline: {missing}: no export to refresh from"
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags[FAILURE_TAG].startswith(reason), tags[FAILURE_TAG]
    assert "Traceback" not in tags[FAILURE_TAG] and "\n" not in tags[FAILURE_TAG]
    record = json.loads(job_failed_file(run, result.dagster_run.job_name).read_text())
    (failure,) = record["failed"][0]["failures"]
    assert failure["error"] == "InputError" and str(missing) in failure["message"]
    ctx = dg.build_run_status_sensor_context(
        sensor_name="unattended_success", dagster_event=event, dagster_instance=instance,
        dagster_run=result.dagster_run, resources=resources)
    unattended_success(ctx)
    assert not job_failed_file(run, result.dagster_run.job_name).exists()
