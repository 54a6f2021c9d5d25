"""Linked health records for the synthetic cohort: hospital diagnoses, cancer and death registries.

The records follow the same baseline latents that drive the markers and the self-reported
conditions (:mod:`sphr.synth.cohort`), so a baseline measurement predicts them:

* **type 2 diabetes**: the true diagnosis time is the cohort's own diabetes onset (the one the
  follow-up visits report); a hospital record (E11) follows it in 45% of cases (Eastwood et al.
  2016: 41% of primary-care type 2 diabetes had secondary-care evidence), a median ~1 year later;
* **cancer**: malignant cancers at the cohort's cancer onset plus a second process with half its
  hazard (cancers a touchscreen follow-up misses), registered in the cancer registry (97%) and
  usually in hospital; non-melanoma skin cancer (C44) and in situ registrations come on top;
* **cardiovascular** (coronary heart disease and stroke): a new hazard from the metabolic,
  lipid, inflammation and frailty latents, age and sex; 10% are fatal on the day;
* **death**: a background hazard from age, sex, frailty and inflammation, plus deaths from the
  cancers and cardiovascular events above, with an underlying and contributory causes.

Prevalent records (dated before baseline) agree with the baseline self-reports: previous
hospital E11 codes only for participants with diabetes at baseline, registrations of the
self-reported cancer site (C44 for non-melanoma skin cancer), hospital I21/I63 codes for a
self-reported heart attack or stroke (20002 codes 1075/1081). Every participant also gets
hospital codes outside every outcome set (hypertension, cataract, ...), some with UK Biobank's
unknown-date placeholder 1900-01-01. Records run to :data:`EXTRACT_DATE`, past the default
censoring dates, so censoring has work to do.

All randomness comes from one stream seeded by ``[seed, LINKED_STREAM]``, separate from the
generator's own: the visits and the existing truth columns are the same with or without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

#: key of the linked records' random stream (any fixed number; not the generator's own stream)
LINKED_STREAM = 41270
#: records are generated up to this date, as if the data were received then
EXTRACT_DATE = np.datetime64("2023-06-30")
HES_START = np.datetime64("1997-04-01")  # England's HES inpatient data as linked to UKB
REGISTRY_START = np.datetime64("1971-01-01")
MAX_HOSPITAL_CODES = 10
MAX_REGISTRATIONS = 6
MAX_CONTRIBUTORY = 4
_DAYS = 365.25
#: baseline hazards per year at the centre age, calibrated so that the 10-year cumulative
#: incidences land in the ranges of docs/OUTCOMES.md
CVD_BASE = 0.0022
DEATH_BASE = 0.0016
AGE_CENTRE = 56.5
#: 10-year cumulative incidence (Kaplan-Meier, participants without a prevalent record) the
#: generator aims at, from UK Biobank's published follow-up (docs/OUTCOMES.md gives sources)
TARGET_10Y: dict[str, tuple[float, float]] = {
    "type2_diabetes": (0.02, 0.05), "cancer": (0.06, 0.10), "cardiovascular": (0.04, 0.08),
    "death": (0.04, 0.07),
}

#: ICD-10 titles, as UK Biobank's coding 19 labels them ("E11.9 <title>" in a labels export)
TITLES: dict[str, str] = {
    "E11.9": "Non-insulin-dependent diabetes mellitus: Without complications",
    "E11.6": "Non-insulin-dependent diabetes mellitus: With other specified complications",
    "E11.8": "Non-insulin-dependent diabetes mellitus: With unspecified complications",
    "E10.9": "Insulin-dependent diabetes mellitus: Without complications",
    "E14.9": "Unspecified diabetes mellitus: Without complications",
    "C50.9": "Breast, unspecified", "C61": "Malignant neoplasm of prostate",
    "C18.9": "Colon, unspecified", "C20": "Malignant neoplasm of rectum",
    "C34.9": "Bronchus or lung, unspecified", "C54.1": "Endometrium",
    "C43.9": "Malignant melanoma of skin, unspecified", "C56": "Malignant neoplasm of ovary",
    "C85.9": "Non-Hodgkin's lymphoma, unspecified type", "C25.9": "Pancreas, unspecified",
    "C64": "Malignant neoplasm of kidney, except renal pelvis",
    "C67.9": "Bladder, unspecified", "C16.9": "Stomach, unspecified",
    "C15.9": "Oesophagus, unspecified", "C92.0": "Acute myeloid leukaemia",
    "C71.9": "Brain, unspecified", "C73": "Malignant neoplasm of thyroid gland",
    "C32.9": "Larynx, unspecified", "C22.0": "Liver cell carcinoma",
    "C44.3": "Skin of other and unspecified parts of face",
    "C44.5": "Skin of trunk", "C44.6": "Skin of upper limb, including shoulder",
    "D05.1": "Intraductal carcinoma in situ", "D06.9": "Cervix, unspecified",
    "I20.9": "Angina pectoris, unspecified",
    "I21.9": "Acute myocardial infarction, unspecified",
    "I21.4": "Acute subendocardial myocardial infarction",
    "I25.1": "Atherosclerotic heart disease", "I25.2": "Old myocardial infarction",
    "I60.9": "Subarachnoid haemorrhage, unspecified",
    "I61.9": "Intracerebral haemorrhage, unspecified",
    "I63.9": "Cerebral infarction, unspecified",
    "I64": "Stroke, not specified as haemorrhage or infarction",
    "I10": "Essential (primary) hypertension",
    "K57.3": "Diverticular disease of large intestine without perforation or abscess",
    "K21.9": "Gastro-oesophageal reflux disease without oesophagitis",
    "J45.9": "Asthma, unspecified", "M17.1": "Other primary gonarthrosis",
    "M16.1": "Other primary coxarthrosis", "N39.0": "Urinary tract infection, site not specified",
    "K80.2": "Calculus of gallbladder without cholecystitis", "R07.4": "Chest pain, unspecified",
    "R10.4": "Other and unspecified abdominal pain", "H25.9": "Senile cataract, unspecified",
    "E78.0": "Pure hypercholesterolaemia", "E66.9": "Obesity, unspecified",
    "I48.9": "Atrial fibrillation and atrial flutter, unspecified",
    "I50.9": "Heart failure, unspecified",
    "G45.9": "Transient cerebral ischaemic attack, unspecified",
    "Z86.7": "Personal history of diseases of the circulatory system",
    "Z92.1": "Personal history of long-term (current) use of anticoagulants",
    "K40.9": "Unilateral or unspecified inguinal hernia, without obstruction or gangrene",
    "J18.9": "Pneumonia, unspecified", "F32.9": "Depressive episode, unspecified",
    "D12.6": "Colon, unspecified", "N40": "Hyperplasia of prostate",
    "K29.7": "Gastritis, unspecified", "M54.5": "Low back pain",
    "J44.9": "Chronic obstructive pulmonary disease, unspecified",
    "G30.9": "Alzheimer's disease, unspecified", "F03": "Unspecified dementia",
    "I71.3": "Abdominal aortic aneurysm, ruptured", "K70.3": "Alcoholic cirrhosis of liver",
    "N18.5": "Chronic kidney disease, stage 5", "N18.9": "Chronic kidney disease, unspecified",
    "X59.9": "Exposure to unspecified factor: during unspecified activity",
    "G20": "Parkinson's disease", "A41.9": "Sepsis, unspecified",
    "J84.1": "Other interstitial pulmonary diseases with fibrosis",
    "I26.9": "Pulmonary embolism without mention of acute cor pulmonale",
    "R99": "Other ill-defined and unspecified causes of mortality",
}

#: malignant sites by sex: (code, share, probability of dying of it, median ~1.7 years later)
_SITES_F = (("C50.9", .33, .12), ("C18.9", .08, .35), ("C20", .03, .35), ("C34.9", .09, .75),
            ("C54.1", .06, .15), ("C43.9", .05, .08), ("C56", .04, .55), ("C85.9", .04, .3),
            ("C25.9", .03, .85), ("C64", .02, .3), ("C16.9", .02, .6), ("C67.9", .02, .25),
            ("C73", .02, .05), ("C92.0", .02, .4), ("C71.9", .015, .75), ("C15.9", .015, .7))
_SITES_M = (("C61", .30, .08), ("C18.9", .09, .35), ("C20", .04, .35), ("C34.9", .10, .75),
            ("C67.9", .05, .25), ("C43.9", .05, .08), ("C64", .04, .3), ("C85.9", .04, .3),
            ("C15.9", .03, .7), ("C25.9", .03, .85), ("C16.9", .02, .6), ("C92.0", .02, .4),
            ("C32.9", .02, .35), ("C71.9", .015, .75), ("C22.0", .015, .75))
#: self-reported cancer (20001) -> the registration it had before baseline
_SELF_REPORT_SITE = {1002: "C50.9", 1044: "C61", 1001: "C34.9", 1022: "C18.9", 1060: "C44.3"}
#: coronary and cerebrovascular events: (code, share)
_CVD_EVENTS = (("I21.9", .25), ("I21.4", .12), ("I20.9", .22), ("I25.1", .13), ("I63.9", .18),
               ("I61.9", .04), ("I60.9", .02), ("I64", .04))
#: hospital codes outside every default outcome set (common UK inpatient diagnoses)
_OTHER_HOSPITAL = (("I10", .12), ("K57.3", .05), ("K21.9", .05), ("J45.9", .04), ("M17.1", .04),
                   ("M16.1", .03), ("N39.0", .04), ("K80.2", .04), ("R07.4", .05),
                   ("R10.4", .04), ("H25.9", .05), ("E78.0", .05), ("E66.9", .03),
                   ("I48.9", .03), ("I50.9", .02), ("G45.9", .015), ("Z86.7", .03),
                   ("Z92.1", .02), ("K40.9", .03), ("J18.9", .03), ("F32.9", .03),
                   ("D12.6", .04), ("K29.7", .03), ("M54.5", .03), ("E14.9", .005))
#: underlying causes of a death not caused by a simulated cancer or cardiovascular event
_OTHER_DEATHS = (("J44.9", .12), ("J18.9", .10), ("G30.9", .06), ("F03", .06), ("I50.9", .06),
                 ("I48.9", .02), ("I71.3", .03), ("K70.3", .04), ("N18.5", .03), ("X59.9", .04),
                 ("G20", .04), ("I25.1", .10), ("I64", .03), ("E11.9", .02), ("A41.9", .05),
                 ("J84.1", .04), ("I26.9", .02), ("R99", .02))
_CONTRIBUTORY = (("I10", .25), ("J18.9", .2), ("I50.9", .15), ("N18.9", .1), ("I25.1", .12),
                 ("E78.0", .05))


#: every code the generator writes; records carry indices into it (integer work is fast)
CODES: tuple[str, ...] = ("", *TITLES)
_CODE_ID = {c: i for i, c in enumerate(CODES)}
_CODE_ARRAY = np.array([None, *TITLES], dtype=object)
SOURCES: tuple[str, ...] = ("hospital", "cancer_registry", "death", "death_underlying",
                            "death_contributory")
_LIMIT = np.array([MAX_HOSPITAL_CODES, MAX_REGISTRATIONS, 2, 1, MAX_CONTRIBUTORY])


def _ids(table: tuple) -> np.ndarray:
    return np.array([_CODE_ID[row[0]] for row in table])


def _pick(rng: np.random.Generator, table: tuple, m: int) -> np.ndarray:
    """Indices into ``table`` drawn by its shares (second element)."""
    share = np.array([row[1] for row in table], float)
    return rng.choice(len(table), size=m, p=share / share.sum())


class _Records:
    """Records as parallel arrays: participant index, source, code id, years from baseline."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, idx: np.ndarray, source: str, code: np.ndarray | str | None,
            years: np.ndarray, priority: int = 0) -> None:
        """``code``: a code, or code ids aligned with ``idx``; ``priority`` orders who keeps
        an array slot (0 outcome records, 2 other diagnoses)."""
        idx = np.asarray(idx)
        ids = (np.full(idx.shape, _CODE_ID[code or ""]) if code is None or isinstance(code, str)
               else np.asarray(code))
        self.parts.append((idx, np.full(idx.shape, SOURCES.index(source)), ids,
                           np.asarray(years, float), np.full(idx.shape, priority)))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(col) for col in zip(*self.parts, strict=True))


def _first_code(arrays: pd.DataFrame, prefix: str) -> np.ndarray:
    cols = [c for c in arrays.columns if c.startswith(prefix)]
    values = arrays[cols].to_numpy(float)
    first = np.full(values.shape[0], np.nan)
    for j in range(values.shape[1] - 1, -1, -1):  # left-most non-empty slot wins
        first = np.where(np.isnan(values[:, j]), first, values[:, j])
    return first


def latent_log_hazards(p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cardiovascular and (background) death log-hazards over their base rates, linear in the
    latents (the generator's linear world)."""
    a = p["age"] - AGE_CENTRE
    return {"cardiovascular": 0.35 * p["metabolic"] + 0.3 * p["lipid"] + 0.25 * p["inflammation"]
            + 0.3 * p["frailty"] + 0.07 * a + 0.65 * p["male"],
            "death": 0.085 * a + 0.35 * p["frailty"] + 0.4 * p["male"] + 0.15 * p["inflammation"]}


@dataclass
class _Draw:
    """What every step of :func:`linked_records` reads: one random stream, passed from step to
    step in a fixed order (cardiovascular, cancer, death, diabetes, other diagnoses), so the
    records of a seed never change; the records so far; and the participants' time windows."""

    rng: np.random.Generator
    rec: _Records
    everyone: np.ndarray
    male: np.ndarray
    frailty: np.ndarray
    a: np.ndarray  # age - AGE_CENTRE
    window: np.ndarray  # years with records after baseline
    hes_from: np.ndarray  # (negative) start of HES records
    reg_from: np.ndarray

    @property
    def n(self) -> int:
        return self.everyone.shape[0]


class _Cardiovascular(NamedTuple):
    hazard: np.ndarray
    prevalent: np.ndarray
    years: np.ndarray
    code: np.ndarray
    fatal: np.ndarray


class _Cancer(NamedTuple):
    prevalent: np.ndarray
    site: np.ndarray
    fatality: np.ndarray
    years_malignant: np.ndarray
    true_years: np.ndarray


def _cardiovascular(d: _Draw, baseline_visit: pd.DataFrame,
                    log_hazards: dict[str, np.ndarray]) -> _Cardiovascular:
    """Prevalent from the baseline self-report, incident from the latents."""
    rng, n, everyone, cid = d.rng, d.n, d.everyone, _CODE_ID
    illness = baseline_visit[[c for c in baseline_visit.columns if c.startswith("illness_code#")]]
    ill = illness.to_numpy(float)
    had_mi, had_stroke = (ill == 1075).any(axis=1), (ill == 1081).any(axis=1)
    h_cvd = CVD_BASE * np.exp(log_hazards["cardiovascular"])
    silent = ~had_mi & ~had_stroke & (rng.random(n)
                                      < np.clip(0.006 * h_cvd / h_cvd.mean(), 0, 0.05))
    prev_cvd = had_mi | had_stroke | silent
    t_cvd = np.where(prev_cvd, 0.0, rng.exponential(1.0 / h_cvd))
    before = np.maximum(-rng.uniform(0.2, 10.0, n), d.hes_from + 0.01)
    # 80% of self-reported events were admitted since HES began; the silent ones only show there
    mi_code = np.where(rng.random(n) < 0.6, cid["I21.9"], cid["I25.2"])
    for mask, codes, share in ((had_mi, mi_code, 0.8), (had_stroke, cid["I63.9"], 0.8),
                               (silent, cid["I20.9"], 1.0)):
        kept = mask & (rng.random(n) < share)
        d.rec.add(everyone[kept], "hospital", np.broadcast_to(codes, n)[kept], before[kept])
    cvd_code = _ids(_CVD_EVENTS)[_pick(rng, _CVD_EVENTS, n)]
    fatal_cvd = ~prev_cvd & (rng.random(n) < 0.10)
    incident_cvd = ~prev_cvd & ~fatal_cvd
    d.rec.add(everyone[incident_cvd], "hospital", cvd_code[incident_cvd], t_cvd[incident_cvd])
    return _Cardiovascular(h_cvd, prev_cvd, t_cvd, cvd_code, fatal_cvd)


def _cancer(d: _Draw, baseline_visit: pd.DataFrame, onset: dict[str, np.ndarray],
            hazard: dict[str, np.ndarray]) -> _Cancer:
    """Baseline registrations of the self-reported site, then new registrations."""
    rng, n, everyone, cid, male, a = d.rng, d.n, d.everyone, _CODE_ID, d.male, d.a
    site_report = _first_code(baseline_visit, "cancer_code#")
    prev_cancer = onset["cancer"] == 0
    female_sites, male_sites = _pick(rng, _SITES_F, n), _pick(rng, _SITES_M, n)
    site = np.where(male, _ids(_SITES_M)[male_sites], _ids(_SITES_F)[female_sites])
    fatality = np.where(male, np.array([f for _, _, f in _SITES_M])[male_sites],
                        np.array([f for _, _, f in _SITES_F])[female_sites])
    reported = np.zeros(n, int)
    for self_code, icd in _SELF_REPORT_SITE.items():
        reported[site_report == self_code] = cid[icd]
    prev_site = np.where(reported > 0, reported, site)
    kept = prev_cancer & (rng.random(n) < 0.92)
    d.rec.add(everyone[kept], "cancer_registry", prev_site[kept],
              np.maximum(-rng.uniform(0.3, 15.0, n), d.reg_from + 0.01)[kept])
    extra = rng.exponential(1.0 / (0.5 * hazard["cancer"]))
    t_malignant = np.minimum(np.where(prev_cancer, np.inf, onset["cancer"]), extra)
    registered = rng.random(n) < 0.97
    d.rec.add(everyone[registered], "cancer_registry", site[registered], t_malignant[registered])
    in_hospital = rng.random(n) < 0.75
    d.rec.add(everyone[in_hospital], "hospital", site[in_hospital],
              (t_malignant + rng.exponential(0.1, n))[in_hospital])
    t_nmsc = rng.exponential(1.0 / (0.004 * np.exp(0.07 * a) * np.where(male, 1.3, 1.0)))
    nmsc_code = np.array([cid["C44.3"], cid["C44.5"], cid["C44.6"]])[rng.integers(0, 3, n)]
    d.rec.add(everyone, "cancer_registry", nmsc_code, t_nmsc)
    t_insitu = rng.exponential(1.0 / np.where(male, 1e-5, 0.0008))
    d.rec.add(everyone, "cancer_registry",
              np.where(rng.random(n) < 0.7, cid["D05.1"], cid["D06.9"]), t_insitu)
    malignant_ids = _ids(_SITES_F + _SITES_M)
    true_cancer = np.where(prev_cancer & np.isin(prev_site, malignant_ids), 0.0, t_malignant)
    return _Cancer(prev_cancer, site, fatality, t_malignant, true_cancer)


def _death(d: _Draw, log_hazards: dict[str, np.ndarray], onset: dict[str, np.ndarray],
           cvd: _Cardiovascular, cancer: _Cancer) -> tuple[np.ndarray, np.ndarray]:
    """(years to death, death hazard): a background hazard plus deaths from the cancers and
    cardiovascular events above, with an underlying and contributory causes."""
    rng, n, everyone, cid = d.rng, d.n, d.everyone, _CODE_ID
    h_death = DEATH_BASE * np.exp(log_hazards["death"])
    h_death = h_death * np.where(cvd.prevalent, 1.6, 1.0) * np.where(
        cancer.prevalent, 1.3, 1.0) * np.where(onset["diabetes"] == 0, 1.5, 1.0)
    t_background = rng.exponential(1.0 / h_death)
    t_cancer_death = np.where(rng.random(n) < cancer.fatality,
                              cancer.years_malignant + rng.exponential(2.5, n), np.inf)
    t_cvd_death = np.where(cvd.fatal, cvd.years, np.where(
        ~cvd.prevalent & (rng.random(n) < 0.10), cvd.years + rng.exponential(3.0, n), np.inf))
    causes = np.stack([t_background, t_cancer_death, t_cvd_death])
    t_death = causes.min(axis=0)
    why = causes.argmin(axis=0)
    other = _ids(_OTHER_DEATHS)[_pick(rng, _OTHER_DEATHS, n)]
    underlying = np.where(why == 1, cancer.site, np.where(why == 2, np.where(
        cvd.fatal, cvd.code, cid["I25.1"]), other))
    died = t_death <= d.window
    d.rec.add(everyone[died], "death", None, t_death[died])
    twice = died & (rng.random(n) < 0.005)  # a death registered twice (instance 1), same date
    d.rec.add(everyone[twice], "death", None, t_death[twice], priority=1)
    d.rec.add(everyone[died], "death_underlying", underlying[died], t_death[died])
    diabetic_then = onset["diabetes"] <= t_death
    for code, share in (*_CONTRIBUTORY, ("E11.9", 0.0)):
        chance = np.where(diabetic_then, 0.45, 0.0) if code == "E11.9" else np.full(n, share)
        hit = died & (rng.random(n) < chance) & (underlying != cid[code])
        d.rec.add(everyone[hit], "death_contributory", code, t_death[hit])
    return t_death, h_death


def _diabetes(d: _Draw, onset: dict[str, np.ndarray], insulin: np.ndarray) -> None:
    """Hospital records of the cohort's own diabetes diagnoses."""
    rng, n, everyone, cid = d.rng, d.n, d.everyone, _CODE_ID
    prev_dm = onset["diabetes"] == 0
    dm_code = np.array([cid["E11.9"], cid["E11.6"], cid["E11.8"]])[
        rng.choice(3, n, p=[.7, .2, .1])]
    dm_code = np.where(insulin & (rng.random(n) < 0.35), cid["E10.9"], dm_code)  # as type 1
    dm_code = np.where(rng.random(n) < 0.08, cid["E14.9"], dm_code)  # coded as unspecified
    early = prev_dm & (rng.random(n) < 0.5)
    d.rec.add(everyone[early], "hospital", dm_code[early],
              np.maximum(-rng.uniform(0.1, 9.0, n), d.hes_from + 0.01)[early])
    later = prev_dm & ~early & (rng.random(n) < 0.35)
    d.rec.add(everyone[later], "hospital", dm_code[later], rng.exponential(3.0, n)[later])
    incident = ~prev_dm & (rng.random(n) < 0.45)
    d.rec.add(everyone[incident], "hospital", dm_code[incident],
              (onset["diabetes"] + rng.exponential(1.5, n))[incident])


def _other_hospital(d: _Draw) -> None:
    """Hospital codes outside every outcome set, before and after baseline."""
    rng = d.rng
    k = np.minimum(rng.poisson(1.6 * np.exp(0.35 * d.frailty + 0.03 * d.a)), 8)
    who = np.repeat(d.everyone, k)
    codes = _ids(_OTHER_HOSPITAL)[_pick(rng, _OTHER_HOSPITAL, who.shape[0])]
    when = rng.uniform(d.hes_from[who], d.window[who])
    when = np.where(rng.random(who.shape[0]) < 0.004, np.nan, when)  # date unknown (1900-01-01)
    d.rec.add(who, "hospital", codes, when, priority=2)


def linked_records(seed: int, p: dict[str, np.ndarray], onset: dict[str, np.ndarray],
                   hazard: dict[str, np.ndarray], insulin: np.ndarray, eid: np.ndarray,
                   baseline_visit: pd.DataFrame, log_hazards: dict[str, np.ndarray] | None = None,
                   ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """(records, true times): one row per record (eid, source, code, date), and the true
    event times in years from baseline (0 = before baseline) with the cardiovascular and
    background death hazards. ``log_hazards`` (cardiovascular, death) replace
    :func:`latent_log_hazards` (the generator's non-linear world)."""
    log_hazards = log_hazards or latent_log_hazards(p)
    date0 = p["date0"]
    window = (EXTRACT_DATE - date0).astype(float) / _DAYS
    d = _Draw(rng=np.random.default_rng([seed, LINKED_STREAM]), rec=_Records(),
              everyone=np.arange(eid.shape[0]), male=p["male"], frailty=p["frailty"],
              a=p["age"] - AGE_CENTRE, window=window,
              hes_from=(HES_START - date0).astype(float) / _DAYS,
              reg_from=(REGISTRY_START - date0).astype(float) / _DAYS)
    # the steps share one stream: their order is part of the frozen generator (docs/SYNTH.md)
    cvd = _cardiovascular(d, baseline_visit, log_hazards)
    cancer = _cancer(d, baseline_visit, onset, hazard)
    t_death, h_death = _death(d, log_hazards, onset, cvd, cancer)
    _diabetes(d, onset, insulin)
    _other_hospital(d)

    records = _finish(d.rec.arrays(), t_death, window, eid, date0)
    truth = {"true_years_type2_diabetes": onset["diabetes"], "true_years_cancer": cancer.true_years,
             "true_years_cardiovascular": cvd.years, "true_years_death": t_death,
             "hazard_cardiovascular": cvd.hazard, "hazard_death": h_death}
    return records, truth


def _finish(arrays: tuple[np.ndarray, ...], t_death: np.ndarray, window: np.ndarray,
            eid: np.ndarray, date0: np.ndarray) -> pd.DataFrame:
    """No record after death or after the extract; one hospital record per code (its first
    date); at most :data:`MAX_HOSPITAL_CODES` codes and :data:`MAX_REGISTRATIONS`
    registrations per participant, outcome codes first."""
    idx, source, code, years, priority = arrays
    unknown = np.isnan(years)
    keep = unknown | ((years <= t_death[idx]) & (years <= window[idx]))
    idx, source, code, years, priority = (x[keep] for x in arrays)
    unknown = np.isnan(years)
    sort_years = np.where(unknown, -np.inf, years)
    # 41280 is the date a code was *first* recorded: one hospital record per code
    order = np.lexsort((sort_years, code, source, idx))
    same = np.zeros(order.shape, bool)
    same[1:] = ((idx[order][1:] == idx[order][:-1]) & (code[order][1:] == code[order][:-1])
                & (source[order][1:] == source[order][:-1]) & (source[order][1:] == 0))
    keep = np.zeros(idx.shape, bool)
    keep[order[~same]] = True
    idx, source, code, years, priority, sort_years = (
        x[keep] for x in (idx, source, code, years, priority, sort_years))
    # who keeps an array slot: outcome records first, then the earliest
    order = np.lexsort((sort_years, priority, source, idx))
    idx, source, code, years = idx[order], source[order], code[order], years[order]
    start = np.ones(idx.shape, bool)
    start[1:] = (idx[1:] != idx[:-1]) | (source[1:] != source[:-1])
    group_start = np.maximum.accumulate(np.where(start, np.arange(idx.shape[0]), 0))
    rank = np.arange(idx.shape[0]) - group_start
    keep = rank < _LIMIT[source]
    idx, source, code, years = idx[keep], source[keep], code[keep], years[keep]
    days = np.round(np.nan_to_num(years) * _DAYS).astype("timedelta64[D]")
    date = np.where(np.isnan(years), np.datetime64("1900-01-01", "D"),
                    (date0[idx] + days).astype("datetime64[D]"))
    out = pd.DataFrame({"eid": eid[idx], "source": np.array(SOURCES, dtype=object)[source],
                        "code": _CODE_ARRAY[code], "date": date})
    order = np.lexsort((out["date"].to_numpy(), source, idx))
    return out.iloc[order].reset_index(drop=True)
