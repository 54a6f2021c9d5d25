"""Real people: do single-visit health scores rank later deaths? (NHANES 1999-2000).

The study behind ``benchmarks/nhanes_mortality.py`` (docs/notes/NHANES.md), kept beside it and out
of the library: no stage uses it. An adapter, not a UK Biobank stage: the vendored file
(``sphr/data/real``, see its README) has the nine PhenoAge markers, age, sex and linked all-cause
mortality of 4,086 US adults, but no condition answers, so there are no apparently healthy /
BFH labels. The check rebuilds the parts of the risk method that need no labels
and scores everyone:

1. Units: NHANES US units -> the catalog's UK Biobank units and names
   (:data:`UNIT_CONVERSION`). Creatinine is first recalibrated to the standardized
   method, as NCHS advises for 1999-2000 (:func:`standardize_creatinine_1999_2000`).
2. Reference population: every marker inside its clinical normal range
   (:data:`REFERENCE_RANGES`) and younger than ``reference_max_age``, the
   homeostatic-dysregulation practice of measuring deviation from a young,
   in-range reference (Cohen et al., Mech Ageing Dev 2013;134:110-117; BioAge,
   Kwon & Belsky 2021, uses NHANES III aged 20-30 with markers in range).
   **Decision**: younger than 40, i.e. 20-39. With 20-29 this 4,086-person file
   leaves 305 reference people and 61 calibration people, fewer than the 99 a
   split-conformal 99% bound needs (:mod:`sphr.risk.calibration`); 20-39 gives 619
   and 124, both bounds are exact conformal ranks, and the group is still young
   adults, before most age-related chronic disease.
3. The reference is split, seeded and stratified by sex, into a fit part
   (1 - ``calibration_size``) and a calibration part. Everything fitted sees only
   the fit part, per sex: the marker space (``space`` below), the reference point (the
   median of the normalized fit markers) and a Ledoit-Wolf covariance.
4. Scores, larger = worse: ``raw_euclidean`` (distance of the normalized markers
   to the reference point), ``mahalanobis`` (distance to the Ledoit-Wolf mean in
   its metric: homeostatic dysregulation, Cohen et al.), ``phenoage``
   (:mod:`sphr.risk.phenoage`), ``phenoage_acceleration`` (its residual on age, the
   line fitted on the fit part), and ``age`` alone.
5. Evaluation: everyone in neither the fit nor the calibration part, i.e. every
   non-reference person. Survival time = ``permth_exm`` / 12 years, event =
   ``mortstat``. Harrell's C per score with a seeded participant bootstrap 95% CI.
6. Calibrated one-sided groups for the three age-free scores (both distances and
   PhenoAge acceleration): Normal up to the 95% split-conformal bound of the
   calibration scores, Lower Risk up to the 99% bound, Higher Risk beyond
   (:func:`sphr.risk.calibration.calibrated_groups`). The distances are per-sex
   standardized, so one pooled calibration set serves both sexes. For the
   Mahalanobis (HD) groups: Cox hazard ratios vs Normal, unadjusted and adjusted
   for age, and Kaplan-Meier curves by group for every grouped score.

The marker space (``space``): by default ``marker``, the log-robust standardization of
:class:`~sphr.cohorts.normalize.MarkerScaler`, linear beyond the fitted range. With
``quantile`` (the earlier default) the normalizer maps a value beyond the largest
fit-reference value to the same z (+5.2), so among people far outside the reference the
distances stop ranking; ``saturated_share`` says how often that happens there, and
``beyond_fit_share`` how many evaluated values lie outside the fit part's range in
either space (docs/METHODS.md, "The distance space").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.cohorts.ranges import MG_DL_PER_MMOL_L_GLUCOSE, P0_RANGES, ClinicalRange
from sphr.errors import InputError
from sphr.health_distance import health_distance
from sphr.labels import SEXES
from sphr.risk.calibration import LOWER_LEVEL, NORMAL_LEVEL, calibrated_groups, upper_bound
from sphr.risk.intervals import GROUPS, HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.risk.phenoage import MARKERS, phenoage, phenoage_acceleration
from sphr.survival import c_index, c_index_weighted, cox_wald, km_curve

#: the columns the vendored file must have
NHANES_COLUMNS: tuple[str, ...] = (
    "seqn", "age", "sex", "albumin_g_dl", "creatinine_mg_dl", "glucose_mg_dl", "crp_mg_l",
    "lymphocyte_pct", "mcv_fl", "rdw_pct", "alp_u_l", "wbc_k_ul", "mortstat", "permth_exm",
)
N_PEOPLE = 4086

UMOL_L_PER_MG_DL_CREATININE = 88.42
#: NHANES column -> (catalog name, factor from the NHANES unit to the UKB unit)
UNIT_CONVERSION: dict[str, tuple[str, float]] = {
    "albumin_g_dl": ("albumin", 10.0),                                   # g/dL -> g/L
    "creatinine_mg_dl": ("creatinine", UMOL_L_PER_MG_DL_CREATININE),     # mg/dL -> umol/L
    "glucose_mg_dl": ("glucose", 1.0 / MG_DL_PER_MMOL_L_GLUCOSE),        # mg/dL -> mmol/L
    "crp_mg_l": ("crp", 1.0),                                            # mg/L both
    "lymphocyte_pct": ("lymphocyte_pct", 1.0),                           # %
    "mcv_fl": ("mcv", 1.0),                                              # fL
    "rdw_pct": ("rdw", 1.0),                                             # %
    "alp_u_l": ("alp", 1.0),                                             # U/L
    "wbc_k_ul": ("wbc", 1.0),                                            # 10^3/uL = 10^9/L
}

_MEDLINEPLUS = "MedlinePlus medical encyclopedia (US National Library of Medicine)"
_MERCK = "Merck Manual, Complete Blood Count table (normal values)"
_P0 = {r.marker: r for r in P0_RANGES}
#: Clinical normal ranges of the nine markers, UK Biobank units (adult reference
#: intervals; a lab's own interval differs a little). Glucose and CRP are the
#: project's P0 ranges (:mod:`sphr.cohorts.ranges`), so "in range" means the same
#: as for BFH; NHANES glucose is mostly non-fasting, so the fasting range is strict.
REFERENCE_RANGES: tuple[ClinicalRange, ...] = (
    ClinicalRange("albumin", 34.0, 54.0, unit="g/L", paper="3.4-5.4 g/dL",
                  source=f"{_MEDLINEPLUS}, 'Albumin - blood (serum) test'"),
    ClinicalRange("creatinine", 0.7 * UMOL_L_PER_MG_DL_CREATININE,
                  1.3 * UMOL_L_PER_MG_DL_CREATININE, unit="umol/L", sex="male",
                  paper="0.7-1.3 mg/dL (men)", source=f"{_MEDLINEPLUS}, 'Creatinine - blood'"),
    ClinicalRange("creatinine", 0.6 * UMOL_L_PER_MG_DL_CREATININE,
                  1.1 * UMOL_L_PER_MG_DL_CREATININE, unit="umol/L", sex="female",
                  paper="0.6-1.1 mg/dL (women)", source=f"{_MEDLINEPLUS}, 'Creatinine - blood'"),
    _P0["glucose"],
    _P0["crp"],
    ClinicalRange("lymphocyte_pct", 22.0, 44.0, unit="%", paper="22-44%", source=_MERCK),
    ClinicalRange("mcv", 80.0, 100.0, unit="fL", paper="80-100 fL", source=_MERCK),
    ClinicalRange("rdw", 11.5, 14.5, unit="%", paper="11.5-14.5%", source=_MERCK),
    ClinicalRange("alp", 44.0, 147.0, unit="U/L", paper="44-147 IU/L",
                  source=f"{_MEDLINEPLUS}, 'ALP - blood test'"),
    ClinicalRange("wbc", 4.5, 11.0, unit="10^9/L", paper="4,500-11,000 per uL", source=_MERCK),
)

REFERENCE_MAX_AGE = 40.0
#: scores compared by C-index, and the age-free ones that get calibrated groups
SCORES: tuple[str, ...] = ("age", "phenoage", "phenoage_acceleration", "mahalanobis",
                           "raw_euclidean")
GROUPED_SCORES: tuple[str, ...] = ("mahalanobis", "raw_euclidean", "phenoage_acceleration")
#: consistent group colours in every figure
GROUP_COLOURS: dict[str, str] = {NORMAL: "#2e8b57", LOWER_RISK: "#f0a30a", HIGHER_RISK: "#d62728"}
_SATURATED_Z = 5.0  # |z| the normalizer only reaches beyond the fit range (its cap is 5.2)


def default_path() -> Path:
    """The vendored file inside the installed package."""
    return Path(str(files("sphr.data").joinpath("real", "nhanes_1999_2000.parquet")))


def load_nhanes(path: str | Path | None = None) -> pd.DataFrame:
    """The file as stored (US units); a missing column, missing value or
    bad code is an InputError."""
    path = Path(path) if path is not None else default_path()
    if not path.exists():
        raise InputError("file not found", file=path)
    raw = pd.read_parquet(path)
    missing = [c for c in NHANES_COLUMNS if c not in raw.columns]
    if missing:
        raise InputError(f"missing columns {', '.join(missing)}", file=path, field=missing[0])
    for name in NHANES_COLUMNS:
        if name == "sex":
            bad = np.flatnonzero(~raw[name].isin(SEXES).to_numpy())
            what = f"sex must be one of {', '.join(SEXES)}"
        else:
            values = pd.to_numeric(raw[name], errors="coerce").to_numpy(np.float64)
            bad = np.flatnonzero(~np.isfinite(values))
            what = "missing or not a number (complete cases only)"
        if bad.size:
            raise InputError(f"{what}; {bad.size} rows", file=path, field=name, row=int(bad[0]) + 1)
    return raw


def standardize_creatinine_1999_2000(mg_dl: np.ndarray) -> np.ndarray:
    """NHANES 1999-2000 serum creatinine (mg/dL) on the standardized (IDMS-traceable) scale.

    standard = 1.013 x raw + 0.147 mg/dL, the equation NCHS gives for 1999-2000
    (Selvin et al., Am J Kidney Dis 2007;50:918-926). Without it these creatinines
    read about 0.16 mg/dL low and 43% of the women fall below the normal range
    (19% after it), which would skew the reference towards men.
    """
    return 1.013 * np.asarray(mg_dl, np.float64) + 0.147


def to_catalog(raw: pd.DataFrame, *, recalibrate_creatinine: bool = True) -> pd.DataFrame:
    """One row per person in catalog names and UKB units, plus survival columns.

    Columns: ``eid`` (int64, the NHANES ``seqn``), ``sex`` (int8: 0 female, 1 male),
    ``age``, the nine :data:`~sphr.risk.phenoage.MARKERS`, ``time_years``
    (``permth_exm`` / 12) and ``event`` (int8, ``mortstat``).
    """
    out = pd.DataFrame({
        "eid": raw["seqn"].to_numpy(np.int64),
        "sex": (raw["sex"].to_numpy() == SEXES[1]).astype(np.int8),
        "age": raw["age"].to_numpy(np.float64),
    })
    for column, (name, factor) in UNIT_CONVERSION.items():
        values = raw[column].to_numpy(np.float64)
        if column == "creatinine_mg_dl" and recalibrate_creatinine:
            values = standardize_creatinine_1999_2000(values)
        out[name] = values * factor
    out["time_years"] = raw["permth_exm"].to_numpy(np.float64) / 12.0
    out["event"] = raw["mortstat"].to_numpy(np.int8)
    return out


def in_reference_ranges(people: pd.DataFrame) -> np.ndarray:
    """True where every marker is inside its :data:`REFERENCE_RANGES` range
    (sex-specific ones per sex)."""
    ok = np.ones(len(people), dtype=bool)
    sex = people["sex"].to_numpy()
    for r in REFERENCE_RANGES:
        inside = r.contains(people[r.marker].to_numpy(np.float64))
        applies = np.ones(len(people), bool) if r.sex is None else sex == SEXES.index(r.sex)
        ok &= inside | ~applies
    return ok


def assign_roles(people: pd.DataFrame, *, reference_max_age: float = REFERENCE_MAX_AGE,
                 calibration_size: float = 0.2, seed: int | np.random.SeedSequence = 0
                 ) -> np.ndarray:
    """``fit`` / ``calibration`` for the reference (in range, age < max), ``evaluation`` otherwise.

    The reference is split per sex: ``round(calibration_size x n_sex)`` calibration
    people drawn without replacement, the rest fit.
    """
    if not 0 < calibration_size < 1:
        raise InputError(f"calibration_size must be in (0, 1), got {calibration_size}")
    rng = np.random.default_rng(seed)
    reference = in_reference_ranges(people) & (people["age"].to_numpy() < reference_max_age)
    roles = np.full(len(people), "evaluation", dtype=object)
    sex = people["sex"].to_numpy()
    for code in range(len(SEXES)):
        members = np.flatnonzero(reference & (sex == code))
        n_cal = round(calibration_size * members.size)
        shuffled = rng.permutation(members)
        roles[shuffled[:n_cal]] = "calibration"
        roles[shuffled[n_cal:]] = "fit"
    return roles


@dataclass
class SexReference:
    """What is fitted on one sex's fit-part reference people (normalized marker space)."""

    normalizer: QuantileNormalizer | MarkerScaler
    center: np.ndarray      # median of the normalized markers: the raw_euclidean reference point
    mean: np.ndarray        # Ledoit-Wolf location (the mean)
    covariance: np.ndarray  # Ledoit-Wolf shrunk covariance
    precision: np.ndarray
    shrinkage: float
    n: int
    fit_min: np.ndarray | None = None  # per marker, the fit part's range (raw units)
    fit_max: np.ndarray | None = None

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.normalizer.transform(X).astype(np.float64)

    def raw_euclidean(self, Z: np.ndarray) -> np.ndarray:
        return health_distance(Z, self.center)

    def mahalanobis(self, Z: np.ndarray) -> np.ndarray:
        d = Z - self.mean
        return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", d, self.precision, d), 0.0))


#: the marker spaces the distances can be measured in (docs/METHODS.md, "The distance space")
SPACES: tuple[str, ...] = ("marker", "quantile")


def fit_reference(people: pd.DataFrame, fit_mask: np.ndarray, space: str = "marker"
                  ) -> dict[str, SexReference]:
    """Per sex, from the rows in ``fit_mask`` only: the marker space (``marker``: log-robust
    standardization, linear beyond the fit; ``quantile``: the cohort normalizer, capped at
    |z| = 5.2), the reference point and the covariance."""
    if space not in SPACES:
        raise InputError(f"unknown space {space!r}: choose from {', '.join(SPACES)}")
    from sklearn.covariance import LedoitWolf

    fit_mask = np.asarray(fit_mask, dtype=bool)
    sex = people["sex"].to_numpy()
    out: dict[str, SexReference] = {}
    for code, name in enumerate(SEXES):
        rows = fit_mask & (sex == code)
        if rows.sum() < len(MARKERS) + 2:
            raise InputError(f"only {int(rows.sum())} {name} reference people to fit on; "
                             f"need at least {len(MARKERS) + 2}", field="sex")
        X = people.loc[rows, list(MARKERS)].to_numpy(np.float64)
        normalizer = (MarkerScaler() if space == "marker" else QuantileNormalizer()).fit(
            X, features=list(MARKERS))
        Z = normalizer.transform(X).astype(np.float64)
        lw = LedoitWolf().fit(Z)
        out[name] = SexReference(normalizer, np.median(Z, axis=0), lw.location_.copy(),
                                 lw.covariance_.copy(), lw.get_precision(),
                                 float(lw.shrinkage_), int(rows.sum()), X.min(axis=0),
                                 X.max(axis=0))
    return out


def score_people(people: pd.DataFrame, fits: dict[str, SexReference],
                 fit_mask: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """Every score for every person (larger = worse), and the normalized markers."""
    X = people[list(MARKERS)].to_numpy(np.float64)
    Z = np.empty_like(X)
    raw = np.empty(len(people))
    maha = np.empty(len(people))
    sex = people["sex"].to_numpy()
    for code, name in enumerate(SEXES):
        rows = sex == code
        Z[rows] = fits[name].transform(X[rows])
        raw[rows] = fits[name].raw_euclidean(Z[rows])
        maha[rows] = fits[name].mahalanobis(Z[rows])
    pheno = phenoage(people)
    age = people["age"].to_numpy(np.float64)
    scores = pd.DataFrame({
        "age": age,
        "phenoage": pheno,
        "phenoage_acceleration": phenoage_acceleration(pheno, age, fit_mask=fit_mask),
        "mahalanobis": maha,
        "raw_euclidean": raw,
    })
    return scores, Z


def _beyond_fit_share(people: pd.DataFrame, fits: dict[str, SexReference],
                      rows: np.ndarray) -> float:
    """Share of the ``rows``' marker values outside the range of their sex's fit part."""
    X = people[list(MARKERS)].to_numpy(np.float64)
    sex = people["sex"].to_numpy()
    outside = np.zeros_like(X, dtype=bool)
    for code, name in enumerate(SEXES):
        norm = fits[name].normalizer
        if isinstance(norm, QuantileNormalizer):
            lo, hi = norm.quantiles_[0], norm.quantiles_[-1]
        else:
            lo, hi = fits[name].fit_min, fits[name].fit_max
        outside[sex == code] = (X[sex == code] < lo) | (X[sex == code] > hi)
    return float(outside[rows].mean())


def concordance_with_ci(time_: np.ndarray, event: np.ndarray, scores: pd.DataFrame,
                        n_bootstrap: int, seed: int | np.random.SeedSequence) -> dict[str, dict]:
    """Harrell's C per score (:func:`sphr.survival.c_index`) and a participant-bootstrap 95%
    percentile CI (:func:`sphr.survival.c_index_weighted`).

    The same resamples serve every score, so their CIs are comparable. They are multinomial
    draws, not :func:`sphr.survival.resample_counts`' (the same distribution, another stream):
    kept so that the published intervals stay what they were.
    """
    n = len(time_)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_bootstrap) if n_bootstrap else None
    out = {}
    for name in scores.columns:
        s = scores[name].to_numpy(np.float64)
        row = {"c_index": c_index(time_, event, s), "ci_low": math.nan, "ci_high": math.nan}
        if counts is not None:
            boot = c_index_weighted(time_, event, s, counts)
            row["ci_low"], row["ci_high"] = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
        out[name] = row
    return out


def cox_hazard_ratios(time_: np.ndarray, event: np.ndarray, groups: np.ndarray,
                      age: np.ndarray) -> dict[str, dict]:
    """Cox HR of Lower and Higher Risk vs Normal, unadjusted and adjusted for age (95% CI;
    :func:`sphr.survival.cox_wald`)."""
    present = [g for g in (LOWER_RISK, HIGHER_RISK) if (groups == g).sum() > 0]
    indicators = {g: (groups == g).astype(np.float64) for g in present}
    out = {}
    for label, extra in (("unadjusted", {}), ("age_adjusted", {"age": age})):
        fit = cox_wald(time_, event, {**indicators, **extra})
        out[label] = {g: dict(zip(("hr", "low", "high", "p"), fit[g], strict=True))
                      for g in present}
        if "age" in extra:
            out[label]["age_per_year"] = fit["age"][0]
    return out


def km_figure(time_: np.ndarray, event: np.ndarray, groups: dict[str, np.ndarray]) -> bytes:
    """Kaplan-Meier all-cause survival by calibrated group with its 95% band
    (:func:`sphr.survival.km_curve`, the whole follow-up), one panel per score (PNG)."""
    from sphr.plots import new_figure, to_png

    fig, axes = new_figure(5.0 * len(groups), 4.2, ncols=len(groups), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (score, g) in zip(axes, groups.items(), strict=True):
        for group in GROUPS:
            rows = g == group
            if not rows.any():
                continue
            curve = km_curve(time_[rows], event[rows], min_at_risk=1)
            x, colour = curve["time_years"].to_numpy(), GROUP_COLOURS[group]
            # the band is NaN where S is 1 or 0 (no width there): draw it as the curve
            low = (1 - curve["high"]).fillna(1 - curve["cum_inc"]).to_numpy()
            high = (1 - curve["low"]).fillna(1 - curve["cum_inc"]).to_numpy()
            ax.step(x, 1 - curve["cum_inc"].to_numpy(), where="post", color=colour,
                    label=f"{group} (n={int(rows.sum())}, {int(event[rows].sum())} deaths)")
            ax.fill_between(x, low, high, step="post", color=colour, alpha=0.15, lw=0)
        ax.set_title(score.replace("_", " "))
        ax.set_xlabel("Years since examination")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    axes[0].set_ylabel("Survival probability (all-cause)")
    fig.suptitle("NHANES 1999-2000, people outside the reference: survival by calibrated group")
    return to_png(fig)


def _grouped(scores: pd.DataFrame, cal: np.ndarray, ev: np.ndarray, e: np.ndarray,
             concordance: dict[str, dict]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """One row per score (C-index, and for the age-free ones the calibrated bounds and each
    group's count, share and deaths) and the evaluated people's groups per grouped score."""
    grouped: dict[str, np.ndarray] = {}
    rows = []
    for name in SCORES:
        row = {"score": name, "n": int(ev.sum()), **concordance[name]}
        if name in GROUPED_SCORES:
            normal = upper_bound(scores.loc[cal, name].to_numpy(), NORMAL_LEVEL)
            lower = upper_bound(scores.loc[cal, name].to_numpy(), LOWER_LEVEL)
            g = calibrated_groups(scores.loc[ev, name].to_numpy(), normal.value, lower.value)
            grouped[name] = g
            row |= {"normal_bound": normal.value, "normal_method": normal.method,
                    "lower_bound": lower.value, "lower_method": lower.method}
            for group in GROUPS:
                key = group.lower().replace(" ", "_")
                row[f"n_{key}"] = int((g == group).sum())
                row[f"share_{key}"] = float((g == group).mean())
                row[f"deaths_{key}"] = int(e[g == group].sum())
        rows.append(row)
    return pd.DataFrame(rows), grouped


def _hazard_ratios(cox: dict) -> dict[str, float]:
    """Higher Risk vs Normal, age-adjusted and unadjusted (NaN where nobody is Higher Risk)."""
    nan = {"hr": math.nan, "low": math.nan, "high": math.nan}
    adj, raw = cox["age_adjusted"].get(HIGHER_RISK, nan), cox["unadjusted"].get(HIGHER_RISK, nan)
    return {"hr_higher_vs_normal": adj["hr"], "hr_low": adj["low"], "hr_high": adj["high"],
            "hr_higher_vs_normal_unadjusted": raw["hr"], "hr_unadjusted_low": raw["low"],
            "hr_unadjusted_high": raw["high"]}


def _write(out_dir: str | Path, table: pd.DataFrame, png: bytes, result: dict) -> None:
    from sphr.io import staged_outputs, write_bytes, write_json, write_parquet

    with staged_outputs(out_dir) as stage:
        write_parquet(table, stage / "nhanes_mortality_scores.parquet")
        write_bytes(png, stage / "nhanes_mortality_km.png")
        write_json(result, stage / "nhanes_mortality.json")


def nhanes_mortality(path: str | Path | None = None, *,
                     reference_max_age: float = REFERENCE_MAX_AGE,
                     calibration_size: float = 0.2, n_bootstrap: int = 1000, seed: int = 0,
                     out_dir: str | Path | None = None,
                     recalibrate_creatinine: bool = True, space: str = "marker") -> dict:
    """The whole check (module docstring); returns the summary and, with ``out_dir``,
    writes ``nhanes_mortality.json``, ``nhanes_mortality_scores.parquet`` (one row per
    score) and ``nhanes_mortality_km.png`` there, all or none."""
    started = time.perf_counter()
    split_seed, boot_seed = np.random.SeedSequence(seed).spawn(2)
    people = to_catalog(load_nhanes(path), recalibrate_creatinine=recalibrate_creatinine)
    roles = assign_roles(people, reference_max_age=reference_max_age,
                         calibration_size=calibration_size, seed=split_seed)
    fit, cal, ev = (roles == "fit"), (roles == "calibration"), (roles == "evaluation")
    fits = fit_reference(people, fit, space)
    scores, Z = score_people(people, fits, fit)

    t, e = people["time_years"].to_numpy()[ev], people["event"].to_numpy()[ev]
    concordance = concordance_with_ci(t, e, scores.loc[ev].reset_index(drop=True),
                                      n_bootstrap, boot_seed)
    table, grouped = _grouped(scores, cal, ev, e, concordance)
    cox = cox_hazard_ratios(t, e, grouped["mahalanobis"], people["age"].to_numpy()[ev])
    png = km_figure(t, e, {name: grouped[name] for name in GROUPED_SCORES})

    result = {
        "n": int(ev.sum()), "deaths": int(e.sum()),
        "median_follow_up_years": float(np.median(t)),
        **{f"c_index_{k}": v["c_index"] for k, v in concordance.items()},
        **{f"c_index_{k}_ci": [v["ci_low"], v["ci_high"]] for k, v in concordance.items()},
        **_hazard_ratios(cox),
        "cox_mahalanobis": cox,
        "group_shares": {name: {group: float((g == group).mean()) for group in GROUPS}
                         for name, g in grouped.items()},
        "bounds": {r["score"]: {"normal": r["normal_bound"], "normal_method": r["normal_method"],
                                "lower_risk": r["lower_bound"], "lower_method": r["lower_method"]}
                   for r in table.to_dict("records") if r["score"] in GROUPED_SCORES},
        "space": space,
        # share of evaluated marker values at the quantile normalizer's cap (0 in the
        # marker space, which has no cap) and beyond the fitted range (either space)
        "saturated_share": float((np.abs(Z[ev]) >= _SATURATED_Z).mean()) if space == "quantile"
        else 0.0,
        "beyond_fit_share": _beyond_fit_share(people, fits, ev),
        "reference_max_age": reference_max_age,
        "n_reference": int((fit | cal).sum()), "n_fit": int(fit.sum()),
        "n_calibration": int(cal.sum()),
        "n_fit_by_sex": {name: fits[name].n for name in SEXES},
        "ledoit_wolf_shrinkage": {name: fits[name].shrinkage for name in SEXES},
        "evaluation": "everyone in neither the fit nor the calibration part "
                      "(every person outside the reference)",
        "n_bootstrap": n_bootstrap, "seed": seed, "calibration_size": calibration_size,
        "creatinine_recalibrated": recalibrate_creatinine,
        "reference_ranges": [{"marker": r.marker, "low": r.low, "high": r.high, "unit": r.unit,
                              "sex": r.sex, "source": r.source} for r in REFERENCE_RANGES],
        "seconds": round(time.perf_counter() - started, 2),
    }
    if out_dir is not None:
        _write(out_dir, table, png, result)
    return result
