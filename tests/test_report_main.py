"""The main risk report (issue 48): four pages at most, a verdict formatted from its frames,
suppression of small groups, the "not ordered" flag, and the appendix beside it.

Built from a small hand-made population (risk_groups-shaped rows and linked outcomes whose
hazard follows the shipped score), so the whole report takes seconds."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from pdf_setup import printing_pdfs

from sphr.report import find_chromium, pdf_pages

HAS_CHROMIUM = find_chromium() is not None
needs_chromium = pytest.mark.skipif(not HAS_CHROMIUM, reason="no chromium on PATH")
METHODS = ("raw_euclidean", "sphr_joint", "phenoage")
#: what a risk stage's summary states of its bounds (the report reads it, never guesses it)
BOUNDS = {"standardization": "training_groups", "tail_bound": "lognormal"}
Z_NORMAL, Z_LOWER = 1.0, 1.8


def population(seed: int = 0, n: int = 700) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows, outcomes): two sexes x three methods (mode calibrated), death and cancer whose
    hazard grows with the latent health that the shipped score measures best."""
    from sphr.risk.intervals import GROUPS

    rng = np.random.default_rng(seed)
    frames, outs = [], []
    for k, sex in enumerate(("female", "male")):
        eid = np.arange(n) + 10_000 * (k + 1)
        age = rng.uniform(40, 70, n)
        latent = rng.normal(0, 1, n)
        label = np.where(latent < -0.3, 2, np.where(latent < 0.8, 1, 0)).astype(np.int8)
        part = rng.choice(["train", "calibration", "test"], n, p=[0.2, 0.2, 0.6])
        for method in METHODS:
            score = latent * (1.0 if method == "sphr_joint" else 0.4) + rng.normal(0, 0.5, n)
            group = np.where(score <= Z_NORMAL, GROUPS[0],
                             np.where(score <= Z_LOWER, GROUPS[1], GROUPS[2]))
            frames.append(pd.DataFrame({
                "eid": eid, "sex": sex, "age_years": age, "age_group": "40-70",
                "method": method, "mode": "calibrated", "distance": 3 + score, "score": score,
                "group": group, "partition": part, "label": label, "normal_low": np.nan,
                "normal_high": 3 + Z_NORMAL, "lower_low": np.nan, "lower_high": 3 + Z_LOWER}))
        for j, outcome in enumerate(("death", "cancer")):
            rate = 0.012 * np.exp(0.06 * (age - 55) + 0.7 * latent + 0.2 * j)
            t_event = rng.exponential(1 / rate)
            t_cens = rng.uniform(8, 13, n)
            outs.append(pd.DataFrame({
                "eid": eid, "outcome": outcome, "event": (t_event <= t_cens).astype(int),
                "time_years": np.minimum(t_event, t_cens),
                "prevalent": (rng.random(n) < 0.03) if outcome == "cancer" else False}))
    return pd.concat(frames, ignore_index=True), pd.concat(outs, ignore_index=True)


def stage_tables(rows: pd.DataFrame, outcomes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The yardstick tables as the risk stage writes them (sphr.risk.pipeline.linked_tables)."""
    from sphr.risk.supervised import evaluated_on
    from sphr.risk.validation.beyond import beyond_age_tables

    pop = rows.loc[(rows["mode"] == "calibrated") & (rows["partition"] == "test"),
                   ["eid", "sex", "method", "score", "group", "age_years", "label"]]
    return beyond_age_tables(pop, outcomes, n_bootstrap=30, seed=0, evaluated_on=evaluated_on)


@pytest.fixture(scope="module")
def inputs():
    rows, outcomes = population()
    from sphr.risk.report.frames import gain, ordering, outcome_frame

    frame = outcome_frame(rows, outcomes)
    linked = stage_tables(rows, outcomes)
    return {"rows": rows, "outcomes": outcomes, "frame": frame, "linked": linked,
            "order": ordering(linked["group_ordering"]), "gain": gain(linked["beyond_age"])}


@pytest.fixture(scope="module")
def report(tmp_path_factory, inputs):
    from sphr.risk.report import write_report

    out = tmp_path_factory.mktemp("risk")
    rows = inputs["rows"]
    thresholds = pd.DataFrame([{"sex": s, "method": m, "mode": "calibrated", "age_group": "40-70",
                                "z_normal": Z_NORMAL, "z_lower": Z_LOWER,
                                "n_calibration_bfh": 40, "bound_method": "conformal",
                                "normal_high": 3 + Z_NORMAL, "lower_high": 3 + Z_LOWER,
                                "normal_low": np.nan, "lower_low": np.nan}
                               for s in ("female", "male") for m in METHODS])
    summary = {"run": str(out), "sexes": ["female", "male"], "methods": list(METHODS),
               "skipped": {}, "min_group_size": 10, "synthetic": True, **BOUNDS}
    with printing_pdfs():
        write_report(out / "report.html", rows=rows, thresholds=thresholds, validation=None,
                     correlation=None, summary=summary,
                     absolute=(None, inputs["outcomes"], None, None), linked=inputs["linked"],
                     pdf=HAS_CHROMIUM)
    return out


def test_main_report_opens_with_the_verdict_and_has_an_appendix(report):
    text = (report / "report.html").read_text()
    assert text.index("Synthetic cohort") < text.index("<h2>Verdict</h2>") \
        < text.index("Participant flow") < text.index("The shipped groups")
    assert "sphr_joint" not in re.sub(r"<[^>]+>", " ", text)  # display names only
    side = (report / "report_appendix.html").read_text()
    for heading in ("Group ordering: every score and outcome",
                    "Gain over age: every score and outcome", "Definitions", "Thresholds used"):
        assert f"<h2>{heading}</h2>" in side
    for name in ("ordering", "gain", "flow"):
        assert len(pd.read_csv(report / f"report_{name}.csv"))
    assert "<th>verdict</th>" in side  # the main page's words beside the stage's status


@pytest.mark.browser
@needs_chromium
def test_main_pdf_has_at_most_four_pages(report):
    assert 1 <= pdf_pages(report / "report.pdf") <= 4
    assert pdf_pages(report / "report_appendix.pdf") > 4


def test_every_verdict_sentence_is_rebuilt_from_its_frame(inputs):
    from sphr.risk.report import verdict as vd

    order, gain = inputs["order"].copy(), inputs["gain"].copy()
    text = vd.ordering_sentence(order, "sphr_joint", "death")
    i = order.index[(order["sex"] == "female") & (order["method"] == "sphr_joint")
                    & (order["outcome"] == "death") & (order["group"] == "Higher Risk")][0]
    order.loc[i, ["hr", "hr_low", "hr_high"]] = [0.61, 0.22, 1.70]
    changed = vd.ordering_sentence(order, "sphr_joint", "death")
    assert changed != text and "Higher Risk 0.61 (0.22-1.70)" in changed
    # the status comes from the frame, not from the numbers beside it
    sel = (order["sex"] == "female") & (order["method"] == "sphr_joint") \
        & (order["outcome"] == "death")
    order.loc[sel, "status"] = "not ordered"
    assert "are not ordered in women" in vd.ordering_sentence(order, "sphr_joint", "death")
    before = vd.across_sentence(inputs["order"])
    after = vd.across_sentence(order)
    n_not = order.drop_duplicates(["sex", "method", "outcome"])["status"].eq("not ordered").sum()
    assert before != after and f"not ordered in {n_not}" in after
    j = gain.index[(gain["sex"] == "male") & (gain["method"] == "raw_euclidean")
                   & (gain["outcome"] == "death")][0]
    gain.loc[j, ["dc", "dc_low", "dc_high"]] = [0.4, 0.3, 0.5]
    assert "Euclidean (raw) in men, +0.400 (+0.300 to +0.500)" in vd.gain_sentence(gain, "death")
    record = {"spread": {"n": 1234, "deaths": 56, "rule": {
        "female": {"sphr_joint": {"passes": True}}, "male": {"sphr_joint": {"passes": False}}}}}
    s = vd.stability_sentence(record, "sphr_joint")
    assert "development set (NHANES, 1,234 people, 56 deaths), not on this cohort" in s
    assert "passes in women and does not pass in men" in s
    assert "stability rule" in s and "dC" not in s  # a record measured before the rule by dC
    by_dc = {"spread": {"n": 1234, "deaths": 56, "rule": {
        "female": {"sphr_joint": {"passes": True, "mean_dc": 0.0564,
                                  "interval": [0.0222, 0.0894]}},
        "male": {"sphr_joint": {"passes": False, "mean_dc": 0.0071,
                                "interval": [-0.0007, 0.0146]}}}}}
    s = vd.stability_sentence(by_dc, "sphr_joint")
    assert "rule of what it adds to age" in s and "stability rule" not in s
    assert ("passes in women (mean dC +0.056, 95% interval +0.022 to +0.089) and does not pass "
            "in men (mean dC +0.007, 95% interval -0.001 to +0.015)") in s
    ages = pd.DataFrame({"sex": "female", "age_years": [45.0, 50, 60, 39, 71],
                         "role": ["reference"] * 3 + ["scored"] * 2})
    assert "2 of 2 held-out people (100.0%)" in vd.population_sentence(ages)
    assert "0 of 1 held-out" in vd.population_sentence(ages.iloc[:4].assign(
        age_years=[45.0, 50, 60, 55]))


def _groups(n: dict[str, int], rate: dict[str, float], seed: int = 1) -> pd.DataFrame:
    """Constructed people per group with an exponential hazard per group, same ages."""
    rng = np.random.default_rng(seed)
    parts = []
    for g, k in n.items():
        t = rng.exponential(1 / rate[g], k)
        parts.append(pd.DataFrame({"group": g, "age_years": rng.uniform(50, 60, k),
                                   "time_years": np.minimum(t, 12.0), "event": t <= 12.0}))
    frame = pd.concat(parts, ignore_index=True)
    return frame.assign(sex="female", method="sphr_joint", outcome="death", eid=range(len(frame)),
                        score=0.0, bfh=False)


def _ordering(frame: pd.DataFrame) -> pd.DataFrame:
    """The report's ordering frame of constructed people, the stage's table first."""
    from sphr.beyond_age import ordering_table
    from sphr.risk.report.frames import ordering

    return ordering(ordering_table(frame, keys=["sex", "method", "outcome"], age="age_years"))


def test_small_groups_are_suppressed():
    from sphr.risk.report.frames import TOO_FEW, group_table

    # Higher Risk: 8 people; Lower Risk: 60 people but a hazard giving almost no events
    frame = _groups({"Normal": 400, "Lower Risk": 60, "Higher Risk": 8},
                    {"Normal": 0.02, "Lower Risk": 0.002, "Higher Risk": 0.3})
    order = _ordering(frame)
    by = order.set_index("group")
    assert by.loc["Higher Risk", "n"] == 8 and by.loc["Lower Risk", "events"] < 5
    assert not by.loc["Higher Risk", "shown"] and not by.loc["Lower Risk", "shown"]
    table = group_table(order, "female", "sphr_joint").set_index("group")
    for g in ("Lower Risk", "Higher Risk"):
        assert table.loc[g, "death"] == TOO_FEW
    assert table.loc["Normal", "death"].endswith("); HR 1 (reference)")
    assert "age-standardized" in table.loc["Normal", "death"]
    # neither group has enough: the verdict rests on everyone outside Normal, and says so
    assert table.loc["groups ordered?", "death"].endswith("(on outside Normal only)")


def test_inverted_groups_are_flagged_not_ordered():
    from sphr.risk.report import verdict as vd
    from sphr.risk.report.frames import group_table

    # Higher Risk dies least: the groups are inverted
    frame = _groups({"Normal": 400, "Lower Risk": 150, "Higher Risk": 150},
                    {"Normal": 0.04, "Lower Risk": 0.02, "Higher Risk": 0.01})
    order = _ordering(frame)
    assert set(order["status"]) == {"not ordered"}
    assert group_table(order, "female", "sphr_joint").iloc[-1]["death"] == "not ordered"
    assert "are not ordered in women" in vd.ordering_sentence(order, "sphr_joint", "death")
    # the same people in the right order are ordered
    ok = frame.assign(group=frame["group"].map({"Normal": "Higher Risk",
                                                "Higher Risk": "Normal",
                                                "Lower Risk": "Lower Risk"}))
    assert set(_ordering(ok)["status"]) == {"ordered"}


def test_decision_curve_treat_all_and_none():
    from sphr.risk.report.decision import net_benefit

    rng = np.random.default_rng(0)
    risk = rng.uniform(0, 0.4, 2000)
    t = rng.exponential(1 / (-np.log(1 - risk) / 10))
    nb = net_benefit(np.minimum(t, 12), t <= 12, risk, 10.0)
    # a calibrated risk beats treating everyone and no one over the useful thresholds
    mid = nb.loc[nb["threshold"].between(0.1, 0.25)]
    assert (mid["model"] > mid["treat_all"]).all() and (mid["model"] > 0).all()
    # treating everyone at threshold 0 is the event rate; nobody treated: treat-none
    assert nb.loc[nb["threshold"] == 0.01, "treated"].iloc[0] > 0.95
    assert net_benefit(t, t <= 12, np.zeros(2000), 10.0)["model"].eq(0).all()


@pytest.mark.browser
@needs_chromium
def test_main_report_fits_the_page_in_a_real_browser(report):
    import shutil

    if shutil.which("chromedriver") is None:
        pytest.skip("no chromedriver on PATH")
    pytest.importorskip("selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = find_chromium()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=720,1000"):  # about A4's printable width at 96 dpi
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get((report / "report.html").resolve().as_uri())
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        script = ("const w = document.documentElement.clientWidth; return Array.from("
                  "document.querySelectorAll('body *')).filter(e => "
                  "e.getBoundingClientRect().right > w + 1).map(e => e.tagName + ' ' + "
                  "(e.textContent || '').slice(0, 40));")
        assert driver.execute_script(script) == []
        # the check sees an element wider than the page
        driver.execute_script("document.body.insertAdjacentHTML('beforeend', "
                              "'<table><tr><td style=\\'min-width:3000px\\'>x</td></tr></table>')")
        assert driver.execute_script(script)
    finally:
        driver.quit()


def _context(inputs, linked):
    from sphr.risk.report.main import main_context

    summary = {"run": "/nonexistent", "sexes": ["female", "male"], "skipped": {}, **BOUNDS}
    return main_context(inputs["rows"], summary, ["female", "male"],
                        (None, inputs["outcomes"], None, None), linked)


def test_the_main_pages_read_the_stage_yardstick_not_a_recomputation(inputs, monkeypatch):
    import sphr.risk.validation.beyond

    def recomputed(*args, **kwargs):
        raise AssertionError("the report recomputed what the risk stage wrote")

    monkeypatch.setattr(sphr.risk.validation.beyond, "beyond_age_tables", recomputed)
    linked = {k: v.copy() for k, v in inputs["linked"].items()}
    go, ba = linked["group_ordering"], linked["beyond_age"]
    i = go.index[(go["sex"] == "female") & (go["method"] == "sphr_joint")
                 & (go["outcome"] == "death") & (go["group"] == "Higher Risk")][0]
    go.loc[i, ["hr", "hr_low", "hr_high"]] = [7.77, 6.66, 8.88]
    j = ba.index[(ba["sex"] == "male") & (ba["method"] == "raw_euclidean")
                 & (ba["outcome"] == "death")][0]
    ba.loc[j, ["dc", "dc_low", "dc_high"]] = [0.321, 0.3, 0.35]
    ctx = _context(inputs, linked)
    assert "Higher Risk 7.77 (6.66-8.88)" in ctx["verdict"][0]
    assert "HR 7.77 (6.66-8.88)" in ctx["group_tables"][0][1]
    assert any("+0.321 (+0.300 to +0.350)" in s for s in ctx["verdict"])
    got = ctx["frames"]["gain"].set_index(["sex", "method", "outcome"])
    assert got.loc[("male", "raw_euclidean", "death"), "dc"] == 0.321


def test_without_the_stage_yardstick_the_report_shows_no_ordering_and_computes_none(
        inputs, monkeypatch):
    """Linked outcomes but no yardstick tables (a stage without linked records wrote none;
    an older run folder is refused by merge_risk): no group ordering, nothing recomputed."""
    import sphr.risk.validation.beyond

    def recomputed(*args, **kwargs):
        raise AssertionError("the report recomputed what the risk stage writes")

    monkeypatch.setattr(sphr.risk.validation.beyond, "scored_tables", recomputed)
    ctx = _context(inputs, None)
    assert ctx["frames"]["ordering"].empty and ctx["frames"]["gain"].empty


def test_ordered_by_point_estimates_within_chance_says_so():
    from sphr.risk.report import verdict as vd
    from sphr.risk.report.frames import NOT_BEYOND_CHANCE, group_table, ordering_label

    frame = _groups({"Normal": 400, "Lower Risk": 150, "Higher Risk": 150},
                    {"Normal": 0.01, "Lower Risk": 0.03, "Higher Risk": 0.06})
    order = _ordering(frame)
    assert ordering_label(order) == "ordered"  # both intervals above 1 on these people
    assert group_table(order, "female", "sphr_joint").iloc[-1]["death"] == "ordered"
    assert "are ordered in women" in vd.ordering_sentence(order, "sphr_joint", "death")
    # Lower Risk's interval now reaches 1: still ordered by the point estimates, the words
    # change in the cell, the verdict sentence and the count across scores
    i = order.index[order["group"] == "Lower Risk"][0]
    order.loc[i, ["hr", "hr_low", "hr_high"]] = [1.40, 0.95, 2.06]
    assert ordering_label(order) == NOT_BEYOND_CHANCE
    assert group_table(order, "female", "sphr_joint").iloc[-1]["death"] == NOT_BEYOND_CHANCE
    text = vd.ordering_sentence(order, "sphr_joint", "death")
    assert "are ordered, not beyond chance, in women (Lower Risk 1.40 (0.95-2.06)" in text
    assert "ordered in 1 (1 of them not beyond chance)" in vd.across_sentence(order)
    # a verdict resting on one group reads that group's interval only
    one = order.assign(basis="Higher Risk")
    assert ordering_label(one) == "ordered"
    one.loc[one["group"] == "Higher Risk", "hr_low"] = 0.9
    assert ordering_label(one) == NOT_BEYOND_CHANCE
    assert group_table(one, "female", "sphr_joint").iloc[-1]["death"] \
        == f"{NOT_BEYOND_CHANCE} (on Higher Risk only)"
    # not ordered stays not ordered whatever the intervals
    assert ordering_label(order.assign(status="not ordered")) == "not ordered"


@pytest.mark.parametrize("settings, source, synthetic", [
    ({"export": None, "stages": {"synth": {}}}, "export/ukb_synthetic.csv", True),
    ({"export": "/data/nhanes_ukb_dev.csv", "stages": {"synth": {}}}, "nhanes_ukb_dev.csv",
     False),
    (None, "export/ukb_synthetic.csv", True),
    (None, "/data/ukb672345.csv", False),
])
def test_the_synthetic_banner_follows_the_runs_own_record(tmp_path, settings, source, synthetic):
    """Every run's settings list the synth stage, used or not: a run on an export (real
    people) must not be called synthetic."""
    import json

    from sphr.risk.report.main import cohort_facts

    (tmp_path / "ingest").mkdir()
    (tmp_path / "ingest" / "ingest_report.json").write_text(json.dumps({"source": source}))
    if settings is not None:
        (tmp_path / "run_settings.json").write_text(json.dumps(settings))
    assert cohort_facts({"run": str(tmp_path)})["synthetic"] is synthetic


def test_page_one_splits_the_healthy_no_bound_saw_with_intervals():
    """The "healthy people in it" column: each group's share of the held-out bona fide
    healthy with its Wilson interval beside the 95 / 4 / 1% a calibrated bound gives; the
    reference count is who the bounds rest on (in a cross-fit, every BFH out of fold)."""
    from sphr.risk.report import frames as fr
    from sphr.risk.report.main import _with_healthy
    from sphr.risk.validation.groups import wilson

    groups = ["Normal"] * 190 + ["Lower Risk"] * 8 + ["Higher Risk"] * 2
    rows = pd.DataFrame({"sex": "female", "eid": np.arange(210), "method": "m",
                         "mode": "calibrated", "partition": "test", "fold": 0,
                         "label": [2] * 200 + [0] * 10,
                         "group": groups + ["Higher Risk"] * 10})
    check = fr.healthy_check(rows, "m")["female"]
    assert (check["reference"], check["n"]) == (200, 200)  # the unhealthy are not counted
    lo, hi = wilson(8, 200)
    assert check["shares"]["Lower Risk"] == pytest.approx((0.04, float(lo), float(hi)))
    table = _with_healthy(pd.DataFrame({"group": ["Normal", "Lower Risk", "Higher Risk",
                                                  "groups ordered?"]}), check)
    cells = table["healthy people in it"].tolist()
    assert cells[0].startswith("95.0% (") and cells[0].endswith("; expected 95%)")
    assert cells[2].startswith("1.0% (") and cells[2].endswith("; expected 1%)")
    assert cells[3] == "n = 200"
