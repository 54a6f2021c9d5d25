"""The generator's two worlds: who gets ill, given the same participants and markers.

Both worlds share participants, latents, markers and the random stream; they differ in how
baseline conditions, treatment and new diagnoses depend on the health state (docs/SYNTH.md,
worlds). Fixed before any method was run on either; do not tune them to a result.

* ``linear`` (the null world): log-odds and log-hazards linear in the seven Gaussian latents,
  as generator v1 had them. A linear readout of the raw markers is close to the best one can do.
* ``nonlinear`` (a positive control): log-odds and log-hazards depend on the TG/HDL and
  TC/HDL ratios through saturating thresholds, on U-shaped terms (BMI, HDL, sleep, albumin),
  on two latent subtypes with their own marker signatures, and on age interactions. The
  intercepts and baseline rates are set so that each condition's expected prevalence and each
  outcome's expected incidence equal the linear world's for the same participants: only *who*
  is at risk changes, not how many.

The oracle ceiling of an outcome is the AUROC of its true risk (what the generator knows)
against its realised value: no method can expect to beat it.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from sphr.stats import auroc
from sphr.synth.params import AGE_CENTRE

DEFINITIONS: dict[str, str] = {
    "linear": (
        "Null world. Baseline diabetes, cancer, other serious condition, statin and blood-pressure "
        "treatment are logistic, and new diagnoses (diabetes, cancer, other serious, "
        "cardiovascular, death) exponential, with log-odds / log-hazards linear in the seven "
        "Gaussian latents, frailty, age and sex. No subtypes."),
    "nonlinear": (
        "Positive control. Two latent subtypes (15% 'hepatic insulin-resistant': ALT, GGT, TG, "
        "urate up, HDL and SHBG down; 12% 'renal-inflammatory': cystatin C, urea, CRP up, "
        "albumin, RBC and BMI down). Diabetes: a saturating step in TG/HDL around 1.3 "
        "(mmol/L ratio), subtype 1, HbA1c above +0.8 SD, BMI with an effect fading with age. "
        "Other serious condition: U-shaped BMI and HDL, cystatin C above average only over 60, "
        "subtype 2, sleep away from 7 h. Cancer: age, IGF-1 in women, CRP above +1 SD, "
        "subtype 2. Statin: a step in TC/HDL around 4.5. Blood-pressure treatment: BMI only over "
        "the centre age, subtype 2. Cardiovascular: TC/HDL step, subtype 2, CRP and HbA1c above "
        "thresholds. Death: U-shaped BMI, subtype 2, low albumin, sleep away from 7 h. Intercepts "
        "and baseline rates matched to the linear world's prevalence and incidence."),
}

#: share of each subtype and its signature on the markers' normal scores (SDs); subtype 0 is
#: everyone else. docs/SYNTH.md, worlds
SUBTYPE_SHARES: tuple[float, float] = (0.15, 0.12)
SUBTYPE_SIGNATURES: dict[int, dict[str, float]] = {
    1: {"alt": 0.8, "ggt": 0.8, "triglycerides": 0.6, "hdl": -0.5, "shbg": -0.6, "urate": 0.4},
    2: {"cystatin_c": 0.8, "urea": 0.6, "crp": 0.7, "albumin": -0.6, "rbc": -0.4, "bmi": -0.4},
}
#: McLaughlin 2003: TG/HDL >= 3.0 in mg/dL (1.3 in mmol/L) flags insulin resistance
TG_HDL_STEP = (1.3, 0.25)
#: NICE / QRISK use TC/HDL; 4.5 is a common treatment threshold (assumption on the width)
TC_HDL_STEP = (4.5, 0.5)
CONDITIONS: tuple[str, ...] = ("diabetes", "cancer", "other_serious", "statin", "bp_med")
HAZARDS: tuple[str, ...] = ("diabetes", "cancer", "other_serious")
#: v1's baseline rates per year at the centre (linear world); docs/SYNTH.md, worlds
BASE_RATE = {"diabetes": 0.0045, "cancer": 0.0055, "other_serious": 0.011}
#: log-odds of statin / blood-pressure treatment added for diagnosed diabetes (both worlds)
DIABETES_TREATMENT = {"statin": 1.6, "bp_med": 0.6}


def draw_subtypes(rng: np.random.Generator, n: int) -> np.ndarray:
    """0, 1 or 2 per participant; drawn in both worlds so the worlds share the stream."""
    u = rng.random(n)
    return np.where(u < SUBTYPE_SHARES[0], 1, np.where(u < sum(SUBTYPE_SHARES), 2, 0))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _linear(p: dict[str, np.ndarray]) -> tuple[dict, dict]:
    a, male, fr = p["age"] - AGE_CENTRE, p["male"], p["frailty"]
    logits = {
        "diabetes": -3.95 + 1.45 * p["metabolic"] + 0.035 * a + 0.35 * male,
        "cancer": -2.55 + 0.055 * a + 0.2 * p["inflammation"] + 0.15 * fr + 0.15 * ~male,
        "other_serious": (-1.75 + 0.55 * fr + 0.3 * p["inflammation"] + 0.25 * p["renal"]
                          + 0.015 * a),
        "statin": -2.55 + 1.0 * p["lipid"] + 0.45 * p["metabolic"] + 0.07 * a + 0.55 * male,
        "bp_med": -1.95 + 0.7 * p["metabolic"] + 0.35 * p["renal"] + 0.075 * a + 0.3 * male,
    }
    log_hazard = {
        "diabetes": 1.2 * p["metabolic"] + 0.02 * a,
        "cancer": 0.05 * a + 0.2 * p["inflammation"] + 0.1 * fr,
        "other_serious": 0.75 * fr + 0.35 * p["inflammation"] + 0.25 * p["renal"] + 0.02 * a,
    }
    return logits, log_hazard


def _nonlinear(p: dict[str, np.ndarray], v: dict[str, np.ndarray],
               z: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Linear predictors without intercepts; ``v`` untreated baseline values, ``z`` their
    normal scores (subtype shifts included)."""
    a, male = p["age"] - AGE_CENTRE, p["male"]
    s1, s2 = p["subtype"] == 1, p["subtype"] == 2
    tg_hdl = v["triglycerides"] / v["hdl"]
    tc_hdl = (v["ldl"] + v["hdl"] + v["triglycerides"] / 2.2) / v["hdl"]
    insulin_resistant = expit((tg_hdl - TG_HDL_STEP[0]) / TG_HDL_STEP[1])
    high_ratio = expit((tc_hdl - TC_HDL_STEP[0]) / TC_HDL_STEP[1])
    off_sleep = np.abs(v["sleep_duration"] - 7.0)
    bmi, hdl = z["bmi"], z["hdl"]
    lp = {
        "diabetes": (2.0 * insulin_resistant + 1.3 * s1 + 1.5 * _relu(z["hba1c"] - 0.8)
                     + 0.7 * bmi * np.clip(1 - a / 20, 0, None)),
        "other_serious": (0.45 * bmi ** 2 + 0.35 * hdl ** 2
                          + 0.8 * _relu(z["cystatin_c"]) * (a > 3.5)
                          + 1.2 * s2 + 0.35 * off_sleep),
        "cancer": 0.055 * a + 0.5 * z["igf1"] * ~male + 0.5 * _relu(z["crp"] - 1) + 0.5 * s2,
        "statin": 2.2 * high_ratio + 0.07 * a + 0.55 * male,
        "bp_med": 0.075 * a + 0.6 * bmi * (a > 0) + 0.6 * s2 + 0.3 * male,
    }
    log_hazard = {k: lp[k] for k in HAZARDS}
    log_hazard["cardiovascular"] = (1.4 * high_ratio + 0.9 * s2 + 0.6 * _relu(z["crp"] - 0.5)
                                    + 0.5 * _relu(z["hba1c"] - 1) + 0.07 * a + 0.65 * male)
    log_hazard["death"] = (0.085 * a + 0.4 * male + 0.35 * bmi ** 2 + 0.9 * s2
                           + 0.7 * _relu(-z["albumin"] - 1) + 0.3 * off_sleep)
    return lp, log_hazard


def _match_logit(lp: np.ndarray, target: float) -> np.ndarray:
    """``lp`` plus the intercept whose mean probability is ``target`` (bisection)."""
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expit(lp + mid).mean() < target else (lo, mid)
    return lp + (lo + hi) / 2


def _match_log_hazard(lp: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``lp`` shifted so that mean(exp(lp)) equals mean(exp(reference))."""
    shift = np.log(np.exp(reference - reference.max()).mean()) + reference.max()
    return lp - (np.log(np.exp(lp - lp.max()).mean()) + lp.max()) + shift


def risk_model(world: str, p: dict[str, np.ndarray], v: dict[str, np.ndarray],
               z: dict[str, np.ndarray],
               linked_reference: dict[str, np.ndarray]) -> tuple[dict, dict, dict | None]:
    """(baseline logits, hazards per year of a new diagnosis, linked log-hazards or None).

    ``linked_reference``: the linear world's cardiovascular and death log-hazards
    (:func:`sphr.synth.linked.latent_log_hazards`), which the nonlinear ones are matched
    to; None means the linked records use their own latent hazards."""
    logits, log_hazard = _linear(p)
    if world == "linear":
        hazards = {k: BASE_RATE[k] * np.exp(log_hazard[k]) for k in HAZARDS}
        return logits, hazards, None
    lp, nl_hazard = _nonlinear(p, v, z)
    matched = {k: _match_logit(lp[k], float(expit(logits[k]).mean())) for k in CONDITIONS}
    hazards = {k: BASE_RATE[k] * np.exp(_match_log_hazard(nl_hazard[k], log_hazard[k]))
               for k in HAZARDS}
    linked = {k: _match_log_hazard(nl_hazard[k], linked_reference[k])
              for k in ("cardiovascular", "death")}
    return matched, hazards, linked


def unhealthy_probability(logits: dict[str, np.ndarray]) -> np.ndarray:
    """True probability of the 'unhealthy' label: any condition or condition medication
    (insulin only comes with diabetes; statin and blood-pressure odds rise with diabetes)."""
    p = {k: expit(v) for k, v in logits.items()}
    none_else = ((1 - p["cancer"]) * (1 - p["other_serious"]) * (1 - p["statin"])
                 * (1 - p["bp_med"]))
    return p["diabetes"] + (1 - p["diabetes"]) * (1 - none_else)


def ceilings(risk: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
             male: np.ndarray) -> dict[str, dict[str, float]]:
    """``risk``: name -> (true risk, realised event, who counts); AUROC overall and by sex."""
    out = {}
    for name, (score, event, who) in risk.items():
        out[name] = {group: round(auroc(event[who & sel], score[who & sel]), 4)
                     for group, sel in (("all", np.ones_like(male)), ("female", ~male),
                                        ("male", male))}
    return out


def read_world(truth_path: str) -> dict:
    """The world's name, definition and oracle ceilings from a written ``*.truth.parquet``."""
    import json

    import pyarrow.parquet as pq

    meta = pq.read_schema(truth_path).metadata or {}
    pandas_meta = json.loads(meta.get(b"pandas", b"{}"))
    return pandas_meta.get("attributes", {}).get("world", {})
