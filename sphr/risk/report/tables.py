"""The risk report's tables and text blocks: definitions, the compact discrimination and
held-out tables, the cohort table, the methods left unscored, provenance, shares by age
group and the thresholds."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd

from sphr.report import (
    table,
)
from sphr.risk.calibration import STANDARDIZATION_TEXT, TAIL_TEXT
from sphr.risk.intervals import HIGHER_RISK, LOWER_Q, LOWER_RISK, NORMAL, NORMAL_Q
from sphr.risk.report.names import age_order, main_outcome, method_name, ordered
from sphr.risk.validation.curves import OUTCOME, shares


def _ci(v: float, lo: float, hi: float) -> str:
    return "-" if pd.isna(v) else (f"{v:.2f} [{lo:.2f}-{hi:.2f}]" if pd.notna(lo) else f"{v:.2f}")


def tail_of(summary: dict[str, Any]) -> str:
    """The bounds' fallback a risk report's summary names (``[risk] tail_bound``)."""
    return summary["tail_bound"]


def _centile_paragraph(summary: dict[str, Any]) -> str:
    """The appendix's paragraph on the healthy-reference centile, in a cross-fit's report."""
    design = summary.get("design") or {}
    if not any(isinstance(d, dict) and d.get("validation") == "cross-fit"
               for d in design.values()):
        return ""
    return """<li><b>Healthy-reference centile</b> (cross-fit; column <code>centile</code> of
risk_groups.csv): of 100 bona fide healthy people of the same sex and age, how many are closer
to healthy than this person. A centile of 97 for a woman of 58 reads "farther from healthy than
97 of 100 healthy women of 58". It comes from every bona fide healthy person's out-of-fold
score: their typical score and its spread are modelled as smooth curves in age, the shape of
the distribution by a Yeo-Johnson transform, and the share farther out is read from the healthy
people themselves (the normal curve only beyond the last few of them). Normal is a centile up
to 95, Lower Risk 95 to 99, Higher Risk beyond 99; a healthy person's own centile comes from a
model fitted without their fold. This replaces the age-group bounds above in a cross-fitted run
(docs/METHODS.md, "Healthy-reference centiles").</li>
"""


def definitions(summary: dict[str, Any]) -> str:
    n_lo, n_hi = NORMAL_Q
    l_lo, l_hi = LOWER_Q
    standardization = summary["standardization"]
    standardized = STANDARDIZATION_TEXT[standardization]
    tail = TAIL_TEXT[tail_of(summary)]
    return f"""<ul class="defs">
<li><b>Health distance</b> s(p) = ||G(p) - r<sub>g</sub>||, Euclidean in the space of the method's
representation G, with r<sub>g</sub> = G(P50(B<sub>g</sub>)): the element-wise median of the \
bona fide
healthy (BFH) training participants of the participant's sex and age group g (real rows only,
never augmented or test rows). Features are the per-sex quantile-normalized values.</li>
<li><b>Methods</b>: Euclidean (raw) = G identity on all normalized features; Mahalanobis =
Euclidean after whitening with the Ledoit-Wolf covariance of the sex's BFH training rows; P0 =
identity on the normalized P0 markers (cholesterol, HDL, LDL, triglycerides, glucose, HbA1c, CRP);
DeepPatient = the fitted stacked denoising autoencoder; SPHR = the NPLB-trained network.</li>
<li><b>Mode <code>paper</code></b> (Appendix B, Eq. A.4 as written): Normal interval
N = [d(G(P{n_lo}), r), d(G(P{n_hi}), r)], Lower Risk interval LR = [d(G(P{l_lo:g}), r),
d(G(P{l_hi:g}), r)], P<sub>q</sub> the element-wise q-th percentile vector of B<sub>g</sub>.</li>
<li><b>Mode <code>calibrated</code></b> (default): the score is the distance {standardized}
(<code>[risk] standardization = "{standardization}"</code>); its bounds are one-sided
split-conformal bounds from the <i>calibration</i> BFH, real participants set aside before any
fit: Normal if the score is at
most the 95% bound, Lower Risk up to the 99% bound, Higher Risk beyond. A person closer to healthy
than most healthy people is Normal. With fewer than 99 calibration BFH the 99% bound is {tail}
(column "bound_method" of the thresholds).</li>
{_centile_paragraph(summary)}<li><b>Groups in mode <code>paper</code></b> (Eq. A.5, closed
intervals): Normal if s in N; Lower
Risk if s in LR but not in N; Higher Risk otherwise. Two-sided as written: a participant
<i>closer</i> to the reference than N's lower bound is not Normal (column "closer than Normal
%").</li>
<li><b>Homeostatic dysregulation</b>: Mahalanobis distance to one young reference (training BFH
aged at most 50, all features but age). <b>PhenoAge acceleration</b>: PhenoAge (Levine 2018) minus
its value predicted from age by a line fitted on the training partition. <b>Supervised
XGBoost</b>: cross-fitted prediction of a new diagnosis; it uses the outcome, a ceiling not a
peer.</li>
<li><b>Repairs</b>: an interval whose lower end exceeds its upper end is replaced by [min, max]
("normal_swapped" / "lower_swapped"); LR is widened to the hull of N and LR so that N &sube; LR
("lower_widened").</li>
<li><b>Age groups</b>: an age group with fewer than {summary.get('min_group_size', 10)} real BFH
training members borrows its neighbouring groups' members (nearest first), column
"pooled_groups". Ages outside every group join the nearest group.</li>
<li><b>Validation population</b>: apparently healthy participants (incl. BFH) of the
<code>test</code> partition, whom no fit has seen, with a repeat visit; a new diagnosis =
positive at a repeat visit and negative at baseline (self-report). AUROC: first repeat visit
(instance 1); C-index and the cumulative curves: time to the first visit reporting one
(instances 1-3), censored at the last visit with a known answer. Intervals: participant
bootstrap (AUROC, C-index), Katz (risk ratio), Greenwood log-log (curves), Wilson (shares);
Higher-vs-Normal p-values are Holm-adjusted over the whole table.</li>
</ul>"""


def discrimination_compact(disc: pd.DataFrame, outcome: str = OUTCOME) -> pd.DataFrame:
    d = disc[disc["outcome"] == outcome].copy()
    d["_o"] = d["method"].map({m: i for i, m in enumerate(ordered(d["method"].unique()))})
    d = d.sort_values(["sex", "_o"])
    return pd.DataFrame({
        "sex": d["sex"], "method": [method_name(m) for m in d["method"]],
        "n / events (visit 1)": [f"{r.n} / {r.events}" for r in d.itertuples()],
        "AUROC [95% CI]": [_ci(r.auroc, r.auroc_low, r.auroc_high) for r in d.itertuples()],
        "n / events (visits 1-3)": [f"{r.n_survival} / {r.events_survival}"
                                    for r in d.itertuples()],
        "C-index [95% CI]": [_ci(r.c_index, r.c_index_low, r.c_index_high)
                             for r in d.itertuples()],
        "AUROC - raw [95% CI], Holm p": [
            "-" if pd.isna(r.auroc_minus_raw) else
            f"{_ci(r.auroc_minus_raw, r.diff_low, r.diff_high)}, p={r.p_diff_holm:.2g}"
            for r in d.itertuples()],
        "risk ratio HR vs N [95% CI]": [_ci(r.rr_higher_vs_normal, r.rr_low, r.rr_high)
                                        for r in d.itertuples()],
        "n Higher / Normal": [f"{r.n_higher} / {r.n_normal}" for r in d.itertuples()]})


def heldout_compact(heldout: pd.DataFrame) -> pd.DataFrame:
    h = heldout[heldout["partition"] == "test"]
    cell = h.assign(cell=[f"{100 * r.normal_share:.1f}% [{100 * r.low:.1f}-{100 * r.high:.1f}] "
                          f"n={r.n}" for r in h.itertuples()])
    wide = cell.pivot_table(index="method", columns=["mode", "sex"], values="cell",
                            aggfunc="first")
    wide = wide.reindex(ordered(wide.index))
    wide.index = [method_name(m) for m in wide.index]
    wide.columns = [f"{sex}, {mode}" for mode, sex in wide.columns]
    return wide.reset_index().rename(columns={"index": "method"})


def cohort_table(rows: pd.DataFrame, discrimination: pd.DataFrame | None,
                  linked: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    first = rows.drop_duplicates(["sex", "eid"])
    out = first.groupby("sex").agg(
        participants=("eid", "size"),
        ages=("age_years", lambda a: f"{a.min():.0f}-{a.max():.0f}"),
        train=("partition", lambda p: int((p == "train").sum())),
        calibration=("partition", lambda p: int((p == "calibration").sum())),
        test=("partition", lambda p: int((p == "test").sum())),
        bfh=("label", lambda v: int((v == 2).sum()))).reset_index()
    out = out.rename(columns={"ages": "age range (years)", "bfh": "bona fide healthy",
                              "test": "test (held out)"})
    if discrimination is not None and len(discrimination):
        d = discrimination[discrimination["outcome"] == OUTCOME].groupby("sex")
        out["validated (repeat visit)"] = out["sex"].map(d["n_survival"].max()).fillna(0)
        out["new diagnoses"] = out["sex"].map(d["events_survival"].max()).fillna(0)
        out = out.astype({"validated (repeat visit)": int, "new diagnoses": int})
        if not out["validated (repeat visit)"].any():  # no repeat visits: nothing to say
            out = out.drop(columns=["validated (repeat visit)", "new diagnoses"])
    outcome = main_outcome(linked)
    if outcome is not None and linked.get("discrimination") is not None:
        d = linked["discrimination"]
        d = d[d["outcome"] == outcome].groupby("sex")
        what = outcome.replace("_", " ")
        out[f"test with {what} records"] = out["sex"].map(d["n"].max()).fillna(0).astype(int)
        out[f"{what} events"] = out["sex"].map(d["events"].max()).fillna(0).astype(int)
    return out


def relative(text: str, run: str) -> str:
    """``text`` with the run folder's absolute path written relative to it: a forwarded
    report does not show where it was made."""
    if not run:
        return text
    for root in {str(Path(run)), str(Path(run).resolve())}:
        text = text.replace(root + "/", "").replace(root, ".")
    return text


def unscored_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Every method not computed, or not for everyone: sex, method, people left unscored."""
    records = []
    for key, v in summary.get("unscored", {}).items():
        sex, method = key.split("/", 1)
        records.append({"sex": sex, "method": method_name(method),
                        "unscored": f"{v['n']:,} of {v['of']:,}"
                                    + (" (everyone)" if v["n"] == v["of"] else ""),
                        "reason": relative(str(v["reason"]), str(summary.get("run", "")))})
    return pd.DataFrame.from_records(records, columns=["sex", "method", "unscored", "reason"])


def provenance(path: Path, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines: export file and date, model version, run, methods, generated."""
    items: list[tuple[str, str]] = []
    ingest = Path(summary.get("run", ".")) / "ingest" / "ingest_report.json"
    if ingest.exists():
        info = json.loads(ingest.read_text())
        source = Path(str(info.get("source", "")))
        stamp = source if source.exists() else ingest
        date = dt.datetime.fromtimestamp(stamp.stat().st_mtime).strftime("%Y-%m-%d")
        n = info.get("participants")
        items.append(("export", f"{source.name} ({info.get('format', '?')}"
                                + (f", {n:,} participants" if isinstance(n, int) else "")
                                + f"), file dated {date}"))
    spec = path.parent / "model" / "risk_model.json"
    version = json.loads(spec.read_text()).get("version", "?") if spec.exists() else "?"
    settings = _settings_line(Path(summary.get("run", ".")))
    if settings:
        items.append(("settings", settings))
    items.append(("model version", f"{version} (model/risk_model.json); run folder "
                                   f"{Path(str(summary.get('run', ''))).name}; report generated "
                                   f"{dt.datetime.now():%Y-%m-%d %H:%M}"))
    return items


def _settings_line(run: Path) -> str | None:
    """Which profile and settings ran (``RUN/run_settings.json``, written by the pipeline's
    main command); None when the stages were run one by one."""
    path = run / "run_settings.json"
    if not path.exists():
        return None
    info = json.loads(path.read_text())
    parts = [f"profile {info.get('profile', '?')}"]
    for key in ("outcomes", "ranges", "config_file"):
        if info.get(key):
            parts.append(f"{key.replace('_', ' ')} {Path(str(info[key])).name}")
    risk = (info.get("stages") or {}).get("risk") or {}
    if risk.get("distance_space"):
        parts.append(f"distance space {risk['distance_space']}")
    for key in ("losses", "retrieval"):
        if key in info:
            parts.append(f"{'loss comparison' if key == 'losses' else key} "
                         f"{'on' if info[key] else 'off'}")
    return "; ".join(parts) + " (run_settings.json)"


def age_table(rows: pd.DataFrame, mode: str = "calibrated") -> pd.DataFrame:
    """Rows sex x method, a column per age group: "Normal / Lower / Higher" percent."""
    sub = rows[rows["mode"] == mode]
    tab = shares(sub, ["sex", "method", "age_group"])
    tab["cell"] = [f"{r[NORMAL]:.0f} / {r[LOWER_RISK]:.0f} / {r[HIGHER_RISK]:.0f} (n={r['n']})"
                   for _, r in tab.iterrows()]
    wide = tab.pivot_table(index=["sex", "method"], columns="age_group", values="cell",
                           aggfunc="first")
    wide = wide[[c for c in age_order(wide.columns.astype(str)) if c in wide.columns]]
    wide.columns = [str(c) for c in wide.columns]
    wide = wide.reset_index()
    wide["_o"] = wide["method"].map({m: i for i, m in enumerate(ordered(wide["method"].unique()))})
    wide = wide.sort_values(["sex", "_o"]).drop(columns="_o")
    wide["method"] = wide["method"].map(method_name)
    return wide


def thresholds_tables(thresholds: pd.DataFrame) -> list[tuple[str, str]]:
    out = []
    cal = thresholds[thresholds["mode"] == "calibrated"]
    if len(cal):
        g = cal.groupby(["sex", "method"], sort=False)
        t = g.agg(n_calibration_bfh=("n_calibration_bfh", "first"),
                  z_normal=("z_normal", "first"), z_lower=("z_lower", "first"),
                  bound_method=("bound_method", "first"),
                  normal_high_min=("normal_high", "min"), normal_high_max=("normal_high", "max"),
                  lower_high_min=("lower_high", "min"), lower_high_max=("lower_high", "max"),
                  ).reset_index()
        t["method"] = t["method"].map(method_name)
        out.append(("Mode calibrated: one bound per sex and method on the standardized score "
                    "(z); the distance bounds it implies range over the age groups (min-max).",
                    table(t, "{:.3f}")))
    paper = thresholds[thresholds["mode"] == "paper"]
    if len(paper):
        cols = [c for c in ("sex", "method", "age_group", "n_bfh", "n_reference", "pooled_groups",
                            "normal_low", "normal_high", "lower_low", "lower_high", "repairs")
                if c in paper]
        t = paper[cols].assign(method=paper["method"].map(method_name))
        out.append(("Mode paper: the intervals per sex, method and age group.",
                    table(t, "{:.3f}")))
    return out
