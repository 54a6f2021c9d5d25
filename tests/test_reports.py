"""The two reports people forward: risk/report.html + .pdf and evaluate/report.html + .pdf.

Built from small hand-made tables (the real pipeline's table functions on a synthetic
population), so these tests take seconds and need no fitted model. Where Chromium is on
PATH the PDFs are printed and checked (A4, page count, the summary's bookmark before the
appendix's); without it the PDF is skipped with one log line.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest
from pdf_setup import printing_pdfs

from sphr.report import find_chromium, pdf_outline, pdf_pages

pytestmark = pytest.mark.slow  # a few seconds each: matplotlib figures and Chromium
HAS_CHROMIUM = find_chromium() is not None
needs_chromium = pytest.mark.skipif(not HAS_CHROMIUM, reason="no chromium on PATH")

METHODS = ("raw_euclidean", "sphr", "phenoage")
#: what a risk stage's summary states of its bounds (the report reads it, never guesses it)
BOUNDS = {"standardization": "training_groups", "tail_bound": "lognormal"}
AGE_GROUPS = ("36-45", "46-55", "56-65", "66-75")
Z_NORMAL, Z_LOWER = 1.645, 2.33


def _population(seed: int = 0, n: int = 400) -> tuple[pd.DataFrame, pd.DataFrame]:
    """risk_groups-shaped rows (2 sexes x 3 methods, calibrated; 2 methods in mode paper)
    and a followup whose new diagnoses follow SPHR's score."""
    from sphr.risk.intervals import GROUPS

    rng = np.random.default_rng(seed)
    frames, fu = [], []
    for k, sex in enumerate(("female", "male")):
        eid = np.arange(n) + 10_000 * (k + 1)
        age = rng.integers(37, 74, n).astype(float)
        group_of_age = np.array([AGE_GROUPS[min(3, int((a - 36) // 10))] for a in age])
        label = rng.choice([0, 1, 2], n, p=[0.4, 0.45, 0.15]).astype(np.int8)
        part = rng.choice(["train", "calibration", "test"], n, p=[0.5, 0.1, 0.4])
        latent = rng.normal(0, 1, n) + 0.8 * (label == 0)
        for method in METHODS:
            score = latent * (1.6 if method == "sphr" else 0.3) + rng.normal(0, 1, n)
            group = np.where(score <= Z_NORMAL, GROUPS[0],
                             np.where(score <= Z_LOWER, GROUPS[1], GROUPS[2]))
            for mode in ("calibrated", "paper") if method != "phenoage" else ("calibrated",):
                frames.append(pd.DataFrame({
                    "eid": eid, "sex": sex, "age_years": age, "age_group": group_of_age,
                    "method": method, "mode": mode, "distance": 3 + score, "score": score,
                    "group": group, "normal_low": 1.0 if mode == "paper" else np.nan,
                    "normal_high": 3 + Z_NORMAL, "lower_low": np.nan if mode == "calibrated"
                    else 0.5, "lower_high": 3 + Z_LOWER, "partition": part, "label": label}))
        # repeat visits: ~60% come back once or twice; risk grows with the latent score
        for inst, years in ((1, 4.5), (2, 9.0), (3, 11.0)):
            came = rng.random(n) < (0.5 if inst < 3 else 0.2)
            p_new = 1 / (1 + np.exp(-(-2.2 + 1.2 * latent + 0.3 * inst)))
            new = rng.random(n) < p_new
            fu.append(pd.DataFrame({
                "eid": eid[came], "sex": np.int8(k), "instance": np.int8(inst),
                "years_since_baseline": years + rng.normal(0, 0.3, came.sum()),
                "new_cancer": new[came] & (rng.random(came.sum()) < 0.3),
                "new_diabetes": new[came], "new_other_serious": False}))
    followup = pd.concat(fu, ignore_index=True)
    for c in ("new_cancer", "new_diabetes", "new_other_serious"):
        followup[c] = followup[c].astype(object)
    return pd.concat(frames, ignore_index=True), followup


def _thresholds(rows: pd.DataFrame) -> pd.DataFrame:
    recs = []
    for (sex, method, mode), _ in rows.groupby(["sex", "method", "mode"]):
        for g in AGE_GROUPS:
            r = {"sex": sex, "method": method, "mode": mode, "age_group": g}
            if mode == "calibrated":
                r.update(z_normal=Z_NORMAL, z_lower=Z_LOWER, n_calibration_bfh=40,
                         bound_method="conformal / lognormal", normal_high=3 + Z_NORMAL,
                         lower_high=3 + Z_LOWER, normal_low=np.nan, lower_low=np.nan)
            else:
                r.update(n_bfh=30, n_reference=30, pooled_groups=g, normal_low=1.0,
                         normal_high=3 + Z_NORMAL, lower_low=0.5, lower_high=3 + Z_LOWER,
                         repairs="")
            recs.append(r)
    return pd.DataFrame(recs)


@pytest.fixture(scope="module")
def risk_inputs():
    from sphr.risk.pipeline import normal_share_table, validation_population
    from sphr.risk.validation.discrimination import discrimination
    from sphr.risk.validation.groups import time_correlation, validation_table

    rows, followup = _population()
    pop = validation_population(rows)
    disc = discrimination(pop, followup, n_bootstrap=40, seed=0)
    return {"rows": rows, "thresholds": _thresholds(rows),
            "validation": validation_table(pop, followup),
            "correlation": time_correlation(pop, followup),
            "heldout": normal_share_table(rows), "discrimination": disc,
            "followup": followup}


@pytest.fixture(scope="module")
def risk_report(tmp_path_factory, risk_inputs):
    from sphr.risk.report import write_report

    out = tmp_path_factory.mktemp("risk")
    inp = dict(risk_inputs)
    summary = {"run": str(out), "sexes": ["female", "male"], "methods": list(METHODS),
               "skipped": {}, "min_group_size": 10, **BOUNDS}
    with printing_pdfs():
        write_report(out / "report.html", rows=inp["rows"], thresholds=inp["thresholds"],
                     validation=inp["validation"], correlation=inp["correlation"],
                     summary=summary, heldout=inp["heldout"],
                     discrimination=inp["discrimination"], followup=inp["followup"])
    return out


def test_risk_report_reads_summary_first(risk_report):
    text = (risk_report / "report_appendix.html").read_text()
    assert "http://" not in text and "https://" not in text  # self-contained
    assert re.search(r"<(link|script)[^>]+src=", text) is None
    h2 = re.findall(r"<h2>(.*?)</h2>", text)
    assert h2[0] == "Every method at a glance"
    # reading order: the summary and its figure, the pictures, then the appendix
    order = [text.index(s) for s in (
        "<h2>Every method at a glance</h2>", "Does Higher Risk develop more new disease",
        'alt="forest plot',
        "<h2>New diagnoses over the repeat visits</h2>", "<h2>Group shares by age group</h2>",
        "<h2>Distance distributions per group</h2>", '<details class="appendix"',
        "<h2>Definitions</h2>", "<h2>Thresholds used</h2>")]
    assert order == sorted(order)
    assert text.count('<details class="appendix"') >= 5
    assert text.count('<img src="data:image/png;base64,') >= 8
    assert (risk_report / "report_summary.png").read_bytes()[:4] == b"\x89PNG"
    # the paragraph is in the summary, before the appendix
    assert text.index('<p class="lead">') < text.index("<h2>Definitions</h2>")


def test_cumulative_new_diagnosis_follows_the_visits(risk_inputs):
    from sphr.risk.validation.curves import cumulative_new_diagnosis

    curves = cumulative_new_diagnosis(risk_inputs["rows"], risk_inputs["followup"])
    assert set(curves.columns) >= {"sex", "method", "outcome", "group", "time_years", "cum_inc",
                                   "low", "high"}
    for _, c in curves.groupby(["sex", "method", "group"]):
        v = c["cum_inc"].to_numpy()
        assert v[0] == 0 and (np.diff(v) >= -1e-12).all() and (v <= 1).all()
    # the generated data give Higher Risk (on SPHR) more new disease than Normal
    s = curves[(curves["method"] == "sphr") & (curves["sex"] == "female")]
    end = s.groupby("group")["cum_inc"].max()
    assert end["Higher Risk"] > end["Normal"]


@pytest.mark.browser  # headless Chromium prints the PDF
@needs_chromium
def test_risk_pdf_is_a4_with_the_summary_on_page_one(risk_report):
    pdf = risk_report / "report_appendix.pdf"
    data = pdf.read_bytes()
    assert data[:5] == b"%PDF-"
    box = [float(x) for x in re.search(rb"/MediaBox\s*\[([^\]]*)\]", data).group(1).split()]
    assert abs(box[2] - 595) < 2 and abs(box[3] - 842) < 2  # A4 in points
    assert 6 <= pdf_pages(pdf) <= 30
    pages = dict(pdf_outline(pdf))
    assert pages["Every method at a glance"] == 1
    assert pages["Every method at a glance"] < pages["New diagnoses over the repeat visits"] \
        < pages["Definitions"] <= pages["Thresholds used"]


def test_summary_sentences_are_derived_from_the_numbers(risk_inputs):
    from sphr.risk.report import summary_paragraph, summary_sentences

    rows, heldout = risk_inputs["rows"], risk_inputs["heldout"]
    disc = risk_inputs["discrimination"].copy()
    text = summary_paragraph(disc, heldout, rows=rows)
    assert text == " ".join(summary_sentences(disc, heldout, rows=rows))
    # change a number, the sentence changes
    i = disc.index[(disc["sex"] == "female") & (disc["method"] == "sphr")
                   & (disc["outcome"] == "any")][0]
    disc.loc[i, ["auroc", "auroc_low", "auroc_high"]] = [0.93, 0.88, 0.97]
    changed = summary_paragraph(disc, heldout, rows=rows)
    assert "highest AUROC is SPHR at 0.93 (95% CI 0.88-0.97)" in changed and changed != text
    disc.loc[i, ["rr_higher_vs_normal", "rr_low", "rr_high", "n_higher"]] = [3.5, 1.8, 6.9, 12]
    assert "SPHR 3.50 (1.80-6.90, 12 in Higher Risk)" in summary_paragraph(disc, heldout,
                                                                          rows=rows)
    # one test per claim: the Katz interval is no verdict; the exact, Holm-adjusted test is
    assert "beyond chance" not in summary_paragraph(disc, heldout, rows=rows)
    assert "exact test with Holm's correction" in summary_paragraph(disc, heldout, rows=rows)
    # a Higher Risk group of fewer than 10 people gets no estimate
    disc.loc[i, "n_higher"] = 1
    few = summary_paragraph(disc, heldout, rows=rows)
    assert "SPHR 3.50" not in few and "Too few in Higher Risk" in few
    # the shares come from the rows: make every female SPHR row Normal
    moved = rows.copy()
    moved.loc[(moved["sex"] == "female") & (moved["method"] == "sphr"), "group"] = "Normal"
    assert "(SPHR 100 / 0 / 0%)" in summary_paragraph(disc, heldout, rows=moved)
    # nobody in Higher Risk: the paragraph says the question cannot be answered yet
    none = disc.assign(rr_higher_vs_normal=np.nan, n_higher=0)
    assert "cannot be told yet" in summary_paragraph(none, heldout, rows=rows)


def _evaluate_dir(tmp_path, bump: float = 0.0):
    """RUN/evaluate with representations.parquet and losses.parquet for both sexes."""
    from sphr.evaluate.paper import LOSSES
    from sphr.evaluate.tables import loss_table, representation_table

    rng = np.random.default_rng(3)
    reps, losses = [], []
    for sex in ("female", "male"):
        recs = [{"task": t, "metric": m, "representation": r, "classifier": c,
                 "mean": 0.55 + 0.05 * rng.random() + (bump if r == "sphr" else 0),
                 "sd": 0.01, "n_splits": 5}
                for t in ("binary", "multi") for m in ("weighted_f1", "micro_f1")
                for r in ("raw", "pca", "ica", "deep_patient", "sphr")
                for c in ("knn", "lda", "nn_ehr", "xgboost")]
        reps.append(representation_table(pd.DataFrame(recs), sex))
        recs = [{"task": t, "metric": "weighted_f1", "loss": x, "classifier": "xgboost",
                 "mean": 0.6 + 0.05 * rng.random(), "sd": 0.02, "n_splits": 5}
                for t in ("binary", "multi") for x in LOSSES]
        losses.append(loss_table(pd.DataFrame(recs), sex))
    out = tmp_path / "evaluate"
    out.mkdir(parents=True)
    pd.concat(reps, ignore_index=True).to_parquet(out / "representations.parquet")
    pd.concat(losses, ignore_index=True).to_parquet(out / "losses.parquet")
    return out


def test_evaluate_report(tmp_path):
    from sphr.evaluate.report import write_evaluate_report

    out = _evaluate_dir(tmp_path)
    with printing_pdfs():
        html = write_evaluate_report(out)
    text = html.read_text()
    assert "http://" not in text and "https://" not in text
    assert re.findall(r"<h2>(.*?)</h2>", text)[0] == "Summary"
    for alt in ("weighted F1 heatmap", "ranking of the representations", "loss comparison"):
        assert f'alt="{alt}' in text
    assert text.index('alt="weighted F1 heatmap') < text.index('<details class="appendix"')
    assert "Table 2" in text and "Tables A3 and A5" in text  # the paper's tables named
    if HAS_CHROMIUM:
        pdf = out / "report.pdf"
        assert 3 <= pdf_pages(pdf) <= 12
        pages = dict(pdf_outline(pdf))
        assert pages["Summary"] == 1 and pages["Summary"] < pages["Loss comparison"] \
            <= pages["Tables: ours beside the paper"]


def test_evaluate_sentences_follow_the_numbers(tmp_path):
    from sphr.evaluate.report import evaluate_sentences

    low = pd.read_parquet(_evaluate_dir(tmp_path / "a", bump=-0.2) / "representations.parquet")
    high = pd.read_parquet(_evaluate_dir(tmp_path / "b", bump=0.3) / "representations.parquet")
    text_low, text_high = " ".join(evaluate_sentences(low)), " ".join(evaluate_sentences(high))
    assert "best per classifier here SPHR (4 of 4)" in text_high
    assert "best per classifier here SPHR" not in text_low
    assert text_low != text_high


@pytest.mark.parametrize("pdf_env, why", [("1", "no chromium"), ("0", "SPHR_PDF=0")])
def test_a_skipped_pdf_drops_the_stale_one_with_one_log_line(tmp_path, monkeypatch, caplog,
                                                             pdf_env, why):
    """No Chromium on PATH, or ``SPHR_PDF=0`` on purpose: the HTML alone, an older PDF removed
    (it would contradict the new HTML), one log line saying why, and no Chromium started."""
    import sphr.report
    from sphr.evaluate.report import write_evaluate_report

    def no_browser(*args, **kwargs):
        raise AssertionError("Chromium started")

    out = _evaluate_dir(tmp_path)
    (out / "report.pdf").write_bytes(b"%PDF-1.4 stale")  # from an earlier run
    monkeypatch.setattr(sphr.report, "_chromium", no_browser)
    if pdf_env == "1":
        monkeypatch.setattr(sphr.report, "find_chromium", lambda: None)
    monkeypatch.setenv("SPHR_PDF", pdf_env)
    with caplog.at_level(logging.INFO, logger="sphr.report"):
        html = write_evaluate_report(out)
    assert html.is_file() and not (out / "report.pdf").exists()
    lines = [r for r in caplog.records if r.name == "sphr.report"]
    assert len(lines) == 1 and why in lines[0].getMessage()


@pytest.mark.parametrize("value, wanted", [("0", False), ("False", False), ("no", False),
                                           ("1", True), ("yes", True)])
def test_sphr_pdf_says_whether_reports_get_their_pdf(monkeypatch, value, wanted):
    import sphr.report

    monkeypatch.setenv("SPHR_PDF", value)
    assert sphr.report.pdfs_wanted() is wanted


def test_linked_cumulative_incidence_becomes_the_central_figure(tmp_path, risk_inputs):
    """``linked`` (sphr.risk.validation.linked's frames): its curves come first, the forest
    after."""
    from sphr.risk.report import write_report
    from sphr.risk.validation.curves import cumulative_new_diagnosis

    inp = risk_inputs
    curves = cumulative_new_diagnosis(inp["rows"], inp["followup"])
    linked = {"cumulative_incidence": curves[["sex", "method", "outcome", "group", "time_years",
                                              "cum_inc", "low", "high"]],
              "hazard_ratio": pd.DataFrame({"sex": ["female"], "method": ["sphr"],
                                            "outcome": ["any"], "hr": [2.1], "hr_low": [1.4],
                                            "hr_high": [3.2], "hr_outside": [1.8],
                                            "hr_outside_low": [1.2], "hr_outside_high": [2.7]}),
              "discrimination": pd.DataFrame({
                  "sex": ["female"] * 3, "method": ["sphr", "raw_euclidean", "age"],
                  "outcome": ["any"] * 3, "n": [500] * 3, "events": [40] * 3,
                  "c_index": [0.64, 0.58, 0.66], "c_index_low": [0.55, 0.5, 0.6],
                  "c_index_high": [0.73, 0.66, 0.72], "auroc_10y": [0.65, 0.6, 0.67],
                  "auroc_10y_low": [0.55, 0.5, 0.6], "auroc_10y_high": [0.75, 0.7, 0.74]})}
    summary = {"run": str(tmp_path), "sexes": ["female", "male"], "methods": list(METHODS),
               "skipped": {}, **BOUNDS}
    html = write_report(tmp_path / "report.html", rows=inp["rows"], thresholds=inp["thresholds"],
                        validation=None, correlation=None, summary=summary,
                        heldout=inp["heldout"], discrimination=inp["discrimination"],
                        linked=linked, pdf=False)
    text = html.with_name("report_appendix.html").read_text()
    first = text.index('alt="cumulative new diagnoses by group, female')
    assert text.index("Does a higher score come before any") < first
    assert first < text.index('alt="forest plot: C-index, AUROC and hazard ratio per method, any')
    assert "Linked records: hazard ratio" in text and "No followup.parquet" in text
    # the paragraph reads the linked C-index and hazard ratio too
    assert ("Any (linked records; 500 held-out people, 40 events): the best C-index among the "
            "distances is SPHR 0.64 (0.55-0.73); for scale, age alone 0.66. Outside Normal vs "
            "Normal, age-adjusted hazard ratio above 1 for SPHR.") in text
    assert not (tmp_path / "report.pdf").exists()
