"""The main risk report (issue 48): four pages at most, a verdict formatted from its frames,
suppression of small groups, the "not ordered" flag, and the appendix beside it.

Built from a small hand-made population (risk_groups-shaped rows and linked outcomes whose
hazard follows the shipped score), so the whole report takes seconds."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sphr.report import find_chromium, pdf_pages

HAS_CHROMIUM = find_chromium() is not None
needs_chromium = pytest.mark.skipif(not HAS_CHROMIUM, reason="no chromium on PATH")
METHODS = ("raw_euclidean", "sphr_joint", "phenoage")
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


@pytest.fixture(scope="module")
def inputs():
    rows, outcomes = population()
    from sphr.risk.report.frames import gain, ordering, outcome_frame

    frame = outcome_frame(rows, outcomes)
    return {"rows": rows, "outcomes": outcomes, "frame": frame, "order": ordering(frame),
            "gain": gain(frame, n_bootstrap=30)}


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
               "skipped": {}, "min_group_size": 10, "synthetic": True}
    write_report(out / "report.html", rows=rows, thresholds=thresholds, validation=None,
                 correlation=None, summary=summary, absolute=(None, inputs["outcomes"], None,
                                                              None),
                 n_bootstrap=30, pdf=HAS_CHROMIUM)
    return out


def test_main_report_opens_with_the_verdict_and_has_an_appendix(report):
    text = (report / "report.html").read_text()
    assert text.index("Synthetic cohort") < text.index("<h2>Verdict</h2>") \
        < text.index("Participant flow") < text.index("The shipped groups")
    assert "sphr_joint" not in re.sub(r"<[^>]+>", " ", text)  # display names only
    side = (report / "report_appendix.html").read_text()
    for heading in ("Group ordering: every score and outcome", "Gain over age: every score and outcome",
                    "Definitions", "Thresholds used"):
        assert f"<h2>{heading}</h2>" in side
    for name in ("ordering", "gain", "flow"):
        assert len(pd.read_csv(report / f"report_{name}.csv"))


@pytest.mark.browser
@needs_chromium
def test_main_pdf_has_at_most_four_pages(report):
    assert 1 <= pdf_pages(report / "report.pdf") <= 4
    assert pdf_pages(report / "report_appendix.pdf") > 4
