"""The synthetic cohort's 64 predictors at one visit: untreated values, treatment, missingness.

Copula markers (:data:`sphr.synth.params.MARGINALS`) come from their normal scores through
their sex- and age-specific marginals; the rest follow by UK Biobank's identities (haematocrit =
RBC x MCV, differential percentages summing to 100, counts = percentage x WBC, cholesterol from
its fractions). Treatment and disease then act on the untreated values, and whole panels go
missing, some depending on values nobody observes (docs/SYNTH.md).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from sphr.synth.copula import COPULA_MARKERS, to_value
from sphr.synth.params import (
    AGE_CENTRE,
    DETECTION_LIMIT,
    DIABETES_HBA1C,
    LDL_MEAN,
    MARGINALS,
    MCAR_BLOCKS,
    MNAR_BIOCHEMISTRY,
    MNAR_BMI,
    MNAR_MET,
    NOT_REPORTED_AT_OR_BELOW,
    STATIN_CRP,
    STATIN_TG,
)

CRP_REPORTABLE = (0.08, 79.96)  # the CRP assay's reportable range in UK Biobank


def ldl_mean(male: np.ndarray, age: np.ndarray) -> np.ndarray:
    """Untreated LDL mean by sex and age: women rise across the menopause (docs/SYNTH.md)."""
    p = LDL_MEAN
    menopause = ndtr((age - p["menopause_age"]) / p["menopause_sd"])
    women = (p["female_base"] + p["menopause_rise"] * menopause
             + p["female_per_year"] * (age - AGE_CENTRE))
    men = p["male_base"] + p["male_per_year"] * (age - AGE_CENTRE)
    return np.where(male, men, women)


def untreated(rng: np.random.Generator, z: np.ndarray, male: np.ndarray, age: np.ndarray,
              month: np.ndarray, frailty: np.ndarray) -> dict[str, np.ndarray]:
    """Every predictor before treatment and disease effects; ``z``: (n, copula markers) scores."""
    n = age.shape[0]
    v: dict[str, np.ndarray] = {"age": age.astype(float)}
    for j, name in enumerate(COPULA_MARKERS):
        mean = ldl_mean(male, age) if name == "ldl" else None
        v[name] = to_value(z[:, j], MARGINALS[name], male, age, AGE_CENTRE, mean)
    v["ldl"] = np.maximum(v["ldl"], 0.4)
    v["immature_reticulocyte_fraction"] = np.clip(v["immature_reticulocyte_fraction"], 0.05, 0.8)
    v["alp"] = v["alp"] * np.where(~male & (age > 52), 1.08, 1.0)  # post-menopausal bone turnover
    v["platelets"] = np.maximum(v["platelets"], 40)
    # vitamin D follows the season of the visit
    v["vitamin_d"] = v["vitamin_d"] * np.exp(0.22 * np.cos(2 * np.pi * (month - 8) / 12))

    # ---- red cells: RBC, MCV and MCH drawn; haematocrit, Hb and MCHC follow from them
    rbc, mcv = v["rbc"], v["mcv"]
    mch = mcv * (0.3392 + 0.006 * rng.standard_normal(n))
    v["mch"] = mch
    v["haematocrit"] = rbc * mcv / 10 * (1 + 0.01 * rng.standard_normal(n))
    v["haemoglobin"] = rbc * mch / 10 * (1 + 0.008 * rng.standard_normal(n))
    v["mchc"] = v["haemoglobin"] / v["haematocrit"] * 100
    ret_pct = v["reticulocyte_pct"]
    v["reticulocytes"] = ret_pct / 100 * rbc
    hls_pct = ret_pct * 0.333 * np.exp(0.3 * rng.standard_normal(n) - 0.045)
    v["hls_reticulocyte_pct"], v["hls_reticulocytes"] = hls_pct, hls_pct / 100 * rbc
    v["mean_reticulocyte_volume"] = 114 + 1.2 * (mcv - 91.1) + 5.6 * rng.standard_normal(n)
    v["mean_sphered_cell_volume"] = 91.3 + 1.0 * (mcv - 91.1) + 4.0 * rng.standard_normal(n)

    # ---- white cells: a logistic-normal differential that sums to 100%, tied to CRP's score
    infl = z[:, COPULA_MARKERS.index("crp")]
    logits = np.stack([
        np.log(27.5) + 0.26 * rng.standard_normal(n) - 0.08 * infl,   # lymphocytes
        np.log(5.9) + 0.30 * rng.standard_normal(n),                  # monocytes
        np.log(63.6) + 0.10 * rng.standard_normal(n) + 0.04 * infl,   # neutrophils
        np.log(2.6) + 0.60 * rng.standard_normal(n) - 0.2,            # eosinophils
        np.log(0.45) + 0.60 * rng.standard_normal(n) - 0.2,           # basophils
    ])
    pct = np.exp(logits)
    v["_differential"] = 100 * pct / pct.sum(axis=0)

    # ---- platelets: plateletcrit = count x MPV
    mpv = np.clip(9.2 - 0.45 * (v["platelets"] - 252) / 55 + 1.0 * rng.standard_normal(n),
                  6.0, 14.0)
    v["mpv"] = mpv
    v["plateletcrit"] = v["platelets"] * mpv / 10000 * (1 + 0.02 * rng.standard_normal(n))
    v["pdw"] = 16.6 + 0.15 * (mpv - 9.2) + 0.45 * rng.standard_normal(n)

    # ---- lifestyle outside the copula: sleep, rounded activity, MET total
    v["sleep_duration"] = 7.1 + 0.95 * rng.standard_normal(n) + 0.1 * frailty
    v["activity_days"] = np.clip(np.round(v["activity_days"]), 0, 21)
    v["activity_minutes"] = np.round(v["activity_minutes"])
    v["met_total"] = v["met_walking"] + v["met_moderate"] + v["met_vigorous"]
    # noise the lipid identities need after treatment, drawn here so treatment draws nothing
    v["_lipid_noise"] = rng.standard_normal((3, n))
    return v


def treat(v: dict[str, np.ndarray], cond: dict[str, np.ndarray], statin_factor: np.ndarray,
          dm_excess: np.ndarray, dm_glucose_noise: np.ndarray) -> dict[str, np.ndarray]:
    """The measured values: untreated values with treatment and disease acting on them.

    ``statin_factor``: each participant's LDL multiplier on a statin (variable response);
    ``dm_excess``: HbA1c excess over the non-diabetic value under treatment (mmol/mol)."""
    out = {k: x for k, x in v.items() if not k.startswith("_")}
    cancer, other = cond["cancer"], cond["other_serious"]
    statin, dm = cond["statin"], cond["diabetes"]
    # red cells: a small fall with cancer (anaemia of chronic disease)
    for k in ("rbc", "haematocrit", "haemoglobin", "reticulocytes", "hls_reticulocytes"):
        out[k] = v[k] * np.where(cancer, 0.97, 1.0)
    wbc = v["wbc"] * np.where(other, 1.05, 1.0)
    pct = v["_differential"]
    for i, cell in enumerate(("lymphocyte", "monocyte", "neutrophil", "eosinophil", "basophil")):
        out[f"{cell}_pct"], out[f"{cell}s"] = pct[i], pct[i] / 100 * wbc
    out["wbc"] = wbc

    # lipids: statins lower LDL by a participant-specific share; cholesterol and apolipoproteins
    # follow the treated fractions
    ldl = v["ldl"] * np.where(statin, statin_factor, 1.0)
    hdl = v["hdl"] * np.where(cond["hrt"], 1.05, 1.0)
    tg = v["triglycerides"] * np.where(statin, STATIN_TG, 1.0)
    noise = v["_lipid_noise"]
    out["ldl"], out["hdl"], out["triglycerides"] = ldl, hdl, tg
    out["cholesterol"] = ldl + hdl + tg / 2.2 + 0.15 * noise[0]
    out["apoa"] = 0.78 + 0.52 * hdl + 0.09 * noise[1]
    out["apob"] = 0.07 + 0.25 * ldl + 0.05 * tg + 0.07 * noise[2]

    # glycaemia: diagnosed diabetes adds a treated, variable excess (some below 48 mmol/mol)
    out["hba1c"] = v["hba1c"] + np.where(dm, dm_excess, 0.0)
    glucose = v["glucose"] + np.where(cond["fasting_time"] < 2, 0.25, 0.0)
    out["glucose"] = glucose * np.where(
        dm, np.exp(DIABETES_HBA1C["glucose_per_mmol_mol"] * dm_excess + dm_glucose_noise), 1.0)

    crp = v["crp"] * np.where(statin, STATIN_CRP, 1.0) * np.where(cancer | other, 1.3, 1.0)
    out["crp"] = np.clip(crp, *CRP_REPORTABLE)
    out["albumin"] = v["albumin"] - np.where(cancer, 0.8, 0.0) - np.where(other, 0.5, 0.0)
    out["cystatin_c"] = v["cystatin_c"] * np.where(other, 1.05, 1.0)
    out["urate"] = v["urate"] + np.where(cond["bp_med"], 15.0, 0.0)  # thiazides raise urate
    out["shbg"] = v["shbg"] * np.where(cond["hrt"], 1.3, 1.0) * np.where(cond["pill"], 1.9, 1.0)
    out["sleep_duration"] = np.clip(np.round(v["sleep_duration"]), 1, 23)
    return out


def apply_missingness(rng: np.random.Generator, v: dict[str, np.ndarray], n: int,
                      activity_score: np.ndarray, frailty: np.ndarray) -> None:
    """Whole panels go missing together (a sample not assayed), as in UKB; some of them depend
    on values nobody observes (docs/SYNTH.md, missingness)."""
    from sphr.data.fields import PREDICTORS

    blood_count = [f.name for f in PREDICTORS if f.group == "blood_count"]
    biochem = [f.name for f in PREDICTORS if f.group == "biochemistry"]
    met = ["met_walking", "met_moderate", "met_vigorous", "met_total"]
    panels = {
        "blood_count": blood_count,
        "reticulocytes": [c for c in blood_count if "retic" in c or "sphered" in c],
        "hdl": ["hdl"], "glucose": ["glucose"], "sex_hormones": ["shbg", "testosterone"],
        "vitamin_d": ["vitamin_d"], "hba1c": ["hba1c"], "ldl_apob": ["ldl", "apob"],
        "activity": ["activity_days", "activity_minutes"],
    }
    gone: list[tuple[np.ndarray, list[str]]] = [
        (rng.random(n) < share, panels[name]) for share, name in MCAR_BLOCKS]
    # not at random: frailer participants' samples fail more often (harder venepuncture) ...
    b = MNAR_BIOCHEMISTRY["per_sd_frailty"]
    p_bio = MNAR_BIOCHEMISTRY["share"] * np.exp(b * frailty - b * b / 2)
    gone.append((rng.random(n) < np.clip(p_bio, 0, 1), biochem))
    # ... the less active leave the activity questionnaire incomplete more often ...
    s = MNAR_MET["per_sd_activity"]
    p_met = MNAR_MET["share"] * np.exp(s * activity_score - s * s / 2)
    gone.append((rng.random(n) < np.clip(p_met, 0, 1), met))
    # ... the heaviest are weighed less often ...
    p_bmi = np.where(v["bmi"] > MNAR_BMI["above"], MNAR_BMI["share_above"], MNAR_BMI["share"])
    gone.append((rng.random(n) < p_bmi, ["bmi"]))
    # ... and values below an assay's lower limit are not reported, nor is any lab value at or
    # below zero (a masked cell only: no draw is taken, so no other value moves)
    for col, limit in DETECTION_LIMIT.items():
        gone.append((v[col] < limit, [col]))
    for col in blood_count + biochem:
        gone.append((v[col] <= NOT_REPORTED_AT_OR_BELOW, [col]))
    for mask, cols in gone:
        for col in cols:
            v[col] = np.where(mask, np.nan, v[col])
