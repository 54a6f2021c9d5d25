"""Age structure of the classes: real people (the NHANES development set) beside the worlds.

Companion of ``benchmarks/sphr_age.py`` (docs/notes/SPHR_AGE.md, "Real people vs the synthetic
worlds"). SPHR's score runs against age and death in both synthetic worlds but not on the
development set; this benchmark asks whether the generator's age structure differs from
real people's. It reads finished runs (``NAME=RUN``; a run of the main command: its
``ingest/baseline.parquet`` and the class of every real cohort member in
``cohorts/SEX/{train,test,calibration}.parquet``, the project's own labels) and measures,
per sex, on everyone aged 40-73 in the cohort (all partitions, real rows only):

1. ``share``: by age group, the share of BFH, of the unhealthy, and of BFH among the
   healthy (BFH + apparently healthy), each with a Wilson 95% interval;
2. ``slopes``: per marker both runs have and per class (BFH, unhealthy, everyone), the
   slope on age of the marker's normal score (rank-based, within sex over the whole cohort:
   the scale the cohort's quantile normalization gives the network) in SD per decade with
   a 95% interval, and its Spearman correlation with age (Fisher interval);
3. ``gaps``: per marker, the mean normal score of the unhealthy minus that of the BFH under
   50 and at 60 or over (Welch 95% intervals) and its change;
4. ``drift``: the BFH's (and the unhealthy's) age slope projected on the direction from the
   young BFH to the young unhealthy (both under 50), over the complete-case markers, as the
   share of that distance covered per decade (participant bootstrap 95% interval; also in SD
   per decade along it): how fast a class moves toward the young unhealthy with age; also
   the cosine between the class's age-slope vector and that direction; each class's mean age,
   the norm of the unhealthy-BFH gap under 50 and at 60 or over, and the AUROC of age alone
   for unhealthy vs BFH;
5. ``dispersion``: by age band, the mean variance of the normal scores (everyone, BFH) and
   everyone's median distance to the band's BFH median;
6. ``compare``: each run's BFH, unhealthy and population slope minus the first run's, with
   its interval; and, for a run named ``linear``, the MARGINALS ``age_slope`` each copula
   marker would need for its population slope to match the first run's.

    python benchmarks/age_structure.py dev=runs/age_dev linear=runs/age_linear \\
        nonlinear=runs/age_nonlinear [--figure runs/age/age_structure.png] [--bootstrap 200]

The first run is the reference of ``compare`` (put the real one first). Last line: one
JSON object with every table.

``--proxy-export IN OUT`` writes a synthetic export with the development set's proxy
labels instead (HbA1c >= 48 as diabetes, no cancer, no medication; :func:`proxy_labels`),
to run the pipeline on the generator's markers with real people's label rules:

    python benchmarks/age_structure.py --proxy-export RUN/export/ukb_synthetic.csv proxy.csv
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from sphr import stats
from sphr.health_distance import health_distance, health_reference
from sphr.stats import rank_normal

SEXES = ("female", "male")
CLASSES = {"bfh": 2, "unhealthy": 0, "everyone": None}
AGES = (40, 73)
Z95 = 1.959964


# --------------------------------------------------------------------------- pure figures
def normal_scores(x: np.ndarray) -> np.ndarray:
    """Rank-based normal scores Phi^-1((rank - 0.5) / n), ties at their mid-rank; NaN kept."""
    return rank_normal(x, plotting="hazen")


def slope_ci(y: np.ndarray, age: np.ndarray, per: float = 10.0) -> dict[str, float]:
    """OLS slope of ``y`` on ``age`` per ``per`` years with a t-based 95% interval (NaN
    rows dropped)."""
    y, age = np.asarray(y, float), np.asarray(age, float)
    ok = ~(np.isnan(y) | np.isnan(age))
    y, age, n = y[ok], age[ok], int(ok.sum())
    if n < 3 or np.ptp(age) == 0:
        return {"slope": np.nan, "lo": np.nan, "hi": np.nan, "n": n}
    a = age - age.mean()
    b = float((a * (y - y.mean())).sum() / (a * a).sum())
    resid = y - y.mean() - b * a
    se = float(np.sqrt((resid ** 2).sum() / (n - 2) / (a * a).sum()))
    q = float(student_t.ppf(0.975, n - 2))
    return {"slope": b * per, "lo": (b - q * se) * per, "hi": (b + q * se) * per, "n": n}


def spearman_ci(y: np.ndarray, age: np.ndarray) -> dict[str, float]:
    """Spearman correlation with a Fisher-z 95% interval (SE sqrt(1.06 / (n - 3)),
    Fieller, Hartley and Pearson 1957)."""
    y, age = np.asarray(y, float), np.asarray(age, float)
    ok = ~(np.isnan(y) | np.isnan(age))
    n = int(ok.sum())
    if n < 5:
        return {"r": np.nan, "lo": np.nan, "hi": np.nan, "n": n}
    r = stats.spearman(y[ok], age[ok])
    z, se = np.arctanh(np.clip(r, -0.9999, 0.9999)), np.sqrt(1.06 / (n - 3))
    return {"r": r, "lo": float(np.tanh(z - Z95 * se)), "hi": float(np.tanh(z + Z95 * se)), "n": n}


def mean_diff_ci(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """mean(a) - mean(b) with a Welch (normal) 95% interval; NaN dropped."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if a.size < 2 or b.size < 2:
        return {"diff": np.nan, "lo": np.nan, "hi": np.nan, "se": np.nan,
                "n_a": int(a.size), "n_b": int(b.size)}
    d = float(a.mean() - b.mean())
    se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
    return {"diff": d, "lo": d - Z95 * se, "hi": d + Z95 * se, "se": se,
            "n_a": int(a.size), "n_b": int(b.size)}


def wilson(k: int, n: int) -> tuple[float, float, float]:
    """Share k/n with its Wilson 95% interval."""
    if n == 0:
        return (np.nan, np.nan, np.nan)
    p = k / n
    centre = (p + Z95 ** 2 / (2 * n)) / (1 + Z95 ** 2 / n)
    half = Z95 * np.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / (1 + Z95 ** 2 / n)
    return (p, float(centre - half), float(centre + half))


def directions(z: np.ndarray, age: np.ndarray, label: np.ndarray,
               cls: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(age-slope vector of class ``cls`` (None: everyone) in SD per decade, the young (under
    50) BFH-to-unhealthy mean difference); ``z``: (n, markers) normal scores, complete cases."""
    young = age < 50
    u = z[young & (label == 0)].mean(0) - z[young & (label == 2)].mean(0)
    m = np.ones(len(label), bool) if cls is None else label == cls
    a = age[m] - age[m].mean()
    return 10 * (a @ (z[m] - z[m].mean(0))) / (a @ a), u


def drift(z: np.ndarray, age: np.ndarray, label: np.ndarray, cls: int | None) -> float:
    """Share of the young (under 50) BFH-to-unhealthy distance that class ``cls`` (None:
    everyone) covers per decade: its age-slope vector projected on that direction."""
    slopes, u = directions(z, age, label, cls)
    return float(slopes @ u / (u @ u))


def alignment(z: np.ndarray, age: np.ndarray, label: np.ndarray, cls: int | None) -> float:
    """Cosine between class ``cls``'s age-slope vector and the young BFH-to-unhealthy
    direction: 1 when ageing moves the class straight toward the young unhealthy."""
    slopes, u = directions(z, age, label, cls)
    return float(slopes @ u / (np.linalg.norm(slopes) * np.linalg.norm(u)))


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """AUROC of ``score`` for ``positive`` (:func:`sphr.stats.auroc`)."""
    return stats.auroc(positive, score)


# --------------------------------------------------------------------------- tables
def add_scores(people: pd.DataFrame, markers: list[str]) -> pd.DataFrame:
    """``z_MARKER``: each marker's normal score within sex (all classes together)."""
    out = people.copy()
    for m in markers:
        out[f"z_{m}"] = np.nan
        for sex in SEXES:
            sel = (out["sex"] == sex).to_numpy()
            out.loc[sel, f"z_{m}"] = normal_scores(out.loc[sel, m].to_numpy(float))
    return out


def _members(p: pd.DataFrame, cls: int | None) -> pd.DataFrame:
    return p if cls is None else p[p["label"] == cls]


def share_table(people: pd.DataFrame, groups: tuple[tuple[int, int], ...]) -> pd.DataFrame:
    """Per sex and age group: n, and the shares of BFH, of the unhealthy and of BFH among
    the healthy (Wilson 95% intervals)."""
    rows = []
    for sex in SEXES:
        p = people[people["sex"] == sex]
        for lo, hi in groups:
            g = p[(p["age"] >= lo) & (p["age"] <= hi)]
            lab = g["label"].to_numpy()
            k_b, k_u, n = int((lab == 2).sum()), int((lab == 0).sum()), len(g)
            row = {"sex": sex, "group": f"{max(lo, AGES[0])}-{min(hi, AGES[1])}", "n": n,
                   "n_bfh": k_b, "n_unhealthy": k_u}
            for name, (k, m) in {"bfh": (k_b, n), "unhealthy": (k_u, n),
                                 "bfh_of_healthy": (k_b, n - k_u)}.items():
                row[name], row[f"{name}_lo"], row[f"{name}_hi"] = wilson(k, m)
            rows.append(row)
    return pd.DataFrame(rows)


def slope_table(people: pd.DataFrame, markers: list[str]) -> pd.DataFrame:
    """Per sex, marker and class: the normal score's slope on age (SD per decade) and its
    Spearman correlation with age, with 95% intervals."""
    rows = []
    for sex in SEXES:
        p = people[people["sex"] == sex]
        for m in markers:
            for name, cls in CLASSES.items():
                q = _members(p, cls)
                s = slope_ci(q[f"z_{m}"].to_numpy(float), q["age"].to_numpy(float))
                r = spearman_ci(q[f"z_{m}"].to_numpy(float), q["age"].to_numpy(float))
                rows.append({"sex": sex, "marker": m, "class": name, **s,
                             "r": r["r"], "r_lo": r["lo"], "r_hi": r["hi"]})
    return pd.DataFrame(rows)


def gap_table(people: pd.DataFrame, markers: list[str]) -> pd.DataFrame:
    """Per sex and marker: mean normal score of the unhealthy minus the BFH's, under 50 and
    at 60 or over, and the change (60+ minus under 50), with 95% intervals."""
    rows = []
    for sex in SEXES:
        p = people[people["sex"] == sex]
        for m in markers:
            row: dict = {"sex": sex, "marker": m}
            for band, sel in (("under_50", p["age"] < 50), ("60_or_over", p["age"] >= 60)):
                q = p[sel]
                d = mean_diff_ci(q.loc[q["label"] == 0, f"z_{m}"], q.loc[q["label"] == 2, f"z_{m}"])
                row.update({band: d["diff"], f"{band}_lo": d["lo"], f"{band}_hi": d["hi"],
                            f"{band}_se": d["se"], f"{band}_n": [d["n_a"], d["n_b"]]})
            se = np.hypot(row["under_50_se"], row["60_or_over_se"])
            row["change"] = row["60_or_over"] - row["under_50"]
            row["change_lo"], row["change_hi"] = row["change"] - Z95 * se, row["change"] + Z95 * se
            rows.append(row)
    return pd.DataFrame(rows)


def drift_table(people: pd.DataFrame, markers: list[str], n_bootstrap: int = 200,
                seed: int = 0) -> pd.DataFrame:
    """Per sex: each class's drift toward the young unhealthy (:func:`drift`) with a
    participant-bootstrap 95% interval, its mean age, the norm of the unhealthy-BFH
    mean-score gap under 50 and at 60+, and the AUROC of age for unhealthy vs BFH."""
    rng = np.random.default_rng(seed)
    rows = []
    for sex in SEXES:
        p = people[people["sex"] == sex].dropna(subset=[f"z_{m}" for m in markers])
        z = p[[f"z_{m}" for m in markers]].to_numpy(float)
        age, lab = p["age"].to_numpy(float), p["label"].to_numpy()
        idx = [rng.integers(0, len(p), len(p)) for _ in range(n_bootstrap)]
        ub = np.isin(lab, (0, 2))
        base = {"sex": sex, "n": len(p),
                "age_auroc_unhealthy_vs_bfh": auroc(age[ub], lab[ub] == 0)}
        for band, sel in (("under_50", age < 50), ("60_or_over", age >= 60)):
            u = z[sel & (lab == 0)].mean(0) - z[sel & (lab == 2)].mean(0)
            base[f"gap_norm_{band}"] = float(np.linalg.norm(u))
        for name, cls in (("bfh", 2), ("unhealthy", 0), ("apparently_healthy", 1),
                          ("everyone", None)):
            boot = [drift(z[i], age[i], lab[i], cls) for i in idx]
            lo, hi = np.percentile(boot, [2.5, 97.5]) if boot else (np.nan, np.nan)
            m = np.ones(len(lab), bool) if cls is None else lab == cls
            rows.append({**base, "class": name, "n_class": int(m.sum()),
                         "mean_age": float(age[m].mean()),
                         "drift": drift(z, age, lab, cls), "lo": float(lo), "hi": float(hi),
                         "along_sd_per_decade": drift(z, age, lab, cls) * base["gap_norm_under_50"],
                         "cosine": alignment(z, age, lab, cls)})
    return pd.DataFrame(rows)


def dispersion_table(people: pd.DataFrame, markers: list[str]) -> pd.DataFrame:
    """Per sex and age band: the mean variance of the markers' normal scores (everyone, BFH)
    and the median Euclidean distance of everyone to the band's BFH median: do people spread
    out with age?"""
    rows = []
    for sex in SEXES:
        p = people[people["sex"] == sex].dropna(subset=[f"z_{m}" for m in markers])
        for lo, hi in ((AGES[0], 49), (50, 59), (60, AGES[1])):
            g = p[(p["age"] >= lo) & (p["age"] <= hi)]
            z = g[[f"z_{m}" for m in markers]].to_numpy(float)
            b = z[g["label"].to_numpy() == 2]
            rows.append({"sex": sex, "band": f"{lo}-{hi}", "n": len(g), "n_bfh": len(b),
                         "variance": float(z.var(0, ddof=1).mean()),
                         "variance_bfh": float(b.var(0, ddof=1).mean()) if len(b) > 1 else np.nan,
                         "distance_to_bfh_median": float(np.median(
                             health_distance(z, health_reference(
                                 b, reference="median_of_embedded")))) if len(b) else np.nan})
    return pd.DataFrame(rows)


def compare_table(slopes: dict[str, pd.DataFrame], cls: str = "bfh") -> pd.DataFrame:
    """Each run's slope of class ``cls`` minus the first run's, per sex and marker, with a
    95% interval (independent samples; SEs from the t intervals)."""
    names = list(slopes)
    ref = slopes[names[0]].query("`class` == @cls").set_index(["sex", "marker"])
    rows = []
    for name in names[1:]:
        other = slopes[name].query("`class` == @cls").set_index(["sex", "marker"])
        for key in ref.index.intersection(other.index):
            a, b = other.loc[key], ref.loc[key]
            se = np.hypot((a["hi"] - a["lo"]) / (2 * Z95), (b["hi"] - b["lo"]) / (2 * Z95))
            d = float(a["slope"] - b["slope"])
            rows.append({"run": name, "sex": key[0], "marker": key[1], "slope": float(a["slope"]),
                         "reference": float(b["slope"]), "diff": d, "lo": d - Z95 * se,
                         "hi": d + Z95 * se})
    return pd.DataFrame(rows)


def age_slope_proposal(compare: pd.DataFrame, world: str = "linear") -> pd.DataFrame:
    """What each copula marker's ``age_slope`` (sphr/synth/params.py, MARGINALS; one value
    for both sexes today) would be, per sex, if the world's population slope (class
    ``everyone``) matched the reference run's: current + (reference - world) / 10 x the
    marginal's scale (its SD for a normal marginal, its log-scale sigma for a log-normal one).
    ``compare``: :func:`compare_table` of class ``everyone``; markers outside the copula
    (identities, the white-cell differential) get no row."""
    from sphr.synth.params import MARGINALS

    rows = []
    c = compare[compare["run"] == world]
    for marker, g in c.groupby("marker"):
        if marker not in MARGINALS:
            continue
        m = MARGINALS[marker]
        sd, mean = np.array(m.sd, float), np.array(m.mean, float)
        scale = sd if m.kind == "normal" else np.sqrt(np.log1p((sd / mean) ** 2))
        row = {"marker": marker, "kind": m.kind, "age_slope": m.age_slope,
               "delta_half_width": float(((g["hi"] - g["lo"]) / 2).max())}
        for j, sex in enumerate(SEXES):
            d = -float(g.set_index("sex")["diff"].get(sex, np.nan))
            row.update({f"scale_{sex}": float(scale[j]), f"delta_{sex}": d,
                         f"proposed_{sex}": m.age_slope + d / 10 * float(scale[j])})
        rows.append(row)
    return pd.DataFrame(rows)


def proxy_labels(export: pd.DataFrame) -> pd.DataFrame:
    """A ukbconv export (all columns as text) with the NHANES development set's proxy
    condition answers (sphr/data/real/README.md): diabetes (2443) = HbA1c (30750) >= 48
    mmol/mol (blank where HbA1c is), cancer (2453) = 0, other serious condition (2473) kept,
    medication = -7 "none of the above" for everyone (6177 men, 6153 women); instance 0
    only. The markers are left as they are (a treated value stays treated, as in real
    people whose treatment nobody recorded)."""
    out = export.copy()
    hba1c = pd.to_numeric(out["30750-0.0"], errors="coerce")
    out["2443-0.0"] = np.where(hba1c.isna(), "", np.where(hba1c >= 48, "1", "0"))
    out["2453-0.0"] = "0"
    for c in [c for c in out.columns if c.startswith(("6177-0.", "6153-0."))]:
        out[c] = ""
    male = (out["31-0.0"] == "1").to_numpy()
    out.loc[male, "6177-0.0"] = "-7"
    out.loc[~male, "6153-0.0"] = "-7"
    return out


# --------------------------------------------------------------------------- runs
def load_people(run: Path) -> tuple[pd.DataFrame, list[str]]:
    """Every real cohort member aged 40-73 (both sexes, all partitions) with class, age and
    raw baseline values; and the cohort features both sexes share."""
    parts, features = [], None
    for sex in SEXES:
        d = run / "cohorts" / sex
        feats = json.loads((d / "features.json").read_text())
        feats = feats["features"] if isinstance(feats, dict) else feats
        features = set(feats) if features is None else features & set(feats)
        for part in ("train", "test", "calibration"):
            f = pd.read_parquet(d / f"{part}.parquet", columns=["eid", "label", "augmented"])
            parts.append(f[~f["augmented"].to_numpy(bool)].assign(sex=sex, partition=part))
    cls = pd.concat(parts, ignore_index=True).drop(columns="augmented")
    base = pd.read_parquet(run / "ingest" / "baseline.parquet").drop(columns=["sex", "label"])
    people = cls.merge(base, on="eid", how="left", validate="one_to_one")
    people = people[(people["age"] >= AGES[0]) & (people["age"] <= AGES[1])]
    return people.reset_index(drop=True), sorted((features or set()) - {"age"})


def plot(shares: dict[str, pd.DataFrame], slopes: dict[str, pd.DataFrame],
         drifts: dict[str, pd.DataFrame], path: Path) -> None:
    """Shares of BFH and unhealthy by age, each class's drift toward the young unhealthy,
    and the BFH and unhealthy marker-age slopes per sex: one PNG."""
    from sphr.plots import new_figure, to_png

    fig, ax = new_figure(15, 19, nrows=3, ncols=2)
    colours = dict(zip(shares, ("black", "tab:blue", "tab:orange", "tab:green", "tab:red",
                                "tab:purple"), strict=False))
    for name, t in shares.items():
        for sex, style in (("female", "-"), ("male", "--")):
            s = t[t["sex"] == sex]
            x = np.arange(len(s))
            for col, mark in (("bfh", "o"), ("unhealthy", "s")):
                ax[0, 0].errorbar(
                    x,
                    s[col],
                    yerr=[s[col] - s[f"{col}_lo"], s[f"{col}_hi"] - s[col]],
                    fmt=mark + style,
                    color=colours[name],
                    capsize=2,
                    ms=4,
                    label=f"{name} {sex} {col}",
                )
            ax[0, 0].set_xticks(x, s["group"])
    ax[0, 0].set(title="Share of BFH (o) and of the unhealthy (s) by age group\n"
                 "(solid: women, dashed: men; 95% Wilson intervals)", ylabel="share")
    ax[0, 0].legend(fontsize=6, ncol=2)
    _plot_drift(ax[0, 1], drifts, colours)
    for row, cls in ((1, "bfh"), (2, "unhealthy")):
        for col, sex in ((0, "female"), (1, "male")):
            _plot_slopes(ax[row, col], slopes, sex, cls, colours)
    path.write_bytes(to_png(fig, dpi=100))


def _plot_drift(a, drifts: dict[str, pd.DataFrame], colours: dict[str, str]) -> None:
    labels, k = [], 0
    for name, t in drifts.items():
        for _, r in t[t["class"] != "apparently_healthy"].iterrows():
            a.errorbar(k, r["drift"], yerr=[[r["drift"] - r["lo"]], [r["hi"] - r["drift"]]],
                       fmt="o", color=colours[name], capsize=3)
            labels.append(f"{name} {r['sex']} {r['class']}")
            k += 1
    a.axhline(0, color="grey", lw=0.8)
    a.set_xticks(range(k), labels, fontsize=6, rotation=90)
    a.set(title="Drift toward the young unhealthy: share of the under-50\n"
          "BFH-to-unhealthy distance covered per decade (95% bootstrap interval)",
          ylabel="share per decade")


def _plot_slopes(a, slopes: dict[str, pd.DataFrame], sex: str, cls: str,
                 colours: dict[str, str]) -> None:
    first = next(iter(slopes.values()))
    markers = sorted(first.loc[first["class"] == cls, "marker"].unique())
    y = np.arange(len(markers))
    for j, (name, t) in enumerate(slopes.items()):
        s = t[(t["sex"] == sex) & (t["class"] == cls)].set_index("marker").reindex(markers)
        off = (j - (len(slopes) - 1) / 2) * 0.25
        a.errorbar(s["slope"], y + off, xerr=[s["slope"] - s["lo"], s["hi"] - s["slope"]],
                   fmt="o", ms=3, color=colours[name], capsize=2, label=name)
    a.axvline(0, color="grey", lw=0.8)
    a.set_yticks(y, markers, fontsize=7)
    a.set(title=f"{'BFH' if cls == 'bfh' else cls}, {sex}: slope of the marker's normal score "
          "on age", xlabel="SD per decade (95% interval)")
    a.legend(fontsize=7)


def _rounded(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.round(4).to_json(orient="records"))


def main() -> int:
    from sphr.cohorts.config import DEFAULT_AGE_GROUPS

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("runs", nargs="*", help="NAME=RUN_DIR; the first is the reference")
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--proxy-export", nargs=2, type=Path, metavar=("IN", "OUT"), default=None,
                    help="only write IN (a ukbconv export) with the development set's proxy "
                         "labels to OUT (:func:`proxy_labels`)")
    args = ap.parse_args()
    if args.proxy_export:
        src, dst = args.proxy_export
        proxy_labels(pd.read_csv(src, dtype=str, keep_default_na=False)).to_csv(dst, index=False)
        print(json.dumps({"proxy_export": str(dst)}))
        return 0
    runs = dict(r.split("=", 1) for r in args.runs)
    loaded = {name: load_people(Path(d)) for name, d in runs.items()}
    markers = sorted(set.intersection(*(set(f) for _, f in loaded.values())))
    extra = [m for m in ("crp",) if m not in markers and all(
        p[m].notna().mean() >= 0.5 for p, _ in loaded.values())]
    out: dict = {"runs": runs, "ages": AGES, "markers": markers, "extra_markers": extra}
    shares, slopes, drifts = {}, {}, {}
    for name, (people, _) in loaded.items():
        people = add_scores(people, markers + extra)
        shares[name] = share_table(people, DEFAULT_AGE_GROUPS)
        slopes[name] = slope_table(people, markers + extra)
        drifts[name] = drift_table(people, markers, args.bootstrap)
        out[name] = {"n": {s: int((people["sex"] == s).sum()) for s in SEXES},
                     "share": _rounded(shares[name]), "slopes": _rounded(slopes[name]),
                     "gaps": _rounded(gap_table(people, markers + extra)),
                     "drift": _rounded(drifts[name]),
                     "dispersion": _rounded(dispersion_table(people, markers))}
        print(f"{name}: {out[name]['n']}\n{drifts[name].round(3).to_string()}", file=sys.stderr)
    out["compare_bfh"] = _rounded(compare_table(slopes, "bfh"))
    out["compare_unhealthy"] = _rounded(compare_table(slopes, "unhealthy"))
    everyone = compare_table(slopes, "everyone")
    out["compare_everyone"] = _rounded(everyone)
    if "linear" in slopes and next(iter(slopes)) != "linear":
        out["age_slope_proposal"] = _rounded(age_slope_proposal(everyone, "linear"))
    if args.figure:
        plot(shares, slopes, drifts, args.figure)
        out["figure"] = str(args.figure)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
