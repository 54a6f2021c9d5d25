"""The self-contained HTML risk report (inline CSS, PNG plots as data URIs, no network).

:func:`render_png` screenshots it with headless Chromium so the report can be
looked at in a test or a script.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.io import write_text
from sphr.plots import new_figure, png_data_uri, to_png
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_Q, NORMAL_Q
from sphr.risk.paper import PAPER_TIME_CORRELATION, paper_cell
from sphr.risk.spaces import DISPLAY
from sphr.risk.validation import higher_vs_normal, wide_table

#: every figure lists methods in this order
METHOD_ORDER: tuple[str, ...] = ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation",
                                 "p0_euclidean", "deep_patient", "sphr", "phenoage",
                                 "supervised_xgboost", "age")

COLORS = {"Normal": "#4c9a2a", "Lower Risk": "#e0a100", "Higher Risk": "#c0392b"}
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;
max-width:1220px}
h1{font-size:26px}h2{font-size:20px;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:16px}table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f0f0f0}
td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:13px}
code{background:#f4f4f4;padding:1px 3px}img{max-width:100%;border:1px solid #eee}
.defs li{margin:4px 0}
"""


def _img(png: bytes, alt: str) -> str:
    return f'<img src="{png_data_uri(png)}" alt="{html.escape(alt)}">'


def _table(df: pd.DataFrame, floatfmt: str = "{:.4g}") -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep="-",
                      float_format=lambda v: floatfmt.format(v))


def shares(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Percent of participants in each group, plus the "closer than Normal" percent."""
    counts = rows.groupby([*by, "group"]).size().unstack("group", fill_value=0)
    counts = counts.reindex(columns=list(GROUPS), fill_value=0)
    counts.columns.name = None
    n = counts.sum(axis=1)
    out = (100 * counts.div(n, axis=0)).round(2)
    below = (rows["distance"] < rows["normal_low"]).groupby([rows[c] for c in by]).mean()
    out["closer than Normal %"] = (100 * below).round(2)
    out.insert(0, "n", n)
    return out.reset_index()


def _share_plot(rows: pd.DataFrame, mode: str) -> bytes:
    sexes = sorted(rows["sex"].unique())
    fig, axes = new_figure(6.0 * len(sexes), 3.2, ncols=len(sexes), squeeze=False)
    for ax, sex in zip(axes[0], sexes, strict=True):
        s = shares(rows[(rows["sex"] == sex) & (rows["mode"] == mode)], ["method"])
        left = np.zeros(len(s))
        labels = [DISPLAY.get(m, m) for m in s["method"]]
        for g in GROUPS:
            ax.barh(labels, s[g], left=left, color=COLORS[g], label=g)
            left += s[g].to_numpy()
        ax.set_title(f"{sex}, mode {mode}")
        ax.set_xlabel("% of participants")
        ax.set_xlim(0, 100)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return to_png(fig)


def _distance_plot(rows: pd.DataFrame, sex: str, mode: str) -> bytes:
    sub = rows[(rows["sex"] == sex) & (rows["mode"] == mode)]
    methods = list(dict.fromkeys(sub["method"]))
    fig, axes = new_figure(3.0 * max(1, len(methods)), 2.8, ncols=max(1, len(methods)), squeeze=False)
    for ax, method in zip(axes[0], methods, strict=False):
        m = sub[sub["method"] == method]
        # distance over the age group's Normal upper bound: one scale for every age group
        rel = m["distance"] / m["normal_high"].where(m["normal_high"] > 0, np.nan)
        hi = np.nanpercentile(rel, 99.5) if rel.notna().any() else 1.0
        bins = np.linspace(0, max(hi, 1.05), 50)
        ax.hist([rel[m["group"] == g].clip(upper=bins[-1]) for g in GROUPS], bins=bins,
                stacked=True, color=[COLORS[g] for g in GROUPS], label=list(GROUPS))
        ax.axvline(1.0, color="k", lw=0.8, ls="--")
        ax.set_title(DISPLAY.get(method, method), fontsize=10)
        ax.set_xlabel("distance / Normal upper bound", fontsize=8)
    axes[0][0].legend(fontsize=7)
    return to_png(fig)


def _validation_plot(validation: pd.DataFrame, mode: str) -> bytes:
    v = validation[(validation["mode"] == mode) & (validation["condition"] == "any")]
    sexes = sorted(v["sex"].unique())
    fig, axes = new_figure(6.0 * max(1, len(sexes)), 3.2, ncols=max(1, len(sexes)), squeeze=False)
    for ax, sex in zip(axes[0], sexes, strict=False):
        s = v[v["sex"] == sex]
        methods = list(dict.fromkeys(s["method"]))
        x = np.arange(len(methods))
        for k, g in enumerate(GROUPS):
            r = s[s["group"] == g].set_index("method").reindex(methods)
            y = 100 * r["rate"].to_numpy(float)
            err = np.abs(100 * r[["rate_low", "rate_high"]].to_numpy(float).T - y)
            ax.bar(x + (k - 1) * 0.27, np.nan_to_num(y), 0.27, color=COLORS[g], label=g,
                   yerr=np.nan_to_num(err), capsize=2)
        ax.set_xticks(x, [DISPLAY.get(m, m) for m in methods], fontsize=8)
        ax.set_ylabel("% with any new condition")
        ax.set_title(f"{sex}, mode {mode} (Wilson 95% CI)")
    axes[0][0].legend(fontsize=8)
    return to_png(fig)


def _forest_plot(disc: pd.DataFrame, outcome: str = "any") -> bytes:
    """AUROC (first repeat visit) and C-index (visits 1-3) per method with 95% CIs, per sex."""
    d = disc[disc["outcome"] == outcome]
    sexes = sorted(d["sex"].unique())
    methods = [m for m in METHOD_ORDER if m in set(d["method"])]
    fig, axes = new_figure(5.2 * max(1, len(sexes)), 0.42 * len(methods) + 1.4,
                           ncols=max(1, len(sexes)), squeeze=False)
    for ax, sex in zip(axes[0], sexes, strict=False):
        s = d[d["sex"] == sex].set_index("method").reindex(methods)
        y = np.arange(len(methods))[::-1]
        for k, (col, color, label) in enumerate((("auroc", "#2c6fbb", "AUROC, visit 1"),
                                                 ("c_index", "#7b3294", "C-index, visits 1-3"))):
            v = s[col].to_numpy(float)
            lo, hi = s[f"{col}_low"].to_numpy(float), s[f"{col}_high"].to_numpy(float)
            yy = y + (0.14 if k == 0 else -0.14)
            ax.errorbar(v, yy, xerr=[np.nan_to_num(v - lo), np.nan_to_num(hi - v)], fmt="o",
                        color=color, ms=4, capsize=2, label=label)
        ax.axvline(0.5, color="k", lw=0.8, ls="--")
        ax.set_yticks(y, [DISPLAY.get(m, m) for m in methods], fontsize=8)
        ax.set_xlim(0, 1)
        n, ev = int(s["n"].max()), int(s["events"].max())
        ax.set_xlabel("AUROC / C-index (0.5 = chance)", fontsize=8)
        ax.set_title(f"{sex}: n={n} at visit 1, {ev} with a new diagnosis", fontsize=9)
    axes[0][0].legend(fontsize=7, loc="lower left")
    return to_png(fig)


def summary_sentences(discrimination: pd.DataFrame | None, heldout: pd.DataFrame,
                      outcome: str = "any") -> list[str]:
    """Plain-language reading of the numbers (generated, never hand-written claims)."""
    out = []
    cal = heldout[(heldout["mode"] == "calibrated") & (heldout["partition"] == "test")]
    for sex, g in cal.groupby("sex"):
        lo, hi = g["normal_share"].min(), g["normal_share"].max()
        out.append(f"{sex.capitalize()}: of the held-out bona fide healthy (n={int(g['n'].max())}), "
                   f"{100 * lo:.0f}-{100 * hi:.0f}% land in Normal depending on the method "
                   "(the calibrated bound targets 95%).")
    if discrimination is None or discrimination.empty:
        return out
    d = discrimination[(discrimination["outcome"] == outcome)
                       & (discrimination["method"] != "age")]
    for sex, g in d.groupby("sex"):
        events, n = int(g["events"].max()), int(g["n"].max())
        g = g.dropna(subset=["auroc"])
        if g.empty:
            out.append(f"{sex.capitalize()}: {events} of {n} held-out participants reported a "
                       "new diagnosis at the first repeat visit: too few to measure "
                       "discrimination.")
            continue
        above = g[g["auroc_low"] > 0.5]["method"].map(lambda m: DISPLAY.get(m, m)).tolist()
        best = g.loc[g["auroc"].idxmax()]
        text = (f"{sex.capitalize()} (n={int(best['n'])}, {int(best['events'])} with a new "
                f"diagnosis): the highest AUROC is {DISPLAY.get(best['method'], best['method'])} "
                f"at {best['auroc']:.2f} (95% CI {best['auroc_low']:.2f}-{best['auroc_high']:.2f}). ")
        text += (("Methods whose interval lies above chance: " + ", ".join(above) + ".")
                 if above else "No method's 95% interval lies above chance (0.5).")
        out.append(text)
    return out


def _definitions(summary: dict[str, Any]) -> str:
    n_lo, n_hi = NORMAL_Q
    l_lo, l_hi = LOWER_Q
    return f"""<ul class="defs">
<li><b>Health distance</b> s(p) = ||G(p) - r<sub>g</sub>||, Euclidean in the space of the method's
representation G, with r<sub>g</sub> = G(P50(B<sub>g</sub>)): the element-wise median of the bona fide
healthy (BFH) training participants of the participant's sex and age group g (real rows only,
never augmented or test rows). Features are the per-sex quantile-normalized values.</li>
<li><b>Methods</b>: Euclidean (raw) = G identity on all normalized features; Mahalanobis =
Euclidean after whitening with the Ledoit-Wolf covariance of the sex's BFH training rows; P0 =
identity on the normalized P0 markers (cholesterol, HDL, LDL, triglycerides, glucose, HbA1c, CRP);
DeepPatient = the fitted stacked denoising autoencoder; SPHR = the NPLB-trained network.</li>
<li><b>Mode <code>paper</code></b> (Appendix B, Eq. A.4 as written): Normal interval
N = [d(G(P{n_lo}), r), d(G(P{n_hi}), r)], Lower Risk interval LR = [d(G(P{l_lo:g}), r),
d(G(P{l_hi:g}), r)], P<sub>q</sub> the element-wise q-th percentile vector of B<sub>g</sub>.</li>
<li><b>Mode <code>calibrated</code></b> (default): the score is the distance standardized per age
group among the training BFH (median and IQR); its bounds are one-sided split-conformal bounds from
the <i>calibration</i> BFH, real participants set aside before any fit: Normal if the score is at
most the 95% bound, Lower Risk up to the 99% bound, Higher Risk beyond. A person closer to healthy
than most healthy people is Normal. With fewer than 99 calibration BFH the 99% bound is a
log-normal prediction bound (column "bound_method" of the thresholds).</li>
<li><b>Groups in mode <code>paper</code></b> (Eq. A.5, closed intervals): Normal if s in N; Lower
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
<code>test</code> partition, whom no fit has seen, with a first repeat visit (instance 1); a new
diagnosis = positive at the repeat visit and negative at baseline. AUROC / C-index intervals:
participant bootstrap; Higher-vs-Normal p-values are Holm-adjusted over the whole table.</li>
</ul>"""


def _ci(v: float, lo: float, hi: float) -> str:
    return "-" if pd.isna(v) else (f"{v:.2f} [{lo:.2f}-{hi:.2f}]" if pd.notna(lo) else f"{v:.2f}")


def _discrimination_compact(disc: pd.DataFrame, outcome: str = "any") -> pd.DataFrame:
    d = disc[disc["outcome"] == outcome]
    out = pd.DataFrame({
        "sex": d["sex"], "method": [DISPLAY.get(m, m) for m in d["method"]],
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
                                        for r in d.itertuples()]})
    return out


def _heldout_compact(heldout: pd.DataFrame) -> pd.DataFrame:
    h = heldout[heldout["partition"] == "test"]
    cell = h.assign(cell=[f"{100 * r.normal_share:.1f}% [{100 * r.low:.1f}-{100 * r.high:.1f}] "
                          f"n={r.n}" for r in h.itertuples()])
    wide = cell.pivot_table(index="method", columns=["mode", "sex"], values="cell",
                            aggfunc="first")
    wide = wide.reindex([m for m in METHOD_ORDER if m in wide.index])
    wide.index = [DISPLAY.get(m, m) for m in wide.index]
    wide.columns = [f"{sex}, {mode}" for mode, sex in wide.columns]
    return wide.reset_index().rename(columns={"index": "method"})


def _people(rows: pd.DataFrame) -> pd.DataFrame:
    first = rows.drop_duplicates(["sex", "eid"])
    return first.groupby("sex").agg(
        participants=("eid", "size"),
        train=("partition", lambda p: int((p == "train").sum())),
        calibration=("partition", lambda p: int((p == "calibration").sum())),
        test=("partition", lambda p: int((p == "test").sum())),
        age_min=("age_years", "min"), age_max=("age_years", "max")).reset_index()


def write_report(path: Path, *, rows: pd.DataFrame, thresholds: pd.DataFrame,
                 validation: pd.DataFrame | None, correlation: pd.DataFrame | None,
                 summary: dict[str, Any], heldout: pd.DataFrame | None = None,
                 discrimination: pd.DataFrame | None = None) -> Path:
    modes = list(dict.fromkeys(rows["mode"]))
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>SPHR risk report</title>",
             f"<style>{CSS}</style></head><body>", "<h1>Single-visit health risk groups</h1>",
             "<h2>Summary</h2>",
             f"<p class='note'>Run <code>{html.escape(summary['run'])}</code>; methods "
             f"{', '.join(DISPLAY.get(m, m) for m in summary['methods'])}; "
             f"{len(rows)} rows in risk_groups.parquet.</p>", _table(_people(rows), "{:.0f}")]
    if summary.get("skipped"):
        parts.append("<p class='note'>Skipped: " + "; ".join(
            html.escape(f"{k}: {v}") for k, v in summary["skipped"].items()) + "</p>")
    if heldout is not None:
        parts.append("<ul>" + "".join(f"<li>{html.escape(t)}</li>"
                                      for t in summary_sentences(discrimination, heldout)) + "</ul>")
    if "calibrated" in modes:
        parts.append(_img(_share_plot(rows, "calibrated"), "group shares, calibrated"))
    if discrimination is not None and len(discrimination):
        parts.append("<h3>Does a higher score come before new disease?</h3><p class='note'>"
                     "Held-out apparently healthy participants; AUROC for a new diagnosis at the "
                     "first repeat visit, Harrell's C for the time to the first visit reporting "
                     "one (visits 1-3); 95% participant-bootstrap intervals. Age alone and the "
                     "supervised model (which uses the outcome) are references.</p>")
        parts.append(_img(_forest_plot(discrimination), "discrimination forest plot"))
        parts.append(_table(_discrimination_compact(discrimination)))
    if heldout is not None and len(heldout):
        parts.append("<h3>Held-out bona fide healthy in Normal</h3><p class='note'>Share of the "
                     "test partition's BFH in Normal, Wilson 95% CI, n; calibrated bounds "
                     "target 95% for people like the calibration set. All roles and modes: "
                     "appendix.</p>")
        parts.append(_table(_heldout_compact(heldout)))
    parts += ["<h2>Definitions</h2>", _definitions(summary)]

    parts.append("<h2>Validation against the repeat visit (Table 4 shape)</h2>")
    if validation is not None and len(validation):
        parts.append("<p class='note'>Cells: % (count/denominator) [Wilson 95% CI]. The paper "
                     "column gives Table 4 (women) / Table A7 (men) as N / LR / HR; '-' = not "
                     "published.</p>")
        for mode in modes:
            parts.append(_img(_validation_plot(validation, mode), f"validation {mode}"))
        wide = wide_table(validation)
        wide["paper N / LR / HR"] = [" / ".join(paper_cell(r.sex, r.method, r.measure, g) or "-"
                                               for g in GROUPS) for r in wide.itertuples()]
        parts.append(_table(wide))
        parts.append("<h3>Higher Risk vs Normal</h3><p class='note'>Share with a new condition "
                     "in Higher Risk vs Normal; p: one-sided Fisher exact test (HR &gt; N).</p>")
        parts.append(_table(higher_vs_normal(validation)))
        if correlation is not None:
            parts.append("<h3>Time to diagnosis (Appendix C)</h3><p class='note'>Pearson r of "
                         "health distance vs years to the first visit reporting a new diagnosis. "
                         "Paper (SPHR): " + ", ".join(f"{k} r={r} (p={p})" for k, (r, p) in
                                                      PAPER_TIME_CORRELATION.items()) + ".</p>")
            parts.append(_table(correlation))
    else:
        parts.append("<p>No followup.parquet: no validation.</p>")

    parts.append("<h2>Group shares</h2><p class='note'>Percent of all real participants (every "
                 "class, train and test) in each group; the validation table above gives the "
                 "shares within the validation population (Table 4's first row).</p>")
    for mode in modes:
        parts.append(_img(_share_plot(rows, mode), f"shares {mode}"))
    parts.append(_table(shares(rows, ["sex", "method", "mode"])))
    parts.append("<h3>By age group</h3>")
    parts.append(_table(shares(rows, ["sex", "mode", "method", "age_group"])))

    parts.append("<h2>Distance distributions per group</h2>")
    for sex in summary["sexes"]:
        for mode in modes:
            parts.append(f"<h3>{html.escape(sex)}, mode {html.escape(mode)}</h3>")
            parts.append(_img(_distance_plot(rows, sex, mode), f"distances {sex} {mode}"))

    if heldout is not None and len(heldout):
        parts.append("<h2>Held-out BFH, every role and mode</h2>")
        parts.append(_table(heldout, "{:.3f}"))
    parts.append("<h2>Thresholds used</h2>")
    parts.append(_table(thresholds, "{:.4f}"))
    hr = rows["group"] == HIGHER_RISK
    parts.append(f"<p class='note'>{int(hr.sum())} of {len(rows)} rows are Higher Risk.</p>")
    parts.append("</body></html>")
    return write_text("\n".join(parts), path)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render_png(html_path: str | Path, png_path: str | Path, *, width: int = 1280,
               height: int = 3000, timeout: float = 120.0) -> Path:
    """Screenshot an HTML file with headless Chromium (no network needed for our report)."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium / chromium-browser / google-chrome on PATH")
    html_path, png_path = Path(html_path).resolve(), Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-dev-shm-usage", f"--screenshot={png_path}",
           f"--window-size={width},{height}", html_path.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if not png_path.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): "
                           f"{proc.stderr[-500:]}")
    return png_path
