"""Frozen parameters of the synthetic UK Biobank generator (v4; docs/SYNTH.md, versions).

Every number here is a row of the parameter table in docs/SYNTH.md, which gives its source
(paper or cohort, with year) or says "assumption". They were fixed before any method was run on
the cohort; change them only together with that table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LATENTS: tuple[str, ...] = (
    "metabolic", "lipid", "inflammation", "renal", "hepatic", "anaemia", "fitness",
)
#: loading of each latent on general frailty (fitness loads negatively); docs/SYNTH.md, latents
FRAILTY_LOADING: dict[str, float] = {
    "metabolic": 0.45, "lipid": 0.2, "inflammation": 0.45, "renal": 0.4, "hepatic": 0.25,
    "anaemia": 0.3, "fitness": -0.35,
}
#: metabolic and lipid risk travel together beyond frailty (shared diet and adiposity)
LIPID_FROM_METABOLIC = (0.85, 0.25)
#: frailty rises with age (per year); docs/SYNTH.md, latents
FRAILTY_PER_YEAR = 0.025
AGE_CENTRE = 56.5


@dataclass(frozen=True)
class Marginal:
    """One marker's sex-specific marginal (docs/SYNTH.md, marginals).

    ``normal``: value = mean + sd * z + age_slope * (age - centre);
    ``lognormal``: ``mean``/``sd`` are of the value, ``age_slope`` is per year on the log scale;
    ``p_zero``: a point mass at zero (the lowest ``p_zero`` share of the normal scores).
    """

    kind: str
    mean: tuple[float, float]  # (female, male)
    sd: tuple[float, float]
    loadings: dict[str, float] = field(default_factory=dict)
    age_slope: float = 0.0
    p_zero: float = 0.0


def _pair(x: float | tuple[float, float]) -> tuple[float, float]:
    return x if isinstance(x, tuple) else (x, x)


def _m(kind: str, mean: float | tuple[float, float], sd: float | tuple[float, float],
       loadings: dict[str, float] | None = None, age_slope: float = 0.0,
       p_zero: float = 0.0) -> Marginal:
    return Marginal(kind, _pair(mean), _pair(sd), loadings or {}, age_slope, p_zero)


#: markers drawn through the Gaussian copula; the others follow from these by identities
#: (haematocrit = RBC x MCV, cholesterol from its fractions, ...). UK Biobank instance-0
#: means and SDs (docs/SYNTH.md, marginals). LDL's mean is replaced by the age- and
#: menopause-dependent mean of :data:`LDL_MEAN`.
MARGINALS: dict[str, Marginal] = {
    "bmi": _m("lognormal", (27.0, 27.8), (4.5, 4.6), {"metabolic": 0.65, "fitness": -0.25}),
    "rbc": _m("normal", (4.30, 4.80), 0.33, {"anaemia": -0.5}),
    "mcv": _m("normal", 91.1, 4.2, {"hepatic": 0.2, "anaemia": -0.25}, 0.05),
    "rdw": _m("lognormal", 13.6, 1.0, {"anaemia": 0.35, "inflammation": 0.2}, 0.002),
    "reticulocyte_pct": _m("lognormal", 1.23, 0.49, {"anaemia": 0.25}),
    "immature_reticulocyte_fraction": _m("normal", 0.32, 0.06, {"inflammation": 0.15}),
    "wbc": _m("lognormal", 6.9, 2.0, {"inflammation": 0.4, "metabolic": 0.2}),
    "platelets": _m("normal", (265.0, 235.0), 55.0, {"inflammation": 0.25}),
    "ldl": _m("normal", 0.0, 0.86, {"lipid": 0.75, "metabolic": 0.1}),
    "hdl": _m("lognormal", (1.58, 1.28), (0.395, 0.32), {"metabolic": -0.5, "fitness": 0.15}),
    "triglycerides": _m("lognormal", (1.5, 2.0), (0.75, 1.0), {"metabolic": 0.5, "lipid": 0.35}),
    "glucose": _m("lognormal", 4.95, 0.62, {"metabolic": 0.45}, 0.002),
    "hba1c": _m("normal", 35.0, 3.9, {"metabolic": 0.5}, 0.08),
    "crp": _m("lognormal", 2.6, 4.1, {"inflammation": 0.6, "metabolic": 0.3}),
    "albumin": _m("normal", 45.4, 2.6, {"inflammation": -0.3, "hepatic": -0.15}, -0.05),
    "total_protein": _m("normal", 73.3, 4.3, {"inflammation": 0.15}),
    "alp": _m("lognormal", 84.0, 24.0, {"hepatic": 0.3, "metabolic": 0.15}),
    "alt": _m("lognormal", (20.0, 27.5), (10.0, 13.75), {"metabolic": 0.4, "hepatic": 0.45}),
    "ast": _m("lognormal", (24.5, 29.0), (8.8, 10.4), {"hepatic": 0.45, "metabolic": 0.15}),
    "ggt": _m("lognormal", (28.0, 43.0), (25.2, 38.7), {"hepatic": 0.5, "metabolic": 0.3}),
    "bilirubin": _m("lognormal", (8.0, 10.3), (3.6, 4.6), {"anaemia": -0.1}),
    "creatinine": _m("lognormal", (64.0, 81.0), (12.2, 15.4), {"renal": 0.6}, 0.003),
    "cystatin_c": _m("lognormal", (0.88, 0.95), 0.15, {"renal": 0.6, "inflammation": 0.1}, 0.006),
    "urea": _m("normal", 5.4, 1.3, {"renal": 0.45}, 0.03),
    "urate": _m("normal", (275.0, 355.0), 68.0, {"metabolic": 0.35, "renal": 0.3}),
    "calcium": _m("normal", 2.38, 0.10),
    "phosphate": _m("normal", (1.27, 1.17), 0.16, {"renal": 0.15}),
    "igf1": _m("normal", 21.0, 5.2, {"metabolic": -0.1}, -0.15),
    "shbg": _m("lognormal", (62.0, 40.0), (30.0, 16.6), {"metabolic": -0.4}),
    "testosterone": _m("lognormal", (1.2, 12.0), (0.75, 3.8), {"metabolic": -0.3}),
    "vitamin_d": _m("lognormal", 45.0, 19.0, {"fitness": 0.2, "metabolic": -0.15}),
    "activity_days": _m("normal", 10.6, 4.2, {"fitness": 0.5}),
    "activity_minutes": _m("lognormal", 127.0, 102.0, {"fitness": 0.4}),
    "met_walking": _m("lognormal", 1130.0, 1000.0, {"fitness": 0.3}, p_zero=0.08),
    "met_moderate": _m("lognormal", 1250.0, 1250.0, {"fitness": 0.45}, p_zero=0.25),
    "met_vigorous": _m("lognormal", 1230.0, 1250.0, {"fitness": 0.55}, p_zero=0.45),
}


@dataclass(frozen=True)
class TargetCorrelation:
    """A within-sex Spearman correlation the generator aims at (docs/SYNTH.md, correlations).

    ``low``/``high``: the range the sources give; ``target``: what the copula is set to on the
    normal-score scale, as a Spearman value (None: the pair follows from an identity, e.g.
    ApoB from LDL, and is only checked).
    """

    a: str
    b: str
    low: float
    high: float
    target: float | None
    sex: str | None = None  # None: both sexes
    source: str = ""


T = TargetCorrelation
#: docs/SYNTH.md, correlations: sources and notes for every row
TARGET_CORRELATIONS: tuple[TargetCorrelation, ...] = (
    T("cystatin_c", "creatinine", 0.50, 0.75, 0.66, source="UKB; NHANES; Knight 2004"),
    T("ldl", "apob", 0.85, 0.97, None, source="UKB; Sniderman 2019"),
    T("ldl", "cholesterol", 0.85, 0.96, None, source="UKB"),
    T("hdl", "apoa", 0.80, 0.93, None, source="UKB"),
    T("neutrophil_pct", "lymphocyte_pct", -0.95, -0.80, None, source="UKB blood count"),
    T("haemoglobin", "haematocrit", 0.90, 0.99, None, source="UKB blood count"),
    T("triglycerides", "hdl", -0.55, -0.30, -0.45, source="UKB; Sinnott-Armstrong 2021"),
    T("alt", "ast", 0.55, 0.80, 0.70, source="UKB; Sinnott-Armstrong 2021"),
    T("alt", "ggt", 0.35, 0.60, 0.50, source="UKB; Sinnott-Armstrong 2021"),
    T("ggt", "triglycerides", 0.25, 0.45, 0.35, source="UKB; Sinnott-Armstrong 2021"),
    T("hba1c", "glucose", 0.20, 0.50, 0.25, source="UKB non-fasting glucose"),
    T("bmi", "crp", 0.25, 0.45, 0.35, source="UKB; Timpson 2011"),
    T("bmi", "triglycerides", 0.20, 0.40, 0.30, source="UKB"),
    T("bmi", "hdl", -0.45, -0.25, -0.35, source="UKB"),
    T("bmi", "shbg", -0.45, -0.25, -0.35, source="UKB; Ding 2009"),
    T("urate", "creatinine", 0.20, 0.45, 0.32, source="UKB"),
    T("urate", "bmi", 0.25, 0.45, 0.35, source="UKB"),
    T("urate", "triglycerides", 0.20, 0.40, 0.30, source="UKB"),
    T("albumin", "total_protein", 0.45, 0.70, 0.57, source="UKB"),
    T("albumin", "crp", -0.25, -0.05, -0.15, source="UKB"),
    T("calcium", "albumin", 0.30, 0.55, 0.42, source="UKB; Payne 1973"),
    T("urea", "creatinine", 0.30, 0.50, 0.40, source="UKB"),
    T("cystatin_c", "crp", 0.10, 0.30, 0.20, source="Knight 2004; Stevens 2009"),
    T("cystatin_c", "bmi", 0.15, 0.35, 0.25, source="Knight 2004; Stevens 2009"),
    T("wbc", "crp", 0.20, 0.40, 0.28, source="UKB"),
    T("hba1c", "bmi", 0.10, 0.30, 0.18, source="UKB"),
    T("vitamin_d", "bmi", -0.25, -0.08, -0.16, source="UKB; Vimaleswaran 2013"),
    T("testosterone", "shbg", 0.35, 0.60, 0.47, sex="male", source="UKB; Ruth 2020"),
    T("testosterone", "shbg", -0.10, 0.30, 0.10, sex="female", source="assumption"),
)
del T

# ---- age trends (docs/SYNTH.md, age trends)
#: untreated LDL mean (mmol/L): women rise across the menopause (median age 51, transition SD
#: 3 years) by ``rise`` on top of a slow chronological trend; men are flat to slightly falling
LDL_MEAN = {"female_base": 3.30, "menopause_rise": 0.45, "menopause_age": 51.0,
            "menopause_sd": 3.0, "female_per_year": 0.006, "male_base": 3.72,
            "male_per_year": -0.004}

# ---- treatment (docs/SYNTH.md, treatment)
#: statins: LDL reduction per treated participant ~ Normal(mean, sd) clipped to [0, max];
#: a share shows no reduction at all (non-adherence, non-response)
STATIN_LDL = {"mean": 0.40, "sd": 0.14, "max": 0.75, "no_response": 0.10}
STATIN_TG = 0.90   # triglycerides x 0.9 on statins
STATIN_CRP = 0.85  # CRP x 0.85 on statins
#: diagnosed diabetes: HbA1c excess over the non-diabetic value ~ Normal(mean, sd), floored at
#: 0 (treatment brings some to target); glucose follows the same excess
DIABETES_HBA1C = {"excess_mean": 14.0, "excess_sd": 9.0, "glucose_per_mmol_mol": 0.025,
                  "glucose_sd": 0.2}
HBA1C_DIAGNOSTIC = 48.0  # mmol/mol, WHO 2011

# ---- repeat visit and persistence (docs/SYNTH.md, visits)
REPEAT_START = "2012-08-01"
REPEAT_END = "2013-06-30"
REPEAT_SHARE = 0.04
#: selection into the repeat visit: odds per SD of frailty, and for a baseline condition
REPEAT_SELECTION = {"frailty": -0.3, "condition": -0.3}
#: share of a marker's own (non-latent) variation that persists between visits
RETEST_PERSISTENCE = 0.7

# ---- missingness (docs/SYNTH.md, missingness)
#: whole panels missing completely at random: (share, panel)
MCAR_BLOCKS: tuple[tuple[float, str], ...] = (
    (0.05, "blood_count"), (0.012, "reticulocytes"), (0.08, "hdl"), (0.08, "glucose"),
    (0.09, "sex_hormones"), (0.04, "vitamin_d"), (0.02, "hba1c"), (0.01, "ldl_apob"),
    (0.12, "activity"),
)
#: assay lower limits below which UK Biobank reports no value (missing not at random)
DETECTION_LIMIT = {"testosterone": 0.35, "vitamin_d": 10.0}
#: no lab value at or below this is reported, for every blood-count and biochemistry marker:
#: no person has a concentration, count or volume of zero or less, and it is below every
#: assay's reportable range, which UK Biobank leaves missing (as below DETECTION_LIMIT). Only
#: the far low tail of a normal marginal reaches it (urea, IGF-1, urate; docs/SYNTH.md)
NOT_REPORTED_AT_OR_BELOW = 0.0
#: missing-not-at-random panels: share at the mean, and log-odds-like slope per SD of the
#: (unobserved) driver
MNAR_MET = {"share": 0.20, "per_sd_activity": -0.45}
MNAR_BIOCHEMISTRY = {"share": 0.065, "per_sd_frailty": 0.3}
MNAR_BMI = {"share": 0.006, "above": 45.0, "share_above": 0.05}
