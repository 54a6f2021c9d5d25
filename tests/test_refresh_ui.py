"""The Dagster UI and risk_refresh: the export's data version and the stale marker after the
export changes (screenshots in runs/screenshots/)."""

from __future__ import annotations

import os
import shutil

import pytest
from test_risk_real_sphr import trained_risk_run
from test_ui_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    LOCATION,
    ROOT,
    SHOTS,
    _button,
    _click,
    _wait_for,
    dagster_dev,
    finished_run,
    headless_chrome,
    run_python,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture
def fitted_ui(tmp_path, ingest_dir, cohorts_dir, synthetic_cohort):
    """A RUN with a small real model (1 epoch) and `dagster dev` on it; export A observed and
    refreshed once, then the export file replaced by B and observed (as the sensor does)."""
    from sphr.synth.export import write_export

    run = trained_risk_run(tmp_path, ingest_dir, cohorts_dir,
                           ("raw_euclidean", "mahalanobis", "sphr"))
    export = tmp_path / "exports" / "ukb.csv"
    write_export(synthetic_cohort, export, "ukbconv", decoys=0, seed=11)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "sphr_dagster" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "SPHR_EXPORT": str(export),
           "SPHR_RUN_DIR": str(run), "SPHR_PROGRESS": "0"}
    prep = ("import dagster as dg\n"
            "from sphr_dagster.assets.ingest import export_observation\n"
            "from sphr_dagster.definitions import ASSETS, CHECKS\n"
            "from sphr_dagster.resources import default_resources\n"
            "i = dg.DagsterInstance.get(); r = default_resources()\n"
            "i.report_runless_asset_event(export_observation(r['data_source'], r['storage']))\n"
            "m = dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups('refresh'),"
            " resources=r, instance=i)\n"
            "assert m.success\n")
    run_python(prep, env)
    # the export changes: 10% of the participants fewer
    visits = synthetic_cohort.visits
    keep = ~visits["eid"].isin(sorted(visits["eid"].unique())[::10])
    from sphr.synth.cohort import SyntheticCohort

    write_export(SyntheticCohort(visits[keep].reset_index(drop=True), synthetic_cohort.truth),
                 export, "ukbconv", decoys=0, seed=11)
    observe = ("import dagster as dg\n"
               "from sphr_dagster.assets.ingest import export_observation\n"
               "from sphr_dagster.resources import default_resources\n"
               "r = default_resources()\n"
               "dg.DagsterInstance.get().report_runless_asset_event("
               "export_observation(r['data_source'], r['storage']))\n")
    run_python(observe, env)
    with dagster_dev(env, tmp_path / "dagster_dev.log") as url:
        yield url, home, run, export


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium + chromedriver not installed")
def test_ui_shows_export_version_and_stale_marker(fitted_ui):
    pytest.importorskip("selenium")
    from selenium.webdriver.common.by import By

    from sphr.data.fingerprint import fingerprint

    url, home, run_dir, export = fitted_ui
    version = fingerprint(export)
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver = headless_chrome(1600, 1200)
    try:
        def body() -> str:
            return driver.find_element(By.TAG_NAME, "body").text

        # the export's data version (its content fingerprint) on the source asset's page
        def shown(view: str) -> bool:
            driver.get(f"{url}/assets/export/ukb_export_file{view}")
            try:
                _wait_for(lambda: version[:12] in body(), 30, "the export's data version")
                return True
            except TimeoutError:
                (SHOTS / f"export_page{view.replace('?', '_')}.txt").write_text(body())
                return False

        assert shown("") or shown("?view=events"), "the data version is not shown"
        driver.save_screenshot(str(SHOTS / "dagster_export_version.png"))
        # refresh/baseline was built from the previous version: stale (Dagster: "Unsynced")
        stale = {}
        for page in ("assets/refresh/baseline", f"locations/{LOCATION}/"
                     "asset-groups/refresh"):
            driver.get(f"{url}/{page}")
            try:
                _wait_for(lambda: "Unsynced" in body() or "Stale" in body(), 45,
                          "the stale marker")
                stale[page] = True
            except TimeoutError:
                stale[page] = False
                (SHOTS / f"stale_{page.replace('/', '_')}.txt").write_text(body())
            driver.save_screenshot(str(SHOTS / f"dagster_refresh_stale_{len(stale)}.png"))

        assert all(stale.values()), stale

        # launch risk_refresh from its job page, as a user would, and wait for it
        from dagster import DagsterInstance

        instance = DagsterInstance.from_config(str(home))
        before = {r.run_id for r in instance.get_runs()}
        driver.get(f"{url}/locations/{LOCATION}/jobs/risk_refresh")
        launch = _wait_for(lambda: _button(driver, "Materialize all"), 60,
                           "the job's Materialize all button")
        driver.save_screenshot(str(SHOTS / "dagster_risk_refresh_job.png"))
        _click(driver, launch)
        # the model was fitted outside this instance (sphr risk), so the UI asks whether to go
        # on although risk/risk_report was never materialized here
        try:
            _click(driver, _wait_for(lambda: _button(driver, "Confirm"), 15, "the warning"))
        except TimeoutError:
            pass
        run = finished_run(driver, url, instance,
                           lambda r: r.run_id not in before and r.job_name == "risk_refresh",
                           seconds=420, what="the launched risk_refresh run to finish",
                           page_text="refresh", shot="dagster_risk_refresh_run.png")
        assert run.status.value == "SUCCESS", run.status
        # the refresh of the new export version is on disk beside the first one
        refreshes = sorted(p.name for p in (run_dir / "risk" / "refresh").iterdir() if p.is_dir())
        assert fingerprint(export) in refreshes and len(refreshes) == 2, refreshes
    finally:
        driver.quit()
