"""The Dagster UI in a real browser: the export's data version and the stale marker after the
export changes, then risk_refresh launched from its job page; the asset graph, catalog and
launchpad, then one partition launched and succeeding.

Starts ``dagster dev`` on a free port in its own process group (it ignores
SIGTERM from a parent otherwise), drives headless Chromium through
chromedriver (Debian's packages; `.ci/run` installs them), and saves
screenshots under ``runs/screenshots/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_risk_real_sphr import trained_risk_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "runs" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
#: the code location's name in the UI's URLs (workspace.yaml)
LOCATION = "sphr"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"{url} did not answer within {seconds} s")


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory, ingest_dir, cohorts_dir, synthetic_cohort):
    """One `dagster dev` for this file's tests (each start is 15-20 s of a 2-core box's test
    run): a RUN with a small real model (1 epoch); export A observed and refreshed once, then
    the export file replaced by B and observed (as the sensor does), and B's ingest
    materialized so that a UI launch of one sex's cohorts builds only the cohorts."""
    from sphr.synth.cohort import SyntheticCohort
    from sphr.synth.export import write_export

    tmp = tmp_path_factory.mktemp("ui")
    run = trained_risk_run(tmp, ingest_dir, cohorts_dir, ("raw_euclidean", "mahalanobis", "sphr"))
    _own_copies(run)
    export = tmp / "exports" / "ukb.csv"
    write_export(synthetic_cohort, export, "ukbconv", decoys=0, seed=11)
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "sphr_dagster" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "SPHR_EXPORT": str(export),
           "SPHR_RUN_DIR": str(run), "SPHR_PROGRESS": "0"}
    _observe_and_materialize(home, export, run, "refresh")
    # the export changes: 10% of the participants fewer
    visits = synthetic_cohort.visits
    keep = ~visits["eid"].isin(sorted(visits["eid"].unique())[::10])
    write_export(SyntheticCohort(visits[keep].reset_index(drop=True), synthetic_cohort.truth),
                 export, "ukbconv", decoys=0, seed=11)
    _observe_and_materialize(home, export, run, "ingest")
    with dagster_dev(env, tmp / "dagster_dev.log") as url:
        yield url, home, run, export


def _observe_and_materialize(home: Path, export: Path, run: Path, group: str) -> None:
    """On the test's instance: observe the export file (as the sensor does), then materialize
    the asset group ``group``. In this process: its imports are paid already, where a fresh
    interpreter took 6-7 s to import the code location."""
    import dagster as dg

    from sphr_dagster.assets.ingest import export_observation
    from sphr_dagster.definitions import ASSETS, CHECKS
    from sphr_dagster.resources import default_resources

    resources = default_resources(str(run), export=str(export), environment=False)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.report_runless_asset_event(
            export_observation(resources["data_source"], resources["storage"]))
        result = dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups(group),
                                resources=resources, instance=instance)
    assert result.success


def _own_copies(run: Path) -> None:
    """The RUN's ingest files and cohorts as copies, not links to the session's fixtures: the
    UI's launches write there."""
    for link in [*(run / "ingest").iterdir(), run / "cohorts"]:
        if link.is_symlink():
            target = link.resolve()
            link.unlink()
            (shutil.copytree if target.is_dir() else shutil.copyfile)(target, link)


@contextlib.contextmanager
def dagster_dev(env: dict, log_path: Path):
    """`dagster dev` on the project's workspace with ``env``; yields its URL once it answers."""
    port = _free_port()
    log = log_path.open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster")), "dev", "-w", "workspace.yaml",
         "-h", "127.0.0.1", "-p", str(port)],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/server_info", 180)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:  # dagster dev takes its full 20 s to stop its children: the instance is a
            proc.wait(3)  # temporary folder, so 3 s of grace and then the whole group
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def headless_chrome(width: int, height: int):
    """Selenium's Chrome on the system Chromium, headless, at this window size."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _button(driver, text: str):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for b in driver.find_elements(By.TAG_NAME, "button"):
        try:  # the UI re-renders while we look
            if b.text.strip() == text and b.is_displayed():
                return b
        except StaleElementReferenceException:
            continue
    return None


def _click(driver, element) -> None:
    """Click, first closing the UI's one-time community prompt if it pops up over the page."""
    from selenium.common.exceptions import ElementClickInterceptedException

    for _ in range(5):
        try:
            element.click()
            return
        except ElementClickInterceptedException:
            skip = _button(driver, "Skip")
            if skip is not None:
                skip.click()
            time.sleep(1)
    element.click()


def dismiss_community_prompt(driver) -> None:
    """Close Dagster's one-time "Join the Dagster community" dialog if it is over the page.
    Our dagster.yaml turns it off (``nux: enabled: false``); a DAGSTER_HOME made before that
    still shows it once, and a screenshot must not show it over what it is meant to show."""
    from selenium.webdriver.common.by import By

    for _ in range(3):
        if "Join the Dagster community" not in driver.find_element(By.TAG_NAME, "body").text:
            return
        for label in ("Skip", "Close", "Dismiss"):
            button = _button(driver, label)
            if button is not None:
                button.click()
                break
        time.sleep(1)
    raise AssertionError("the community dialog stays over the page")


def _wait_for(predicate, seconds: float, what: str):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise TimeoutError(f"waited {seconds} s for {what}")


def finished_run(driver, url: str, instance, wanted, *, seconds: float, what: str,
                 page_text: str, shot: str):
    """Wait for the newest of the last runs that ``wanted`` accepts to end, open its page
    (until it shows ``page_text``) and save it as screenshot ``shot``; returns the run."""
    from selenium.webdriver.common.by import By

    def finished():
        runs = [r for r in instance.get_runs(limit=5) if wanted(r)]
        return runs and runs[0].status.value in ("SUCCESS", "FAILURE", "CANCELED") and runs[0]

    run = _wait_for(finished, seconds, what)
    driver.get(f"{url}/runs/{run.run_id}")
    _wait_for(lambda: page_text in driver.find_element(By.TAG_NAME, "body").text, 60,
              "the run page")
    time.sleep(2)
    driver.save_screenshot(str(SHOTS / shot))
    return run


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium + chromedriver not installed")
def test_ui_shows_export_version_and_stale_marker(dagster_ui):
    pytest.importorskip("selenium")
    from selenium.webdriver.common.by import By

    from sphr.data.fingerprint import fingerprint

    url, home, run_dir, export = dagster_ui
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


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium + chromedriver not installed")
def test_ui_lists_assets_and_materializes_one_partition(dagster_ui):
    selenium = pytest.importorskip("selenium")  # noqa: F841
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, home, _, _ = dagster_ui
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver = headless_chrome(1600, 1000)
    try:
        def body() -> str:
            return driver.find_element(By.TAG_NAME, "body").text

        # the asset graph shows every stage's group; the catalog lists every asset
        driver.get(f"{url}/asset-groups")
        groups = ("ingest", "cohorts", "training", "baselines", "evaluation")
        _wait_for(lambda: "Global asset lineage" in body() and all(g in body() for g in groups),
                  90, "the stage groups in the asset graph")
        time.sleep(2)  # the graph lays out after the groups list renders
        dismiss_community_prompt(driver)
        assert "community" not in body()
        driver.save_screenshot(str(SHOTS / "dagster_asset_graph.png"))
        # the catalog renders only the rows in view: a window tall enough for every asset
        driver.set_window_size(1600, 3000)
        driver.get(f"{url}/assets")
        names = ("export / ukb_export", "export / ukb_export_file", "ingest / baseline",
                 "cohorts / cohort_splits", "cohorts / triplets", "train / sphr_model",
                 "train / embeddings", "baselines / representations", "evaluate / tables",
                 "refresh / baseline", "risk / refresh")
        _wait_for(lambda: all(n in body() for n in names), 90, "every asset in the catalog")
        driver.save_screenshot(str(SHOTS / "dagster_assets.png"))
        driver.set_window_size(1600, 1000)

        # the launchpad offers every setting of the library's dataclasses with its default
        # (the Config classes are generated from them: sphr_dagster.config)
        driver.set_window_size(1600, 1300)
        driver.get(f"{url}/locations/{LOCATION}/jobs/cohort_refresh/playground")
        _click(driver, _wait_for(lambda: _button(driver, "Scaffold all default config"), 60,
                                 "the launchpad's scaffold button"))

        def editor() -> str:  # the whole text: the editor renders only the lines in view
            return driver.execute_script(
                "const e = document.querySelector('.CodeMirror');"
                "return e ? e.CodeMirror.getValue() : '';")

        _wait_for(lambda: "n_triplets: 20000" in editor() and "hospital: 2022-10-31" in editor()
                  and "synthetic_participants: 20000" in editor(), 30,
                  "the cohort, ingest and synthetic-cohort settings with their defaults")
        _wait_for(lambda: "No errors" in body(), 30, "the scaffolded config to validate")
        dismiss_community_prompt(driver)
        driver.save_screenshot(str(SHOTS / "dagster_launchpad.png"))
        driver.set_window_size(1600, 1000)

        # launch the female partition of the cohorts from the asset page
        driver.get(f"{url}/assets/cohorts/cohort_splits")
        _wait_for(lambda: _button(driver, "Materialize…"), 60, "the Materialize button")
        _click(driver, _button(driver, "Materialize…"))
        # cohort_splits is one output of a multi-asset: the UI asks to confirm the siblings
        _click(driver, _wait_for(lambda: _button(driver, "Confirm"), 30, "the multi-asset dialog"))
        picker = _wait_for(lambda: [e for e in driver.find_elements(
            By.XPATH, "//*[contains(text(),'Select a partition')]") if e.is_displayed()], 30,
            "the partition picker")
        _click(driver, picker[-1])
        female = _wait_for(lambda: [e for e in driver.find_elements(
            By.XPATH, "//*[normalize-space(text())='female']") if e.is_displayed()], 30,
            "the female partition")
        _click(driver, female[-1])
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        _click(driver, _wait_for(lambda: _button(driver, "Launch 1 run"), 30, "the launch button"))

        from dagster import DagsterInstance

        instance = DagsterInstance.from_config(str(home))
        run = finished_run(driver, url, instance,
                           lambda r: r.tags.get("dagster/partition") == "female", seconds=300,
                           what="the launched run to finish", page_text="cohort",
                           shot="dagster_run_female.png")
        assert run.status.value == "SUCCESS"
        driver.get(f"{url}/assets/cohorts/cohort_splits?view=partitions")
        _wait_for(lambda: "Materialized (1)" in body(), 60, "one materialized partition")
        driver.save_screenshot(str(SHOTS / "dagster_partitions.png"))
    finally:
        driver.quit()


def _processes_naming(pattern: str) -> str:
    """``ps`` lines (pid, group, state, elapsed, command) of the processes whose command line
    holds ``pattern``."""
    pids = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True,
                          text=True).stdout.split()
    if not pids:
        return "no process left\n"
    return subprocess.run(["ps", "-o", "pid,pgid,stat,etime,args", "-p", ",".join(pids)],
                          capture_output=True, text=True).stdout


def test_the_ui_command_stops_whole_on_ctrl_c(tmp_path):
    """The README's UI command (``python -m sphr_dagster ui``): Ctrl-C (SIGINT to it, as a
    terminal sends it) ends it and every process ``dagster dev`` started, within the stop
    grace period, with exit code 0."""
    from sphr_dagster.__main__ import UI_STOP_SECONDS

    port = _free_port()
    run = tmp_path / "run"
    log = (tmp_path / "ui.log").open("w")
    # started with SIGINT ignored, as a shell starts a background command (and as a suite run
    # in the background starts this one): the command must still stop on it
    proc = subprocess.Popen([sys.executable, "-m", "sphr_dagster", "ui", "--run-dir", str(run),
                             "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _wait_http(f"http://127.0.0.1:{port}/server_info", 180)
        t0 = time.time()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=UI_STOP_SECONDS + 10)
        except subprocess.TimeoutExpired:
            code = None
        # what was still running, and the command's own log, so a failure can be told apart
        # (the command never saw the signal, or dagster dev's processes outlived it)
        assert code == 0, (f"exit {code} after {time.time() - t0:.0f} s\n"
                           + _processes_naming(f"-p {port}")
                           + (tmp_path / "ui.log").read_text()[-3000:])
    finally:
        if proc.poll() is None:
            proc.kill()
        # a failed stop must not leave dagster dev serving (and using the cores) for the rest
        # of the suite
        subprocess.run(["pkill", "-KILL", "-f", "--", f"-p {port}"], check=False)
        log.close()
    # nothing of it is left: no process names this run's history or listens on the port
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", "--", f"-p {port}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
