"""The UK Biobank fields this pipeline uses: one catalog for ingest, generator and reports.

Each :class:`Field` says what a UKB Showcase field is (id, title, unit, value
type, coding, special negative codes) and how it appears in an export (the
instances and array indices that exist). Names are the snake_case column names
used everywhere downstream (``baseline.parquet``, reports, embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: "text": values kept as text (ICD-10 codes of the linked records, coding 19)
ValueType = Literal["continuous", "integer", "categorical", "categorical_multiple", "date", "text"]
Role = Literal["predictor", "sex", "date", "condition", "medication", "context", "outcome"]
Group = Literal[
    "demographics", "blood_count", "biochemistry", "lifestyle", "health", "assessment",
    "linked",
]

#: Codes UK Biobank stores as ordinary values but that mean "no answer" (never a number).
SPECIAL_CODES: dict[int, str] = {
    -1: "Do not know",
    -3: "Prefer not to answer",
    -7: "None of the above",
    -10: "Less than a year",  # time fields: "less than one"
    -11: "Do not know (time)",
    -13: "Prefer not to answer (time)",
    -818: "Prefer not to answer (alcohol)",
}

YES_NO: dict[int, str] = {1: "Yes", 0: "No"}
SEX_CODING: dict[int, str] = {0: "Female", 1: "Male"}
#: Coding 100625 (6177, men) and 100626 (6153, women).
MEDICATION_CODING: dict[int, str] = {
    1: "Cholesterol lowering medication",
    2: "Blood pressure medication",
    3: "Insulin",
    4: "Hormone replacement therapy",
    5: "Oral contraceptive pill or minipill",
}


@dataclass(frozen=True)
class Field:
    id: int
    name: str
    title: str
    unit: str
    value_type: ValueType
    role: Role
    group: Group
    instances: tuple[int, ...] = (0,)
    arrays: int = 1
    coding: dict[int, str] | None = None
    #: negative codes that may occur in this field and mean "no usable answer"
    special_codes: tuple[int, ...] = ()
    #: only asked of one sex (6177 men, 6153 women)
    sex: Literal["female", "male"] | None = None
    #: for reports: decimals a value is stored with in the Showcase
    decimals: int = 2
    extra: dict[str, str] = field(default_factory=dict)
    #: plausible range of a numeric value, bounds included (None: unbounded on that side).
    #: ``sphr ingest`` sets a value outside it, or a non-finite one, missing and counts it
    #: per field in ingest_report.json (docs/INGEST.md)
    min_value: float | None = None
    max_value: float | None = None

    @property
    def plausible_rule(self) -> str:
        """The plausibility rule in words, as the ingest report and log state it."""
        unit = f" {self.unit}" if self.unit else ""
        if self.min_value is not None and self.max_value is not None:
            return f"finite, {self.min_value:g}-{self.max_value:g}{unit}"
        if self.min_value is not None:
            return f"finite, >= {self.min_value:g}{unit}"
        if self.max_value is not None:
            return f"finite, <= {self.max_value:g}{unit}"
        return "finite"

    @property
    def label_to_code(self) -> dict[str, int]:
        """Text label (RAP 'labels' coding) to numeric code, special codes included."""
        out = {label.lower(): code for code, label in (self.coding or {}).items()}
        for code in self.special_codes:
            out[SPECIAL_CODES[code].lower()] = code
        return out


#: Upper bounds no value in that unit can pass, whoever the person: a share of cells, a
#: fraction, hours in a day. Other units (concentrations, counts, volumes, minutes) have no
#: such hard ceiling, and a lab's ceiling is not ours to guess.
_UNIT_MAX: dict[str, float] = {"%": 100.0, "ratio": 1.0, "hours/day": 24.0}


def _p(fid: int, name: str, title: str, unit: str, group: Group, decimals: int = 2,
       instances: tuple[int, ...] = (0, 1), value_type: ValueType = "continuous",
       special: tuple[int, ...] = (), min_value: float | None = 0.0,
       max_value: float | None = None) -> Field:
    # Every predictor below is a concentration, count, percentage, volume, mass, BMI, duration
    # or amount of activity: none can be negative, so 0 is the default floor (age overrides it)
    return Field(fid, name, title, unit, value_type, "predictor", group, instances,
                 special_codes=special, decimals=decimals, min_value=min_value,
                 max_value=max_value if max_value is not None else _UNIT_MAX.get(unit))


_BLOOD_COUNT = (0, 1, 2)
_BIOCHEM = (0, 1)
_ALL = (0, 1, 2, 3)

PREDICTORS: tuple[Field, ...] = (
    # demographics
    # adults only: UKB recruited at 40-69; 18-110 also admits other adult cohorts, and an age
    # outside it is a typo or a unit slip (months, a birth year), never a person
    _p(21003, "age", "Age when attended assessment centre", "years", "demographics", 0,
       _ALL, "integer", min_value=18.0, max_value=110.0),
    _p(21001, "bmi", "Body mass index (BMI)", "kg/m2", "demographics", 4, _ALL),
    # blood counts
    _p(30000, "wbc", "White blood cell (leukocyte) count",
       "10^9 cells/L", "blood_count", 2, _BLOOD_COUNT),
    _p(30010, "rbc", "Red blood cell (erythrocyte) count",
       "10^12 cells/L", "blood_count", 3, _BLOOD_COUNT),
    _p(30020, "haemoglobin", "Haemoglobin concentration", "g/dL", "blood_count", 2, _BLOOD_COUNT),
    _p(30030, "haematocrit", "Haematocrit percentage", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30040, "mcv", "Mean corpuscular volume", "fL", "blood_count", 2, _BLOOD_COUNT),
    _p(30050, "mch", "Mean corpuscular haemoglobin", "pg", "blood_count", 2, _BLOOD_COUNT),
    _p(30060, "mchc", "Mean corpuscular haemoglobin concentration",
       "g/dL", "blood_count", 2, _BLOOD_COUNT),
    _p(30070, "rdw", "Red blood cell (erythrocyte) distribution width",
       "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30080, "platelets", "Platelet count", "10^9 cells/L", "blood_count", 1, _BLOOD_COUNT),
    _p(30090, "plateletcrit", "Platelet crit", "%", "blood_count", 3, _BLOOD_COUNT),
    _p(30100, "mpv", "Mean platelet (thrombocyte) volume", "fL", "blood_count", 2, _BLOOD_COUNT),
    _p(30110, "pdw", "Platelet distribution width", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30120, "lymphocytes", "Lymphocyte count", "10^9 cells/L", "blood_count", 2, _BLOOD_COUNT),
    _p(30130, "monocytes", "Monocyte count", "10^9 cells/L", "blood_count", 2, _BLOOD_COUNT),
    _p(30140, "neutrophils", "Neutrophill count", "10^9 cells/L", "blood_count", 2, _BLOOD_COUNT),
    _p(30150, "eosinophils", "Eosinophill count", "10^9 cells/L", "blood_count", 2, _BLOOD_COUNT),
    _p(30160, "basophils", "Basophill count", "10^9 cells/L", "blood_count", 2, _BLOOD_COUNT),
    _p(30180, "lymphocyte_pct", "Lymphocyte percentage", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30190, "monocyte_pct", "Monocyte percentage", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30200, "neutrophil_pct", "Neutrophill percentage", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30210, "eosinophil_pct", "Eosinophill percentage", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30220, "basophil_pct", "Basophill percentage", "%", "blood_count", 2, _BLOOD_COUNT),
    _p(30240, "reticulocyte_pct", "Reticulocyte percentage", "%", "blood_count", 3, _BLOOD_COUNT),
    _p(30250, "reticulocytes", "Reticulocyte count",
       "10^12 cells/L", "blood_count", 4, _BLOOD_COUNT),
    _p(30260, "mean_reticulocyte_volume", "Mean reticulocyte volume",
       "fL", "blood_count", 2, _BLOOD_COUNT),
    _p(30270, "mean_sphered_cell_volume", "Mean sphered cell volume",
       "fL", "blood_count", 2, _BLOOD_COUNT),
    _p(30280, "immature_reticulocyte_fraction", "Immature reticulocyte fraction",
       "ratio", "blood_count", 3, _BLOOD_COUNT),
    _p(30290, "hls_reticulocyte_pct", "High light scatter reticulocyte percentage",
       "%", "blood_count", 3, _BLOOD_COUNT),
    _p(30300, "hls_reticulocytes", "High light scatter reticulocyte count",
       "10^12 cells/L", "blood_count", 4, _BLOOD_COUNT),
    # blood biochemistry
    _p(30600, "albumin", "Albumin", "g/L", "biochemistry", 2, _BIOCHEM),
    _p(30610, "alp", "Alkaline phosphatase", "U/L", "biochemistry", 1, _BIOCHEM),
    _p(30620, "alt", "Alanine aminotransferase", "U/L", "biochemistry", 2, _BIOCHEM),
    _p(30630, "apoa", "Apolipoprotein A", "g/L", "biochemistry", 3, _BIOCHEM),
    _p(30640, "apob", "Apolipoprotein B", "g/L", "biochemistry", 3, _BIOCHEM),
    _p(30650, "ast", "Aspartate aminotransferase", "U/L", "biochemistry", 1, _BIOCHEM),
    _p(30670, "urea", "Urea", "mmol/L", "biochemistry", 2, _BIOCHEM),
    _p(30680, "calcium", "Calcium", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30690, "cholesterol", "Cholesterol", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30700, "creatinine", "Creatinine", "umol/L", "biochemistry", 1, _BIOCHEM),
    _p(30710, "crp", "C-reactive protein", "mg/L", "biochemistry", 2, _BIOCHEM),
    _p(30720, "cystatin_c", "Cystatin C", "mg/L", "biochemistry", 3, _BIOCHEM),
    _p(30730, "ggt", "Gamma glutamyltransferase", "U/L", "biochemistry", 1, _BIOCHEM),
    _p(30740, "glucose", "Glucose", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30750, "hba1c", "Glycated haemoglobin (HbA1c)", "mmol/mol", "biochemistry", 1, _BIOCHEM),
    _p(30760, "hdl", "HDL cholesterol", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30770, "igf1", "IGF-1", "nmol/L", "biochemistry", 2, _BIOCHEM),
    _p(30780, "ldl", "LDL direct", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30810, "phosphate", "Phosphate", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30830, "shbg", "SHBG", "nmol/L", "biochemistry", 2, _BIOCHEM),
    _p(30840, "bilirubin", "Total bilirubin", "umol/L", "biochemistry", 2, _BIOCHEM),
    _p(30850, "testosterone", "Testosterone", "nmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30860, "total_protein", "Total protein", "g/L", "biochemistry", 2, _BIOCHEM),
    _p(30870, "triglycerides", "Triglycerides", "mmol/L", "biochemistry", 3, _BIOCHEM),
    _p(30880, "urate", "Urate", "umol/L", "biochemistry", 1, _BIOCHEM),
    _p(30890, "vitamin_d", "Vitamin D", "nmol/L", "biochemistry", 1, _BIOCHEM),
    # lifestyle
    _p(1160, "sleep_duration", "Sleep duration", "hours/day", "lifestyle", 0, _ALL, "integer",
       special=(-1, -3)),
    _p(22033, "activity_days", "Summed days activity", "days", "lifestyle", 0, _ALL, "integer"),
    _p(22034, "activity_minutes", "Summed minutes activity",
       "minutes", "lifestyle", 0, _ALL, "integer"),
    _p(22037, "met_walking", "MET minutes per week for walking",
       "MET-min/week", "lifestyle", 1, _ALL),
    _p(22038, "met_moderate", "MET minutes per week for moderate activity",
       "MET-min/week", "lifestyle", 1, _ALL),
    _p(22039, "met_vigorous", "MET minutes per week for vigorous activity",
       "MET-min/week", "lifestyle", 1, _ALL),
    _p(22040, "met_total", "Summed MET minutes per week for all activity",
       "MET-min/week", "lifestyle", 1, _ALL),
)

SEX = Field(31, "sex", "Sex", "", "categorical", "sex", "demographics", (0,), coding=SEX_CODING,
            decimals=0)
ASSESSMENT_DATE = Field(53, "assessment_date", "Date of attending assessment centre", "date",
                        "date", "date", "assessment", _ALL, decimals=0)
DIABETES = Field(2443, "diabetes", "Diabetes diagnosed by doctor", "", "categorical", "condition",
                 "health", _ALL, coding=YES_NO, special_codes=(-1, -3), decimals=0)
CANCER = Field(2453, "cancer", "Cancer diagnosed by doctor", "", "categorical", "condition",
               "health", _ALL, coding=YES_NO, special_codes=(-1, -3), decimals=0)
OTHER_SERIOUS = Field(2473, "other_serious",
                      "Other serious medical condition/disability diagnosed by doctor", "",
                      "categorical", "condition", "health", _ALL, coding=YES_NO,
                      special_codes=(-1, -3), decimals=0)
MEDICATION_MEN = Field(6177, "medication_men",
                       "Medication for cholesterol, blood pressure or diabetes",
                       "", "categorical_multiple", "medication", "health", _ALL, arrays=3,
                       coding={k: MEDICATION_CODING[k] for k in (1, 2, 3)},
                       special_codes=(-7, -1, -3), sex="male", decimals=0)
MEDICATION_WOMEN = Field(6153, "medication_women",
                         "Medication for cholesterol, blood pressure, diabetes, "
                         "or take exogenous hormones",
                         "", "categorical_multiple", "medication", "health", _ALL, arrays=4,
                         coding=dict(MEDICATION_CODING), special_codes=(-7, -1, -3), sex="female",
                         decimals=0)
CANCER_CODE = Field(20001, "cancer_code", "Cancer code, self-reported", "", "categorical_multiple",
                    "context", "health", _ALL, arrays=6, decimals=0,
                    coding={1001: "lung cancer", 1002: "breast cancer", 1044: "prostate cancer",
                            1022: "colon cancer", 1060: "non-melanoma skin cancer"})
ILLNESS_CODE = Field(20002, "illness_code", "Non-cancer illness code, self-reported", "",
                     "categorical_multiple", "context", "health", _ALL, arrays=34, decimals=0,
                     coding={1065: "hypertension", 1220: "diabetes", 1222: "type 1 diabetes",
                             1223: "type 2 diabetes", 1075: "heart attack/myocardial infarction",
                             1081: "stroke", 1473: "high cholesterol", 1111: "asthma",
                             99999: "unclassifiable"})
MEDICATION_CODE = Field(20003, "medication_code", "Treatment/medication code", "",
                        "categorical_multiple", "context", "health", _ALL, arrays=48, decimals=0,
                        coding={1140861958: "simvastatin", 1141146234: "atorvastatin",
                                1140884600: "metformin", 1140866738: "amlodipine",
                                1140860806: "ramipril", 1140883066: "insulin product",
                                1140868226: "aspirin", 1140852976: "multivitamin"})
# goes into baseline.parquet as a number (not a code), so a negative time is as impossible
# there as a negative lab value
FASTING_TIME = Field(74, "fasting_time", "Fasting time", "hours", "integer", "context",
                     "assessment", _ALL, decimals=0, min_value=0.0)

NON_PREDICTORS: tuple[Field, ...] = (
    SEX, ASSESSMENT_DATE, DIABETES, CANCER, OTHER_SERIOUS, MEDICATION_MEN, MEDICATION_WOMEN,
    CANCER_CODE, ILLNESS_CODE, MEDICATION_CODE, FASTING_TIME,
)
CATALOG: tuple[Field, ...] = PREDICTORS + NON_PREDICTORS

# Linked health records (hospital inpatient, cancer and death registries). They are not
# per-visit answers, so they stay out of CATALOG (whose fields the generator writes per visit);
# sphr.data.outcomes turns them into outcomes. Instances and arrays are the most a real export
# has (Showcase, 2024); an export may have fewer.
HOSPITAL_DIAGNOSES = Field(41270, "hospital_icd10", "Diagnoses - ICD10", "", "text", "outcome",
                           "linked", (0,), arrays=259, decimals=0)
HOSPITAL_DATES = Field(41280, "hospital_icd10_date", "Date of first in-patient diagnosis - ICD10",
                       "date", "date", "outcome", "linked", (0,), arrays=259, decimals=0)
CANCER_TYPE = Field(40006, "cancer_icd10", "Type of cancer: ICD10", "", "text", "outcome",
                    "linked", tuple(range(22)), decimals=0)
CANCER_DATE = Field(40005, "cancer_date", "Date of cancer diagnosis", "date", "date", "outcome",
                    "linked", tuple(range(22)), decimals=0)
DEATH_DATE = Field(40000, "death_date", "Date of death", "date", "date", "outcome", "linked",
                   (0, 1), decimals=0)
DEATH_UNDERLYING = Field(40001, "death_underlying_icd10",
                         "Underlying (primary) cause of death: ICD10", "", "text", "outcome",
                         "linked", (0, 1), decimals=0)
DEATH_CONTRIBUTORY = Field(40002, "death_contributory_icd10",
                           "Contributory (secondary) causes of death: ICD10", "", "text",
                           "outcome", "linked", (0, 1), arrays=15, decimals=0)
HOSPITAL_ICD9 = Field(41271, "hospital_icd9", "Diagnoses - ICD9", "", "text", "outcome", "linked",
                      (0,), arrays=47, decimals=0)
HOSPITAL_ICD9_DATES = Field(41281, "hospital_icd9_date",
                            "Date of first in-patient diagnosis - ICD9", "date", "date", "outcome",
                            "linked", (0,), arrays=47, decimals=0)
LOST_TO_FOLLOW_UP = Field(191, "lost_to_follow_up_date", "Date lost to follow-up", "date", "date",
                          "outcome", "linked", (0,), decimals=0)
#: UK Biobank's coding 10 (the assessment centres; checked 2026-11-27, docs/OUTCOMES.md)
CENTRE_CODING: dict[int, str] = {
    11012: "Barts", 11021: "Birmingham", 11011: "Bristol", 11008: "Bury", 11003: "Cardiff",
    11024: "Cheadle (revisit)", 11020: "Croydon", 11005: "Edinburgh", 11004: "Glasgow",
    11018: "Hounslow", 11010: "Leeds", 11016: "Liverpool", 11001: "Manchester",
    11017: "Middlesborough", 11009: "Newcastle", 11013: "Nottingham", 11002: "Oxford",
    11007: "Reading", 11014: "Sheffield", 10003: "Stockport (pilot)", 11006: "Stoke",
    11022: "Swansea", 11023: "Wrexham", 11025: "Cheadle (imaging)", 11026: "Reading (imaging)",
    11027: "Newcastle (imaging)", 11028: "Bristol (imaging)",
}
#: the country of each centre; follow-up in Scotland and Wales comes from other providers
#: (docs/OUTCOMES.md, "Censoring")
CENTRE_COUNTRY: dict[int, str] = {
    code: ("scotland" if code in (11004, 11005) else "wales" if code in (11003, 11022, 11023)
           else "england") for code in CENTRE_CODING}
ASSESSMENT_CENTRE = Field(54, "assessment_centre", "UK Biobank assessment centre", "",
                          "categorical", "context", "linked", _ALL, coding=CENTRE_CODING,
                          decimals=0)


def first_occurrence_fields(code: str, date_field: int) -> tuple[Field, Field]:
    """The pair of category 1712 fields of a 3-character ICD-10 code: "Date <code> first
    reported" and "Source of report of <code>" (the next field id)."""
    low = code.lower()
    return (Field(date_field, f"first_{low}_date", f"Date {code} first reported", "date", "date",
                  "outcome", "linked", (0,), decimals=0),
            Field(date_field + 1, f"first_{low}_source", f"Source of report of {code}", "",
                  "categorical", "outcome", "linked", (0,), decimals=0))


def algorithmic_fields(title: str, date_field: int) -> tuple[Field, Field]:
    """The pair of category 42 fields of an algorithmically-defined outcome: its date and the
    source of the report (the next field id)."""
    slug = title.lower().replace(" ", "_").replace("'", "")
    return (Field(date_field, f"{slug}_date", f"Date of {title}", "date", "date", "outcome",
                  "linked", (0,), decimals=0),
            Field(date_field + 1, f"{slug}_source", f"Source of {title} report", "",
                  "categorical", "outcome", "linked", (0,), decimals=0))


#: First Occurrences (category 1712) the built-in outcomes use: 3-character ICD-10 code -> the
#: field id of "Date <code> first reported" (its "Source of report" is the next id). The ids
#: are consecutive pairs in the order of UK Biobank's 3-character codes, with gaps where a
#: chapter or code has no field (neoplasms C00-D48 have none: cancer comes from the registry),
#: so they are listed, not computed; others come from the Showcase (Data_Dictionary_Showcase
#: or the RAP's data dictionary) and the outcome override's "first_occurrence_fields".
FIRST_OCCURRENCE: dict[str, int] = {
    "E10": 130706, "E11": 130708, "E12": 130710, "E13": 130712, "E14": 130714,
    "I20": 131296, "I21": 131298, "I22": 131300, "I23": 131302, "I24": 131304, "I25": 131306,
    "I60": 131360, "I61": 131362, "I62": 131364, "I63": 131366, "I64": 131368,
}
#: Algorithmically-defined outcomes (category 42) the pipeline knows: name -> (date field,
#: title); each has a "source of report" field (the next id)
ALGORITHMIC: dict[str, tuple[int, str]] = {
    "myocardial_infarction": (42000, "myocardial infarction"),
    "stroke": (42006, "stroke"),
    "ischaemic_stroke": (42008, "ischaemic stroke"),
    "intracerebral_haemorrhage": (42010, "intracerebral haemorrhage"),
    "subarachnoid_haemorrhage": (42012, "subarachnoid haemorrhage"),
    "end_stage_renal_disease": (42026, "end stage renal disease"),
}
FIRST_OCCURRENCE_FIELDS: tuple[Field, ...] = tuple(
    f for code, fid in FIRST_OCCURRENCE.items() for f in first_occurrence_fields(code, fid))
ALGORITHMIC_FIELDS: tuple[Field, ...] = tuple(
    f for fid, title in ALGORITHMIC.values() for f in algorithmic_fields(title, fid))
LINKED: tuple[Field, ...] = (
    HOSPITAL_DIAGNOSES, HOSPITAL_DATES, HOSPITAL_ICD9, HOSPITAL_ICD9_DATES, CANCER_TYPE,
    CANCER_DATE, DEATH_DATE, DEATH_UNDERLYING, DEATH_CONTRIBUTORY, LOST_TO_FOLLOW_UP,
    ASSESSMENT_CENTRE, *FIRST_OCCURRENCE_FIELDS, *ALGORITHMIC_FIELDS,
)
BY_ID: dict[int, Field] = {f.id: f for f in CATALOG + LINKED}
BY_NAME: dict[str, Field] = {f.name: f for f in CATALOG}
PREDICTOR_NAMES: tuple[str, ...] = tuple(f.name for f in PREDICTORS)
CONDITIONS: tuple[Field, ...] = (DIABETES, CANCER, OTHER_SERIOUS)

#: The seven markers that define bona fide healthy (docs/METHODS.md#classes); bounds live in
#: sphr.cohorts.ranges.
P0_MARKERS: tuple[str, ...] = (
    "cholesterol", "hdl", "ldl", "triglycerides", "glucose", "hba1c", "crp",
)
