"""Phenotypic Age (PhenoAge) from nine clinical blood markers and age.

Levine ME, Lu AT, Quach A, et al. An epigenetic biomarker of aging for lifespan
and healthspan. Aging (Albany NY) 2018;10(4):573-591, doi:10.18632/aging.101414
(clinical PhenoAge in its supplement); Liu Z, Kuo P-L, Horvath S, et al. A new
aging measure captures morbidity and mortality risk across diverse subpopulations
from NHANES IV. PLoS Med 2018;15(12):e1002718 (correction e1002760).

The model is a Gompertz proportional-hazards fit on NHANES III. Its linear
predictor

    xb = -19.907 - 0.0336 albumin + 0.0095 creatinine + 0.1953 glucose
         + 0.0954 ln(CRP) - 0.0120 lymphocyte% + 0.0268 MCV + 0.3306 RDW
         + 0.0019 ALP + 0.0554 WBC + 0.0804 age

takes albumin g/L, creatinine umol/L, glucose mmol/L, CRP **mg/dL**, lymphocytes %,
MCV fL, RDW %, ALP U/L, WBC 1000 cells/uL (= 10^9/L) and age in years. The 10-year
(120-month) mortality score is M = 1 - exp(-exp(xb) (exp(120 g) - 1) / g) with
g = 0.0076927, and PhenoAge = 141.50225 + ln(-0.00553 ln(1 - M)) / 0.090165.

Inputs here are columns named as the field catalog (:mod:`sphr.data.fields`), in
UK Biobank units, which are the model's units except CRP: UKB reports mg/L
(field 30710), so CRP is divided by 10 before the log.

**Decision (coefficient precision)**: the published tables print the coefficients
rounded to 4 decimals (above). We use them at the precision of Levine's fit as the
BioAge R package ships them (Kwon & Belsky, GeroScience 2021;43:2795-2808,
``R/phenoage_calc.R``, ``orig = TRUE``); each rounds to the printed value (a test
checks this). With the rounded values PhenoAge reads about 0.07 years higher
(0.13 at most) on BioAge's NHANES IV data; with these it reproduces BioAge's
``phenoage0`` to 1e-3 years (the remaining 0.001 is 0.00553 here against BioAge's
0.0055305). Both sources agree with the age-transformation constants above.

**Decision (closed form)**: ln(1 - M) = -exp(xb) (exp(120 g) - 1) / g exactly, so
PhenoAge is computed from that product rather than through M. The two-step
formula rounds 1 - M to 0 once the 10-year cumulative hazard passes about 37
(PhenoAge above about 124 years: a very sick person, not an impossible input) and
returns infinity; the closed form is the same function, exact, and linear in xb.
:func:`mortality_score` still gives M for reporting.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sphr.errors import InputError

#: the nine markers in catalog names (UKB field, unit)
MARKERS: tuple[str, ...] = (
    "albumin",         # 30600, g/L
    "creatinine",      # 30700, umol/L
    "glucose",         # 30740, mmol/L
    "crp",             # 30710, mg/L (the model takes ln of mg/dL)
    "lymphocyte_pct",  # 30180, %
    "mcv",             # 30040, fL
    "rdw",             # 30070, %
    "alp",             # 30610, U/L
    "wbc",             # 30000, 10^9/L
)
REQUIRED: tuple[str, ...] = (*MARKERS, "age")

#: linear-predictor coefficients (BioAge's precision, see the module docstring);
#: "crp" multiplies ln(CRP in mg/dL)
INTERCEPT = -19.90667
COEFFICIENTS: dict[str, float] = {
    "albumin": -0.03359355,
    "creatinine": 0.009506491,
    "glucose": 0.1953192,
    "crp": 0.09536762,
    "lymphocyte_pct": -0.01199984,
    "mcv": 0.02676401,
    "rdw": 0.3306156,
    "alp": 0.001868778,
    "wbc": 0.05542406,
    "age": 0.08035356,
}
#: the same, as printed in Levine et al. 2018 / Liu et al. 2018 (Table 1)
PUBLISHED_INTERCEPT = -19.907
PUBLISHED_COEFFICIENTS: dict[str, float] = {
    "albumin": -0.0336, "creatinine": 0.0095, "glucose": 0.1953, "crp": 0.0954,
    "lymphocyte_pct": -0.0120, "mcv": 0.0268, "rdw": 0.3306, "alp": 0.0019,
    "wbc": 0.0554, "age": 0.0804,
}

#: Gompertz rate per month and the horizon of the mortality score (months)
GAMMA = 0.0076927
HORIZON_MONTHS = 120
#: PhenoAge = AGE_INTERCEPT + ln(-AGE_SCALE ln(1 - M)) / AGE_RATE
AGE_INTERCEPT = 141.50225
AGE_SCALE = 0.00553
AGE_RATE = 0.090165

#: UKB CRP is mg/L; the model's ln(CRP) is of mg/dL
CRP_MG_L_PER_MG_DL = 10.0
#: A CRP of 0 is a below-detection reading coded as zero; ln(0) = -inf would give
#: PhenoAge -inf. Such a reading says only "at most the assay's lower limit", so it is
#: scored at the lowest limit we know of: 0.08 mg/L, the bottom of UKB's reportable
#: range (as :mod:`sphr.synth.cohort` uses). No reported value lies below it (NHANES
#: 1999-2000 reports 0.1 mg/L and up), so the floor moves no measured value.
CRP_FLOOR_MG_L = 0.08

# ln((exp(120 g) - 1) / g): the cumulative-hazard factor of the 120-month horizon
_LOG_HAZARD_FACTOR = math.log(math.expm1(HORIZON_MONTHS * GAMMA) / GAMMA)


def _columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The required columns as float arrays; a missing column or negative CRP is an InputError."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"PhenoAge needs the columns {', '.join(REQUIRED)}; "
                         f"missing {', '.join(missing)}", field=missing[0])
    out: dict[str, np.ndarray] = {}
    for name in REQUIRED:
        try:
            out[name] = pd.to_numeric(frame[name], errors="raise").to_numpy(np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"not numeric ({exc})", field=name) from None
    negative = np.flatnonzero(out["crp"] < 0)
    if negative.size:
        raise InputError(f"C-reactive protein is negative ({out['crp'][negative[0]]}); "
                         "expected mg/L", field="crp", row=int(negative[0]) + 1)
    return out


def linear_predictor(frame: pd.DataFrame) -> np.ndarray:
    """xb of the Gompertz model, one value per row (NaN where a marker is NaN)."""
    cols = _columns(frame)
    ln_crp_mg_dl = np.log(np.maximum(cols["crp"], CRP_FLOOR_MG_L) / CRP_MG_L_PER_MG_DL)
    xb = np.full(len(frame), INTERCEPT, dtype=np.float64)
    for name, coef in COEFFICIENTS.items():
        xb += coef * (ln_crp_mg_dl if name == "crp" else cols[name])
    return xb


def mortality_score(xb: np.ndarray) -> np.ndarray:
    """10-year mortality probability M from the linear predictor (for reporting)."""
    cumulative_hazard = np.exp(np.asarray(xb, np.float64) + _LOG_HAZARD_FACTOR)
    return -np.expm1(-cumulative_hazard)


def phenoage_from_linear_predictor(xb: np.ndarray) -> np.ndarray:
    """PhenoAge in years; the published two-step formula in closed form (module docstring)."""
    log_minus_log_survival = np.asarray(xb, np.float64) + _LOG_HAZARD_FACTOR  # ln(-ln(1 - M))
    return AGE_INTERCEPT + (math.log(AGE_SCALE) + log_minus_log_survival) / AGE_RATE


def phenoage(frame: pd.DataFrame) -> np.ndarray:
    """PhenoAge (years) of each row of ``frame``: catalog columns in UKB units (see module)."""
    return phenoage_from_linear_predictor(linear_predictor(frame))


def phenoage_acceleration(phenoage: np.ndarray, age: np.ndarray,
                          fit_mask: np.ndarray | None = None) -> np.ndarray:
    """Residual of PhenoAge on age from a least-squares line, for every row.

    The line is fitted only on rows where ``fit_mask`` is True (e.g. training rows,
    so that evaluation rows do not shape their own baseline); rows with a NaN are
    left out of the fit and get NaN. This is the definition of Levine et al. /
    Liu et al. ("PhenoAgeAccel"): zero on average at every age of the fit
    population. The other common definition is the difference PhenoAge - age
    (BioAge's ``phenoage_advance``), which needs no fit but keeps whatever offset
    and age trend PhenoAge has in the population at hand.
    """
    pheno = np.asarray(phenoage, np.float64)
    age = np.asarray(age, np.float64)
    if pheno.shape != age.shape or pheno.ndim != 1:
        raise InputError(f"phenoage and age must be 1-D and of equal length, got "
                         f"{pheno.shape} and {age.shape}")
    use = np.isfinite(pheno) & np.isfinite(age)
    if fit_mask is not None:
        fit_mask = np.asarray(fit_mask, dtype=bool)
        if fit_mask.shape != age.shape:
            raise InputError(f"fit_mask has shape {fit_mask.shape}, expected {age.shape}")
        use &= fit_mask
    if use.sum() < 2 or np.ptp(age[use]) == 0:
        raise InputError(f"need at least 2 fit rows with different ages, got {int(use.sum())}",
                         field="age")
    slope, intercept = np.polyfit(age[use], pheno[use], 1)
    return pheno - (intercept + slope * age)
