"""A synthetic UK Biobank cohort whose health is structured, not noise.

Every participant has seven latent health factors (metabolic, lipid,
inflammation, renal, hepatic, anaemia, fitness) that share a general frailty
factor which grows with age. The factors drive

* the 64 predictors, with UKB's sex- and age-dependent means and SDs
  (``UKB_FORMAT.md``), log-normal where UKB's markers are skewed, and the
  blood-count identities kept (haematocrit = RBC x MCV, differential
  percentages summing to 100, counts = percentage x WBC, cholesterol from its
  fractions);
* doctor-diagnosed conditions and medication at baseline, and medicated
  participants have treated values (statins lower LDL, diagnosed diabetes
  raises HbA1c less than untreated hyperglycaemia would);
* new diagnoses at later visits, drawn from hazards that depend on the same
  baseline latents, so single-visit risk prediction is possible but not
  trivial: diabetes follows the metabolic factor that HbA1c and glucose show,
  "other serious condition" follows frailty and inflammation, cancer mostly age.

Linked health records (hospital diagnoses, cancer and death registries) follow the
same latents (:mod:`sphr.data.synth_linked`); they come from a random stream of
their own, so the visits and truth columns above are the same with or without them.

The latent ground truth is returned separately (:class:`SyntheticCohort`.truth)
and written next to the export, never inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

LATENTS: tuple[str, ...] = (
    "metabolic", "lipid", "inflammation", "renal", "hepatic", "anaemia", "fitness",
)
#: loading of each latent on general frailty (fitness loads negatively)
_FRAILTY_LOADING = {"metabolic": 0.45, "lipid": 0.2, "inflammation": 0.45, "renal": 0.4,
                    "hepatic": 0.25, "anaemia": 0.3, "fitness": -0.35}
AGE_CENTRE = 56.5
BASELINE_START = np.datetime64("2006-03-13")
BASELINE_END = np.datetime64("2010-10-01")


@dataclass(frozen=True)
class SyntheticCohort:
    """Per participant and visit: the values an export holds, and the hidden truth."""

    #: one row per participant and visit (instance 0..3): eid, instance, every catalog field
    visits: pd.DataFrame
    #: one row per participant: latents, hazards, true diagnosis times (never exported)
    truth: pd.DataFrame
    #: one row per linked record: eid, source (hospital, cancer_registry, death,
    #: death_underlying, death_contributory), code (ICD-10 with its dot; None for a death's
    #: date), date; None for a cohort without linked records
    linked: pd.DataFrame | None = None


# --------------------------------------------------------------------------- helpers
def _lognormal_params(mean: float, sd: float) -> tuple[float, float]:
    sigma2 = np.log1p((sd / mean) ** 2)
    return np.log(mean) - sigma2 / 2, np.sqrt(sigma2)


def _mix(rng: np.random.Generator, lat: dict[str, np.ndarray], loadings: dict[str, float]) -> np.ndarray:
    """A standard-normal score: the loaded latents plus enough own noise for unit variance."""
    n = next(iter(lat.values())).shape[0]
    own = max(0.05, 1.0 - sum(w * w for w in loadings.values()))
    score = np.sqrt(own) * rng.standard_normal(n)
    for name, w in loadings.items():
        score += w * lat[name]
    return score


def _normal(rng, lat, mean, sd, loadings, age=None, age_slope=0.0):
    v = mean + sd * _mix(rng, lat, loadings)
    if age is not None:
        v = v + age_slope * (age - AGE_CENTRE)
    return v


def _lognormal(rng, lat, mean, sd, loadings, age=None, age_slope=0.0):
    """``mean``/``sd`` are of the value; ``age_slope`` is per year on the log scale."""
    mu, sigma = _lognormal_params(mean, sd)
    log_v = mu + sigma * _mix(rng, lat, loadings)
    if age is not None:
        log_v = log_v + age_slope * (age - AGE_CENTRE)
    return np.exp(log_v)


def _by_sex(male: np.ndarray, female_value: float, male_value: float) -> np.ndarray:
    return np.where(male, male_value, female_value)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# --------------------------------------------------------------------------- latent state
def _draw_participants(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    male = rng.random(n) < 0.456
    # UKB baseline ages: 40-69 by design, a few 37-39 and 70-73; skewed towards older.
    age = np.clip(np.round(rng.normal(57.5, 8.0, n) - 1.5 * rng.gamma(1.2, 1.0, n) + 1.0), 37, 73)
    inside = rng.random(n) < 0.97
    age[inside] = np.clip(age[inside], 40, 70)
    span = (BASELINE_END - BASELINE_START).astype(int)
    date0 = BASELINE_START + rng.integers(0, span, n).astype("timedelta64[D]")
    frailty = rng.standard_normal(n) + 0.025 * (age - AGE_CENTRE)
    lat = {}
    for name in LATENTS:
        g = _FRAILTY_LOADING[name]
        lat[name] = g * frailty + np.sqrt(1 - g * g) * rng.standard_normal(n)
    # metabolic and lipid risk travel together beyond frailty (shared diet and adiposity)
    lat["lipid"] = 0.85 * lat["lipid"] + 0.25 * lat["metabolic"]
    return {"male": male, "age": age, "date0": date0, "frailty": frailty, **lat}


def _conditions(rng: np.random.Generator, p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Doctor-diagnosed conditions and medication at baseline (truth, before codes)."""
    n, male, a = p["age"].shape[0], p["male"], p["age"] - AGE_CENTRE
    diabetes = rng.random(n) < _sigmoid(-3.95 + 1.45 * p["metabolic"] + 0.035 * a + 0.35 * male)
    cancer = rng.random(n) < _sigmoid(-2.55 + 0.055 * a + 0.2 * p["inflammation"] + 0.15 * p["frailty"]
                                      + 0.15 * ~male)
    other = rng.random(n) < _sigmoid(-1.75 + 0.55 * p["frailty"] + 0.3 * p["inflammation"]
                                     + 0.25 * p["renal"] + 0.015 * a)
    statin = rng.random(n) < _sigmoid(-2.55 + 1.0 * p["lipid"] + 0.45 * p["metabolic"] + 0.07 * a
                                      + 0.55 * male + 1.6 * diabetes)
    bp_med = rng.random(n) < _sigmoid(-1.95 + 0.7 * p["metabolic"] + 0.35 * p["renal"] + 0.075 * a
                                      + 0.3 * male + 0.6 * diabetes)
    insulin = diabetes & (rng.random(n) < 0.16)
    hrt = ~male & (rng.random(n) < _sigmoid(-2.4 + 0.08 * a))
    pill = ~male & (rng.random(n) < _sigmoid(-3.2 - 0.25 * a))
    return {"diabetes": diabetes, "cancer": cancer, "other_serious": other, "statin": statin,
            "bp_med": bp_med, "insulin": insulin, "hrt": hrt, "pill": pill}


# --------------------------------------------------------------------------- markers
def _markers(rng: np.random.Generator, p: dict[str, np.ndarray], c: dict[str, np.ndarray],
             age: np.ndarray, month: np.ndarray) -> dict[str, np.ndarray]:
    """All 64 predictors (raw UKB units) for one visit of every participant."""
    male = p["male"]
    lat = {k: p[k] for k in LATENTS}
    n = age.shape[0]
    v: dict[str, np.ndarray] = {"age": age.astype(float)}
    v["bmi"] = _by_sex(male, 27.0, 27.8) * np.exp(
        0.165 * _mix(rng, lat, {"metabolic": 0.65, "fitness": -0.25}))

    # ---- red cells: RBC, MCV and MCH drawn; haematocrit, Hb and MCHC follow from them
    rbc = _normal(rng, lat, 0, 0.33, {"anaemia": -0.5}) + _by_sex(male, 4.30, 4.80)
    rbc = rbc * np.where(c["cancer"], 0.97, 1.0)
    mcv = _normal(rng, lat, 91.1, 4.2, {"hepatic": 0.2, "anaemia": -0.25}, age, 0.05)
    mch = mcv * (0.3392 + 0.006 * rng.standard_normal(n))
    v["rbc"], v["mcv"], v["mch"] = rbc, mcv, mch
    v["haematocrit"] = rbc * mcv / 10 * (1 + 0.01 * rng.standard_normal(n))
    v["haemoglobin"] = rbc * mch / 10 * (1 + 0.008 * rng.standard_normal(n))
    v["mchc"] = v["haemoglobin"] / v["haematocrit"] * 100
    v["rdw"] = _lognormal(rng, lat, 13.6, 1.0, {"anaemia": 0.35, "inflammation": 0.2}, age, 0.002)
    ret_pct = _lognormal(rng, lat, 1.23, 0.49, {"anaemia": 0.25})
    v["reticulocyte_pct"], v["reticulocytes"] = ret_pct, ret_pct / 100 * rbc
    hls_pct = ret_pct * 0.333 * np.exp(0.3 * rng.standard_normal(n) - 0.045)
    v["hls_reticulocyte_pct"], v["hls_reticulocytes"] = hls_pct, hls_pct / 100 * rbc
    v["immature_reticulocyte_fraction"] = np.clip(
        _normal(rng, lat, 0.32, 0.06, {"inflammation": 0.15}), 0.05, 0.8)
    v["mean_reticulocyte_volume"] = 114 + 1.2 * (mcv - 91.1) + 5.6 * rng.standard_normal(n)
    v["mean_sphered_cell_volume"] = 91.3 + 1.0 * (mcv - 91.1) + 4.0 * rng.standard_normal(n)

    # ---- white cells: WBC, then a logistic-normal differential that sums to 100%
    wbc = _lognormal(rng, lat, 6.9, 2.0, {"inflammation": 0.4, "metabolic": 0.2})
    wbc = wbc * np.where(c["other_serious"], 1.05, 1.0)
    infl = lat["inflammation"]
    logits = np.stack([
        np.log(27.5) + 0.26 * rng.standard_normal(n) - 0.08 * infl,   # lymphocytes
        np.log(5.9) + 0.30 * rng.standard_normal(n),                  # monocytes
        np.log(63.6) + 0.10 * rng.standard_normal(n) + 0.04 * infl,   # neutrophils
        np.log(2.6) + 0.60 * rng.standard_normal(n) - 0.2,            # eosinophils
        np.log(0.45) + 0.60 * rng.standard_normal(n) - 0.2,           # basophils
    ])
    pct = np.exp(logits)
    pct = 100 * pct / pct.sum(axis=0)
    for i, cell in enumerate(("lymphocyte", "monocyte", "neutrophil", "eosinophil", "basophil")):
        v[f"{cell}_pct"] = pct[i]
        v[f"{cell}s"] = pct[i] / 100 * wbc
    v["wbc"] = wbc

    # ---- platelets: plateletcrit = count x MPV
    plt_count = _normal(rng, lat, 0, 55, {"inflammation": 0.25}) + _by_sex(male, 265, 235)
    plt_count = np.maximum(plt_count, 40)
    mpv = 9.2 - 0.45 * (plt_count - 252) / 55 + 1.0 * rng.standard_normal(n)
    mpv = np.clip(mpv, 6.0, 14.0)
    v["platelets"], v["mpv"] = plt_count, mpv
    v["plateletcrit"] = plt_count * mpv / 10000 * (1 + 0.02 * rng.standard_normal(n))
    v["pdw"] = 16.6 + 0.15 * (mpv - 9.2) + 0.45 * rng.standard_normal(n)

    # ---- lipids: LDL, HDL, TG drawn; cholesterol and apolipoproteins follow
    ldl = _normal(rng, lat, 3.80, 0.86, {"lipid": 0.75, "metabolic": 0.1}, age, 0.004)
    ldl = np.maximum(ldl, 0.4) * np.where(c["statin"], 0.64, 1.0)
    hdl = _lognormal(rng, lat, 1.0, 0.25, {"metabolic": -0.5, "fitness": 0.15}) * _by_sex(male, 1.58, 1.28)
    hdl = hdl * np.where(c["hrt"], 1.05, 1.0)
    tg = _lognormal(rng, lat, 1.0, 0.5, {"metabolic": 0.5, "lipid": 0.35}) * _by_sex(male, 1.5, 2.0)
    tg = tg * np.where(c["statin"], 0.9, 1.0)
    v["ldl"], v["hdl"], v["triglycerides"] = ldl, hdl, tg
    v["cholesterol"] = ldl + hdl + tg / 2.2 + 0.15 * rng.standard_normal(n)
    v["apoa"] = 0.78 + 0.52 * hdl + 0.11 * rng.standard_normal(n)
    v["apob"] = 0.07 + 0.25 * ldl + 0.05 * tg + 0.055 * rng.standard_normal(n)

    # ---- glycaemia: hyperglycaemia from the metabolic factor; diagnosed diabetes is treated
    fasting = c["fasting_time"]
    glucose = _lognormal(rng, lat, 4.95, 0.62, {"metabolic": 0.45}, age, 0.002)
    glucose = glucose + np.where(fasting < 2, 0.25, 0.0)
    hba1c = _normal(rng, lat, 35.0, 3.9, {"metabolic": 0.5}, age, 0.08)
    dm = c["diabetes"]
    v["glucose"] = glucose * np.where(dm, np.exp(0.35 + 0.25 * rng.standard_normal(n)), 1.0)
    v["hba1c"] = hba1c + np.where(dm, 14 + 7 * np.abs(rng.standard_normal(n)), 0.0)

    # ---- inflammation, liver, kidney
    crp = _lognormal(rng, lat, 2.6, 4.1, {"inflammation": 0.6, "metabolic": 0.3})
    crp = crp * np.where(c["statin"], 0.85, 1.0) * np.where(c["cancer"] | c["other_serious"], 1.3, 1.0)
    v["crp"] = np.clip(crp, 0.08, 79.96)  # the assay's reportable range in UKB
    alb = _normal(rng, lat, 45.4, 2.6, {"inflammation": -0.3, "hepatic": -0.15}, age, -0.05)
    v["albumin"] = alb - np.where(c["cancer"], 0.8, 0.0) - np.where(c["other_serious"], 0.5, 0.0)
    v["total_protein"] = _normal(rng, lat, 73.3, 4.2, {"inflammation": 0.15}) + 0.3 * (alb - 45.2)
    v["alp"] = _lognormal(rng, lat, 84, 24, {"hepatic": 0.3, "metabolic": 0.15}) * np.where(
        ~male & (age > 52), 1.08, 1.0)
    v["alt"] = _lognormal(rng, lat, 1.0, 0.5, {"metabolic": 0.4, "hepatic": 0.45}) * _by_sex(male, 20.0, 27.5)
    v["ast"] = _lognormal(rng, lat, 1.0, 0.36, {"hepatic": 0.45, "metabolic": 0.15}) * _by_sex(male, 24.5, 29.0)
    v["ggt"] = _lognormal(rng, lat, 1.0, 0.9, {"hepatic": 0.5, "metabolic": 0.3}) * _by_sex(male, 28.0, 43.0)
    v["bilirubin"] = _lognormal(rng, lat, 1.0, 0.45, {"anaemia": -0.1}) * _by_sex(male, 8.0, 10.3)
    renal = {"renal": 0.6}
    v["creatinine"] = _lognormal(rng, lat, 1.0, 0.19, renal, age, 0.003) * _by_sex(male, 64.0, 81.0)
    v["cystatin_c"] = _lognormal(rng, lat, 0.92, 0.15, {"renal": 0.6, "inflammation": 0.1}, age, 0.006)
    v["cystatin_c"] = v["cystatin_c"] * np.where(c["other_serious"], 1.05, 1.0)
    v["urea"] = _normal(rng, lat, 5.4, 1.3, {"renal": 0.45}, age, 0.03)
    v["urate"] = _normal(rng, lat, 0, 68, {"metabolic": 0.35, "renal": 0.3}) + _by_sex(male, 275, 355)
    v["urate"] = v["urate"] + np.where(c["bp_med"], 15.0, 0.0)
    v["calcium"] = _normal(rng, lat, 2.38, 0.10, {})
    v["phosphate"] = _normal(rng, lat, 0, 0.16, {"renal": 0.15}) + _by_sex(male, 1.27, 1.17)
    v["igf1"] = _normal(rng, lat, 21.0, 5.2, {"metabolic": -0.1}, age, -0.15)

    # ---- sex hormones
    shbg = np.exp(_mix(rng, lat, {"metabolic": -0.4}) * _by_sex(male, 0.45, 0.40))
    shbg = shbg * _by_sex(male, 60.0, 36.9) * np.where(c["hrt"], 1.3, 1.0) * np.where(c["pill"], 1.9, 1.0)
    v["shbg"] = shbg
    testo = np.exp(_mix(rng, lat, {"metabolic": -0.3}) * _by_sex(male, 0.5, 0.30))
    v["testosterone"] = testo * _by_sex(male, 1.1, 11.6)

    # ---- vitamin D: season of the visit, time outdoors
    season = np.cos(2 * np.pi * (month - 8) / 12)
    v["vitamin_d"] = _lognormal(rng, lat, 45.0, 19.0, {"fitness": 0.2, "metabolic": -0.15}) * np.exp(0.22 * season)

    # ---- lifestyle: sleep, activity days/minutes, MET (zero-inflated, heavy right tail)
    fit = lat["fitness"]
    v["sleep_duration"] = np.clip(np.round(7.1 + 0.95 * rng.standard_normal(n) + 0.1 * p["frailty"]), 1, 23)
    v["activity_days"] = np.clip(np.round(10.6 + 4.2 * _mix(rng, lat, {"fitness": 0.5})), 0, 21)
    v["activity_minutes"] = np.round(_lognormal(rng, lat, 127, 102, {"fitness": 0.4}))
    met = {}
    for kind, (mean, sd, p_zero, load) in {
        "walking": (1130, 1000, 0.08, 0.3), "moderate": (1250, 1250, 0.25, 0.45),
        "vigorous": (1230, 1250, 0.45, 0.55),
    }.items():
        amount = _lognormal(rng, lat, mean, sd, {"fitness": load})
        active = rng.random(n) > np.clip(p_zero * np.exp(-0.5 * fit), 0, 0.95)
        met[kind] = np.where(active, amount, 0.0)
        v[f"met_{kind}"] = met[kind]
    v["met_total"] = met["walking"] + met["moderate"] + met["vigorous"]
    return v


# --------------------------------------------------------------------------- missingness
def _apply_missingness(rng: np.random.Generator, v: dict[str, np.ndarray], n: int) -> None:
    """Whole panels go missing together (a sample not assayed), as in UKB."""
    from sphr.data.fields import PREDICTORS

    blood_count = [f.name for f in PREDICTORS if f.group == "blood_count"]
    retic = [c for c in blood_count if "retic" in c or "sphered" in c]
    biochem = [f.name for f in PREDICTORS if f.group == "biochemistry"]
    met = ["met_walking", "met_moderate", "met_vigorous", "met_total"]
    blocks: list[tuple[float, list[str]]] = [
        (0.05, blood_count), (0.012, retic), (0.065, biochem),
        (0.08, ["hdl"]), (0.08, ["glucose"]), (0.09, ["shbg", "testosterone"]),
        (0.04, ["vitamin_d"]), (0.02, ["hba1c"]), (0.01, ["ldl", "apob"]),
        (0.20, met), (0.12, ["activity_days", "activity_minutes"]), (0.006, ["bmi"]),
    ]
    for share, cols in blocks:
        gone = rng.random(n) < share
        for col in cols:
            v[col] = np.where(gone, np.nan, v[col])


# --------------------------------------------------------------------------- the cohort
def generate_cohort(n: int = 20_000, seed: int = 0, *, linked: bool = True) -> SyntheticCohort:
    """Baseline and later visits (and linked records) for ``n`` participants; same seed, same
    cohort."""
    from sphr.errors import ConfigError

    if n < 1:
        raise ConfigError(f"--participants must be at least 1, got {n}")
    rng = np.random.default_rng(seed)
    p = _draw_participants(rng, n)
    c = _conditions(rng, p)
    c["fasting_time"] = np.clip(np.round(rng.lognormal(np.log(3.0), 0.55, n)), 0, 24)
    eid = np.sort(rng.choice(np.arange(1_000_000, 6_000_000), size=n, replace=False))
    a = p["age"] - AGE_CENTRE

    # hazards of a new diagnosis per year, from the baseline latents (the ground truth)
    hazard = {
        "diabetes": 0.0045 * np.exp(1.2 * p["metabolic"] + 0.02 * a),
        "cancer": 0.0055 * np.exp(0.05 * a + 0.2 * p["inflammation"] + 0.1 * p["frailty"]),
        "other_serious": 0.011 * np.exp(0.75 * p["frailty"] + 0.35 * p["inflammation"]
                                        + 0.25 * p["renal"] + 0.02 * a),
    }
    onset = {k: np.where(c[k], 0.0, rng.exponential(1.0 / h)) for k, h in hazard.items()}

    # later visits: ~4% repeat assessment 2012-13 (4-6 years on), ~8% imaging 2014+, ~1% repeat imaging
    years = {
        1: np.where(rng.random(n) < 0.04, rng.uniform(4.0, 6.0, n), np.nan),
        2: np.where(rng.random(n) < 0.08, rng.uniform(6.0, 10.0, n), np.nan),
    }
    years[3] = np.where(~np.isnan(years[2]) & (rng.random(n) < 0.12),
                        years[2] + rng.uniform(2.0, 3.0, n), np.nan)

    frames = []
    for instance in (0, 1, 2, 3):
        if instance == 0:
            idx = np.arange(n)
            t = np.zeros(n)
        else:
            idx = np.flatnonzero(~np.isnan(years[instance]))
            t = years[instance][idx]
        frames.append(_visit(rng, p, c, onset, idx, t, instance, eid))
    visits = pd.concat(frames, ignore_index=True)

    truth = pd.DataFrame({"eid": eid, "sex": p["male"].astype(np.int8), "age": p["age"],
                          "frailty": p["frailty"], **{k: p[k] for k in LATENTS}})
    for k in hazard:
        truth[f"hazard_{k}"] = hazard[k]
        truth[f"onset_years_{k}"] = onset[k]  # 0 = diagnosed before baseline
    for k in ("statin", "bp_med", "insulin", "hrt", "pill"):
        truth[f"baseline_{k}"] = c[k]
    if not linked:
        return SyntheticCohort(visits=visits, truth=truth)
    from sphr.data.synth_linked import linked_records

    # after everything above, from its own stream: the existing columns do not move
    records, true_times = linked_records(seed, p, onset, hazard, c["insulin"], eid, frames[0])
    for k, v in true_times.items():
        truth[k] = v  # years from baseline; 0 = before baseline
    return SyntheticCohort(visits=visits, truth=truth, linked=records)


def _visit(rng, p, c, onset, idx, years, instance, eid) -> pd.DataFrame:
    """The export's values for the participants in ``idx`` at one visit."""
    m = idx.shape[0]
    sub = {k: v[idx] for k, v in p.items()}
    sub["frailty"] = sub["frailty"] + 0.04 * years  # people age between visits
    state = {k: (onset[k][idx] <= years) for k in onset}
    # medication: baseline treatment carries on; new diabetes and age bring new prescriptions
    statin = c["statin"][idx] | (state["diabetes"] & (rng.random(m) < 0.6)) | (
        rng.random(m) < 0.012 * years)
    bp_med = c["bp_med"][idx] | (rng.random(m) < 0.015 * years)
    insulin = c["insulin"][idx] | (state["diabetes"] & ~c["diabetes"][idx] & (rng.random(m) < 0.1))
    cond = {**state, "statin": statin, "bp_med": bp_med, "insulin": insulin,
            "hrt": c["hrt"][idx], "pill": c["pill"][idx] & (years < 1),
            "fasting_time": c["fasting_time"][idx] if instance == 0
            else np.clip(np.round(rng.lognormal(np.log(3.0), 0.55, m)), 0, 24)}
    date0 = p["date0"][idx]
    date = date0 + np.round(years * 365.25).astype("timedelta64[D]")
    month = date.astype("datetime64[M]").astype(int) % 12 + 1
    age = np.floor(sub["age"] + years)
    values = _markers(rng, sub, cond, age, month)
    _apply_missingness(rng, values, m)

    cols: dict[str, np.ndarray] = {"eid": eid[idx], "instance": np.full(m, instance, np.int8),
                                   "sex": sub["male"].astype(np.int8), "assessment_date": date}
    cols.update(values)
    u = rng.random(m)
    cols["sleep_duration"] = np.where(u < 0.008, -1.0, np.where(u < 0.011, -3.0, values["sleep_duration"]))
    cols["fasting_time"] = cond["fasting_time"]
    for k in ("diabetes", "cancer", "other_serious"):
        cols[k] = _answer(rng, state[k], m)
    arrays = {**_medication_arrays(rng, sub["male"], cond, m),
              "illness_code": _illness_codes(rng, cond, m),
              "cancer_code": _cancer_codes(rng, sub["male"], cond, m),
              "medication_code": _medication_codes(rng, cond, m)}
    for name, arr in arrays.items():
        for a in range(arr.shape[1]):
            cols[f"{name}#{a}"] = arr[:, a]
    return pd.DataFrame(cols)


def _answer(rng: np.random.Generator, truth: np.ndarray, m: int) -> np.ndarray:
    """Touchscreen answer: 1 yes, 0 no, with UKB's share of -1 do not know, -3 prefer not to answer."""
    ans = truth.astype(np.int64)
    u = rng.random(m)
    ans[u < 0.012] = -1
    ans[(u >= 0.012) & (u < 0.017)] = -3
    return ans


def _pack(rows: list[list[int]], width: int) -> np.ndarray:
    """Left-aligned array columns as an (m, width) float array, NaN where empty."""
    out = np.full((len(rows), width), np.nan)
    for i, codes in enumerate(rows):
        codes = codes[:width]
        out[i, : len(codes)] = codes
    return out


def _medication_arrays(rng, male, cond, m) -> dict[str, np.ndarray]:
    """6177 (men, 3 arrays) and 6153 (women, 4 arrays): codes, -7 none, -1/-3 no answer."""
    u = rng.random(m)
    special = np.where(u < 0.006, -1.0, np.where(u < 0.01, -3.0, np.nan))
    out = {}
    for name, is_sex, codes, width in (
        ("medication_men", male, (1, 2, 3), 3),
        ("medication_women", ~male, (1, 2, 3, 4, 5), 4),
    ):
        keys = ("statin", "bp_med", "insulin", "hrt", "pill")
        arr = _codes_to_arrays({code: cond[keys[code - 1]] for code in codes}, m, width)
        arr[:, 0] = np.where(np.isnan(arr[:, 0]), -7.0, arr[:, 0])  # answered: none of the above
        answered_special = ~np.isnan(special)
        arr[answered_special] = np.nan
        arr[answered_special, 0] = special[answered_special]
        arr[~is_sex] = np.nan  # the question is asked of one sex only
        out[name] = arr
    return out


def _illness_codes(rng, cond, m) -> np.ndarray:
    draws = {
        1065: cond["bp_med"] & (rng.random(m) < 0.85),
        1223: cond["diabetes"] & (rng.random(m) < 0.7),
        1220: cond["diabetes"] & (rng.random(m) < 0.25),
        1473: cond["statin"] & (rng.random(m) < 0.4),
        1075: cond["other_serious"] & (rng.random(m) < 0.12),
        1081: cond["other_serious"] & (rng.random(m) < 0.05),
        1111: rng.random(m) < 0.11,
    }
    return _codes_to_arrays(draws, m, 34)


def _cancer_codes(rng, male, cond, m) -> np.ndarray:
    site = rng.random(m)
    has = cond["cancer"]
    draws = {
        1002: has & ~male & (site < 0.45),
        1044: has & male & (site < 0.35),
        1001: has & (site >= 0.45) & (site < 0.55),
        1022: has & (site >= 0.55) & (site < 0.7),
        1060: has & (site >= 0.7),
    }
    return _codes_to_arrays(draws, m, 6)


def _medication_codes(rng, cond, m) -> np.ndarray:
    statin_kind = rng.random(m) < 0.7
    draws = {
        1140861958: cond["statin"] & statin_kind,
        1141146234: cond["statin"] & ~statin_kind,
        1140884600: cond["diabetes"] & ~cond["insulin"] & (rng.random(m) < 0.6),
        1140883066: cond["insulin"],
        1140866738: cond["bp_med"] & (rng.random(m) < 0.5),
        1140860806: cond["bp_med"] & (rng.random(m) < 0.5),
        1140868226: rng.random(m) < 0.15,
        1140852976: rng.random(m) < 0.2,
    }
    return _codes_to_arrays(draws, m, 48)


def _codes_to_arrays(draws: dict[int, np.ndarray], m: int, width: int) -> np.ndarray:
    """Left-align each participant's codes into ``width`` array slots (NaN = empty)."""
    codes = np.array(list(draws), dtype=float)
    mask = np.stack(list(draws.values()), axis=1)
    # stable sort puts the present codes first, in catalog order
    order = np.argsort(~mask, axis=1, kind="stable")
    ordered = np.where(np.take_along_axis(mask, order, axis=1), codes[order], np.nan)
    out = np.full((m, width), np.nan)
    k = min(width, ordered.shape[1])
    out[:, :k] = ordered[:, :k]
    return out
