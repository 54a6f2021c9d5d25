"""A synthetic UK Biobank cohort whose health is structured, not noise (generator v4).

Every participant has seven latent health factors (metabolic, lipid, inflammation, renal,
hepatic, anaemia, fitness) that share a general frailty factor which grows with age. The
factors drive

* the 64 predictors through a Gaussian copula (:mod:`sphr.synth.copula`): each copula marker's
  normal score is its latents plus a residual, the residuals correlated so that the scores carry
  published UK Biobank correlations (cystatin C-creatinine, ALT-AST, TG-HDL, ...), then mapped
  through UKB's sex- and age-dependent marginals (LDL rising across the menopause in women), so
  skew and point masses survive; the blood-count and lipid identities are kept
  (:mod:`sphr.synth.markers`);
* doctor-diagnosed conditions and medication at baseline, and medicated participants have
  treated values with a variable response (statins lower LDL by a participant's own share, some
  treated diabetics are below HbA1c 48 mmol/mol);
* new diagnoses at later visits, drawn from hazards that depend on the baseline state.

How conditions and hazards depend on the state is the *world* (:mod:`sphr.synth.worlds`):
``linear`` (the null world, latent-linear as generator v1) or ``nonlinear`` (a positive control:
ratios, U-shapes, latent subtypes, age interactions). Both worlds share the participants, their
latents and the random stream.

Visits: the repeat assessment (instance 1) falls in UKB's 2012-13 window for a healthier,
selected ~4%; markers keep a participant-level part between visits. Missingness comes in whole
panels, some of it not at random (detection limits, frailty, activity). Every parameter and its
source is in docs/SYNTH.md (:mod:`sphr.synth.params`).

Linked health records (hospital diagnoses, cancer and death registries) follow the same state
(:mod:`sphr.synth.linked`); they come from a random stream of their own, so the visits and
truth columns above are the same with or without them.

The latent ground truth is returned separately (:class:`SyntheticCohort`.truth), with the world's
name, definition and oracle ceilings in ``truth.attrs["world"]`` (written into the
``*.truth.parquet`` metadata next to the export, never inside it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from sphr.synth import codes
from sphr.synth.config import WORLDS, SynthConfig
from sphr.synth.copula import COPULA_MARKERS, MarkerCopula
from sphr.synth.markers import apply_missingness, treat, untreated
from sphr.synth.params import (
    AGE_CENTRE,
    DIABETES_HBA1C,
    FRAILTY_LOADING,
    FRAILTY_PER_YEAR,
    LATENTS,
    LIPID_FROM_METABOLIC,
    REPEAT_END,
    REPEAT_SELECTION,
    REPEAT_SHARE,
    REPEAT_START,
    RETEST_PERSISTENCE,
    STATIN_LDL,
)
from sphr.synth.worlds import (
    DEFINITIONS,
    DIABETES_TREATMENT,
    HAZARDS,
    SUBTYPE_SIGNATURES,
    ceilings,
    draw_subtypes,
    risk_model,
    unhealthy_probability,
)

__all__ = ["LATENTS", "WORLDS", "SyntheticCohort", "generate_cohort"]

BASELINE_START = np.datetime64("2006-03-13")
BASELINE_END = np.datetime64("2010-10-01")
#: years after baseline at which the oracle ceilings of new diagnoses are taken
CEILING_HORIZON = 10.0
GENERATOR_VERSION = 4


@dataclass(frozen=True)
class SyntheticCohort:
    """Per participant and visit: the values an export holds, and the hidden truth."""

    #: one row per participant and visit (instance 0..3): eid, instance, every catalog field
    visits: pd.DataFrame
    #: one row per participant: latents, hazards, true diagnosis times (never exported);
    #: ``attrs["world"]``: the world's name, definition and oracle ceilings
    truth: pd.DataFrame
    #: one row per linked record: eid, source (hospital, cancer_registry, death,
    #: death_underlying, death_contributory), code (ICD-10 with its dot; None for a death's
    #: date), date; None for a cohort without linked records
    linked: pd.DataFrame | None = None


# --------------------------------------------------------------------------- latent state
def _draw_participants(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    male = rng.random(n) < 0.456
    # UKB baseline ages: 40-69 by design, a few 37-39 and 70-73; skewed towards older.
    age = np.clip(np.round(rng.normal(57.5, 8.0, n) - 1.5 * rng.gamma(1.2, 1.0, n) + 1.0), 37, 73)
    inside = rng.random(n) < 0.97
    age[inside] = np.clip(age[inside], 40, 70)
    span = (BASELINE_END - BASELINE_START).astype(int)
    date0 = BASELINE_START + rng.integers(0, span, n).astype("timedelta64[D]")
    frailty = rng.standard_normal(n) + FRAILTY_PER_YEAR * (age - AGE_CENTRE)
    lat = {}
    for name in LATENTS:
        g = FRAILTY_LOADING[name]
        lat[name] = g * frailty + np.sqrt(1 - g * g) * rng.standard_normal(n)
    own, from_met = LIPID_FROM_METABOLIC
    lat["lipid"] = own * lat["lipid"] + from_met * lat["metabolic"]
    subtype = draw_subtypes(rng, n)
    # how a participant responds to treatment is their own (docs/SYNTH.md, treatment)
    s = STATIN_LDL
    reduction = np.clip(rng.normal(s["mean"], s["sd"], n), 0.0, s["max"])
    reduction = np.where(rng.random(n) < s["no_response"], 0.0, reduction)
    d = DIABETES_HBA1C
    dm_excess = np.maximum(rng.normal(d["excess_mean"], d["excess_sd"], n), 0.0)
    dm_glucose_noise = d["glucose_sd"] * rng.standard_normal(n)
    return {"male": male, "age": age, "date0": date0, "frailty": frailty, **lat,
            "subtype": subtype, "statin_factor": 1.0 - reduction, "dm_excess": dm_excess,
            "dm_glucose_noise": dm_glucose_noise}


def _residuals(rng: np.random.Generator, copulas: dict[str, MarkerCopula],
               male: np.ndarray) -> np.ndarray:
    """Copula residuals of each participant's sex (both drawn: the stream does not depend on
    who is which sex beyond the draws themselves)."""
    n = male.shape[0]
    female_e, male_e = copulas["female"].residuals(rng, n), copulas["male"].residuals(rng, n)
    return np.where(male[:, None], male_e, female_e)


def _scores(copulas: dict[str, MarkerCopula], p: dict[str, np.ndarray], idx: np.ndarray,
            residuals: np.ndarray, world: str) -> np.ndarray:
    """(len(idx), copula markers) normal scores; in the non-linear world each subtype adds its
    marker signature."""
    lat = np.stack([p[k][idx] for k in LATENTS], axis=1)
    male = p["male"][idx]
    z = np.empty((idx.shape[0], len(COPULA_MARKERS)))
    for sex, sel in (("female", ~male), ("male", male)):
        z[sel] = copulas[sex].scores(lat[sel], residuals[sel])
    if world == "nonlinear":
        subtype = p["subtype"][idx]
        for k, signature in SUBTYPE_SIGNATURES.items():
            for marker, shift in signature.items():
                z[subtype == k, COPULA_MARKERS.index(marker)] += shift
    return z


def _conditions(rng: np.random.Generator, p: dict[str, np.ndarray],
                logits: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Doctor-diagnosed conditions and medication at baseline (truth, before codes)."""
    n, male, a = p["age"].shape[0], p["male"], p["age"] - AGE_CENTRE
    draw = {k: rng.random(n) < expit(logits[k]) for k in ("diabetes", "cancer", "other_serious")}
    dm = draw["diabetes"]
    statin = rng.random(n) < expit(logits["statin"] + DIABETES_TREATMENT["statin"] * dm)
    bp_med = rng.random(n) < expit(logits["bp_med"] + DIABETES_TREATMENT["bp_med"] * dm)
    insulin = dm & (rng.random(n) < 0.16)
    hrt = ~male & (rng.random(n) < expit(-2.4 + 0.08 * a))
    pill = ~male & (rng.random(n) < expit(-3.2 - 0.25 * a))
    return {**draw, "statin": statin, "bp_med": bp_med, "insulin": insulin, "hrt": hrt,
            "pill": pill}


def _month(date: np.ndarray) -> np.ndarray:
    return date.astype("datetime64[M]").astype(int) % 12 + 1


def _later_visits(rng: np.random.Generator, p: dict[str, np.ndarray],
                  c: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Years from baseline of instances 1-3 (NaN: not attended).

    Instance 1 is UKB's repeat assessment, Aug 2012 - Jun 2013, ~4% of the cohort; healthier
    participants come back more often (docs/SYNTH.md, visits). Imaging (2) and its repeat (3)
    as generator v1."""
    n = p["age"].shape[0]
    ill = c["diabetes"] | c["cancer"] | c["other_serious"] | c["statin"] | c["bp_med"]
    weight = np.exp(REPEAT_SELECTION["frailty"] * p["frailty"]
                    + REPEAT_SELECTION["condition"] * ill)
    chosen = rng.random(n) < np.clip(REPEAT_SHARE * weight / weight.mean(), 0, 1)
    start, end = np.datetime64(REPEAT_START), np.datetime64(REPEAT_END)
    date1 = start + rng.integers(0, (end - start).astype(int) + 1, n).astype("timedelta64[D]")
    days1 = (date1 - p["date0"]).astype(float)
    years = {1: np.where(chosen, days1 / 365.25, np.nan),
             2: np.where(rng.random(n) < 0.08, rng.uniform(6.0, 10.0, n), np.nan)}
    years[3] = np.where(~np.isnan(years[2]) & (rng.random(n) < 0.12),
                        years[2] + rng.uniform(2.0, 3.0, n), np.nan)
    return years


# --------------------------------------------------------------------------- the cohort
def generate_cohort(n: int = SynthConfig.participants, seed: int = SynthConfig.seed, *,
                    linked: bool = SynthConfig.linked, world: str = SynthConfig.world
                    ) -> SyntheticCohort:
    """Baseline and later visits (and linked records) for ``n`` participants in ``world``
    (``linear`` or ``nonlinear``); same seed and world, same cohort."""
    from sphr.errors import ConfigError

    if n < 1:
        raise ConfigError(f"--participants must be at least 1, got {n}")
    if world not in WORLDS:
        raise ConfigError(f"--world must be one of {', '.join(WORLDS)}, got {world!r}")
    rng = np.random.default_rng(seed)
    p = _draw_participants(rng, n)
    copulas = {sex: MarkerCopula.build(sex) for sex in ("female", "male")}
    # the participant's own marker residuals; later visits keep part of them
    p["residual"] = _residuals(rng, copulas, p["male"])
    fasting = np.clip(np.round(rng.lognormal(np.log(3.0), 0.55, n)), 0, 24)
    eid = np.sort(rng.choice(np.arange(1_000_000, 6_000_000), size=n, replace=False))

    everyone = np.arange(n)
    z0 = _scores(copulas, p, everyone, p["residual"], world)
    v0 = untreated(rng, z0, p["male"], p["age"], _month(p["date0"]), p["frailty"])
    from sphr.synth.linked import latent_log_hazards

    logits, hazard, linked_log_hazards = risk_model(
        world, p, v0, {m: z0[:, j] for j, m in enumerate(COPULA_MARKERS)}, latent_log_hazards(p))
    c = _conditions(rng, p, logits)
    c["fasting_time"] = fasting
    onset = {k: np.where(c[k], 0.0, rng.exponential(1.0 / h)) for k, h in hazard.items()}
    years = _later_visits(rng, p, c)

    activity = COPULA_MARKERS.index("met_moderate")  # the activity the MET panel reports
    frames = [_visit(rng, p, c, onset, everyone, np.zeros(n), 0, eid, v0, z0[:, activity])]
    for instance in (1, 2, 3):
        idx = np.flatnonzero(~np.isnan(years[instance]))
        keep = np.sqrt(RETEST_PERSISTENCE)
        residual = keep * p["residual"][idx] + np.sqrt(1 - keep ** 2) * _residuals(
            rng, copulas, p["male"][idx])
        age = np.floor(p["age"][idx] + years[instance][idx])
        z = _scores(copulas, p, idx, residual, world)
        date = p["date0"][idx] + np.round(years[instance][idx] * 365.25).astype("timedelta64[D]")
        v = untreated(rng, z, p["male"][idx], age, _month(date),
                      p["frailty"][idx] + 0.04 * years[instance][idx])
        frames.append(_visit(rng, p, c, onset, idx, years[instance][idx], instance, eid, v,
                             z[:, activity]))
    visits = pd.concat(frames, ignore_index=True)

    truth = pd.DataFrame({"eid": eid, "sex": p["male"].astype(np.int8), "age": p["age"],
                          "frailty": p["frailty"], **{k: p[k] for k in LATENTS},
                          "subtype": (p["subtype"] if world == "nonlinear" else 0 * p["subtype"]
                                      ).astype(np.int8)})
    for k in hazard:
        truth[f"hazard_{k}"] = hazard[k]
        truth[f"onset_years_{k}"] = onset[k]  # 0 = diagnosed before baseline
    for k in ("statin", "bp_med", "insulin", "hrt", "pill"):
        truth[f"baseline_{k}"] = c[k]
    truth["p_unhealthy"] = unhealthy_probability(logits)
    for k in ("diabetes", "cancer", "other_serious"):
        truth[f"p_baseline_{k}"] = expit(logits[k])
    records, true_times = None, {}
    if linked:
        from sphr.synth.linked import linked_records

        # after everything above, from its own stream: the existing columns do not move
        records, true_times = linked_records(seed, p, onset, hazard, c["insulin"], eid, frames[0],
                                             log_hazards=linked_log_hazards)
        for k, v in true_times.items():
            truth[k] = v  # years from baseline; 0 = before baseline
    truth.attrs["world"] = {
        "name": world, "definition": DEFINITIONS[world], "generator_version": GENERATOR_VERSION,
        "seed": seed, "participants": n, "horizon_years": CEILING_HORIZON,
        "oracle_auroc": _oracle(truth, c, p["male"]),
    }
    return SyntheticCohort(visits=visits, truth=truth, linked=records)


def _oracle(truth: pd.DataFrame, c: dict[str, np.ndarray], male: np.ndarray) -> dict:
    """AUROC of each label's and outcome's true risk against its realised value (docs/SYNTH.md,
    worlds): baseline labels, new self-reported diagnoses and linked outcomes within
    :data:`CEILING_HORIZON` years among those free of them at baseline."""
    h = CEILING_HORIZON
    everyone = np.ones(len(truth), bool)
    unhealthy = c["diabetes"] | c["cancer"] | c["other_serious"] | c["statin"] | c["bp_med"]
    labels = {"unhealthy": (truth["p_unhealthy"].to_numpy(), unhealthy, everyone)}
    for k in ("diabetes", "cancer", "other_serious"):
        labels[k] = (truth[f"p_baseline_{k}"].to_numpy(), c[k], everyone)
    new = {}
    for k in HAZARDS:
        t = truth[f"onset_years_{k}"].to_numpy()
        new[k] = (truth[f"hazard_{k}"].to_numpy(), t <= h, t > 0)
    out = {"labels": ceilings(labels, male), "new_diagnoses": ceilings(new, male)}
    if "true_years_death" in truth:
        col = {k: truth[k].to_numpy() for k in truth.columns}
        # death: background hazard plus the deaths the cancers and cardiovascular events cause
        # (~30% of cancers at ~1.5x the self-reported cancer hazard, ~19% of events), approximate
        death_rate = (col["hazard_death"] + 0.45 * col["hazard_cancer"]
                      + 0.19 * col["hazard_cardiovascular"])
        linked = {}
        for outcome, risk in (("type2_diabetes", col["hazard_diabetes"]),
                              ("cancer", col["hazard_cancer"]),
                              ("cardiovascular", col["hazard_cardiovascular"]),
                              ("death", death_rate)):
            t = col[f"true_years_{outcome}"]
            linked[outcome] = (risk, t <= h, t > 0 if outcome != "death" else everyone)
        out["linked"] = ceilings(linked, male)
    return out


def _visit(rng: np.random.Generator, p: dict[str, np.ndarray], c: dict[str, np.ndarray],
           onset: dict[str, np.ndarray], idx: np.ndarray, years: np.ndarray, instance: int,
           eid: np.ndarray, untreated_values: dict[str, np.ndarray],
           activity_score: np.ndarray) -> pd.DataFrame:
    """The export's values for the participants in ``idx`` at one visit."""
    m = idx.shape[0]
    male = p["male"][idx]
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
    date = p["date0"][idx] + np.round(years * 365.25).astype("timedelta64[D]")
    values = treat(untreated_values, cond, p["statin_factor"][idx], p["dm_excess"][idx],
                   p["dm_glucose_noise"][idx])
    apply_missingness(rng, values, m, activity_score, p["frailty"][idx])

    cols: dict[str, np.ndarray] = {"eid": eid[idx], "instance": np.full(m, instance, np.int8),
                                   "sex": male.astype(np.int8), "assessment_date": date}
    cols.update(values)
    u = rng.random(m)
    cols["sleep_duration"] = np.where(u < 0.008, -1.0,
                                      np.where(u < 0.011, -3.0, values["sleep_duration"]))
    cols["fasting_time"] = cond["fasting_time"]
    for k in ("diabetes", "cancer", "other_serious"):
        cols[k] = codes.answer(rng, state[k], m)
    arrays = {**codes.medication_arrays(rng, male, cond, m),
              "illness_code": codes.illness_codes(rng, cond, m),
              "cancer_code": codes.cancer_codes(rng, male, cond, m),
              "medication_code": codes.medication_codes(rng, cond, m)}
    for name, arr in arrays.items():
        for a in range(arr.shape[1]):
            cols[f"{name}#{a}"] = arr[:, a]
    return pd.DataFrame(cols)
