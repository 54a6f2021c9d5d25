"""``sphr fields``: the catalog's fields as a researcher requests them, and their RAP names.

Which columns the pipeline reads, which of them it cannot do without, and what happens
when a field is missing are not restated here, where they could drift from the code: they
are read off the ingest's own column planner (:func:`sphr.data.ingest.plan_columns` and
:func:`sphr.data.outcomes.plan_linked`), run on a layout holding every catalog column,
then on the columns it read less one column or field at a time. What each field is *for*
downstream (cohorts, risk) is written here from the catalog's role and the marker lists.

RAP names (docs/RAP.md): ``p<field>``, then ``_i<instance>`` unless the Showcase field has
a single instance, then ``_a<array>`` unless it has a single array index or the RAP keeps
the whole array in one column (:data:`RAP_ARRAY_IN_ONE_COLUMN`). ``dx extract_dataset``
wants them as ``entity.field`` (``participant.p31``); the Table Exporter takes them bare.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from sphr.data.fields import (
    ALGORITHMIC_FIELDS,
    ASSESSMENT_CENTRE,
    BY_ID,
    BY_NAME,
    FASTING_TIME,
    FIRST_OCCURRENCE_FIELDS,
    HOSPITAL_DIAGNOSES,
    HOSPITAL_ICD9,
    LINKED,
    MEDICATION_MEN,
    MEDICATION_WOMEN,
    P0_MARKERS,
    Field,
)
from sphr.data.headers import ColumnKey, eid_column, format_column, parse_column
from sphr.errors import InputError

#: The nine PhenoAge blood markers of :mod:`sphr.risk.phenoage` (which also takes age); the
#: ingest stage may not import the risk stage (docs/ARCHITECTURE.md), so a test keeps the two
#: lists equal.
PHENOAGE_MARKERS: tuple[str, ...] = (
    "albumin", "creatinine", "glucose", "crp", "lymphocyte_pct", "mcv", "rdw", "alp", "wbc",
)

#: Multi-select fields that the RAP stores as one column per instance holding the whole
#: array (``p41270`` = ``["E119","I10"]``, ``p6177_i0`` = ``[1, 2]``); every other array
#: field has one column per index there (``p41280_a0``, ``p40002_i0_a0``, ``p20002_i0_a0``).
#: Asking ``dx extract_dataset`` for ``p6177_i0_a0`` fails: the RAP has no such field.
RAP_ARRAY_IN_ONE_COLUMN: frozenset[int] = frozenset(
    {HOSPITAL_DIAGNOSES.id, HOSPITAL_ICD9.id, MEDICATION_MEN.id, MEDICATION_WOMEN.id})

_SOURCE = {41270: "hospital records", 41280: "hospital records", 41271: "hospital records (ICD-9)",
           41281: "hospital records (ICD-9)", 40006: "cancer registry",
           40005: "cancer registry", 40000: "death registry", 40001: "death registry",
           40002: "death registry", 191: "end of follow-up (date lost to follow-up)",
           **{f.id: "First Occurrences (category 1712)" for f in FIRST_OCCURRENCE_FIELDS},
           **{f.id: "algorithmically-defined outcomes (category 42)" for f in ALGORITHMIC_FIELDS}}


@dataclass(frozen=True)
class FieldUse:
    """One catalog field: what it is, which of its columns the pipeline reads, and why."""

    id: int
    name: str
    title: str
    unit: str
    value_type: str
    role: str
    group: str
    #: the instances and array size UK Biobank has (the catalog)
    instances: tuple[int, ...]
    arrays: int
    #: what the ingest reads of it (empty: not read)
    read_instances: tuple[int, ...]
    read_arrays: tuple[int, ...]
    #: RAP names of the columns read, and of those without which the ingest stops
    rap_columns: tuple[str, ...]
    required_columns: tuple[str, ...]
    stages: tuple[str, ...]
    use: str
    if_missing: str
    #: the rule a value must meet or the ingest sets it missing (docs/INGEST.md), and its
    #: bounds; None for dates, codes and text, which the ingest does not range-check
    plausible: str | None = None
    min_value: float | None = None
    max_value: float | None = None

    @property
    def required(self) -> bool:
        return bool(self.required_columns)

    def to_dict(self) -> dict:
        return {**asdict(self), "required": self.required}


def rap_name(key: ColumnKey) -> str:
    """The RAP column of ``key`` (for a whole-array field, the column holding its array)."""
    f = BY_ID[key.field]
    single_array = f.arrays == 1 or f.id in RAP_ARRAY_IN_ONE_COLUMN
    return format_column(ColumnKey(key.field, key.instance, 0 if single_array else key.array),
                         "rap", single_instance=len(f.instances) == 1, single_array=single_array)


def _every_column() -> dict[ColumnKey, str]:
    keys = [ColumnKey(f.id, i, a) for f in BY_ID.values() for i in f.instances
            for a in range(f.arrays)]
    return {k: f"{k.field}-{k.instance}.{k.array}" for k in sorted(keys)}


def _plan_columns(columns: dict[ColumnKey, str]) -> tuple[list[ColumnKey], list[str]]:
    """The ingest's column plan of an export with ``columns``: the keys read and the warnings;
    InputError when the ingest would stop."""
    # the ingest's own planner: it is the one definition of what is read
    from sphr.data.export_layout import ExportLayout
    from sphr.data.ingest import plan_columns
    from sphr.data.outcomes.plan import plan_linked

    layout = ExportLayout(Path("export"), "csv", "legacy", ",", ["eid", *columns.values()],
                          "eid", columns)
    warnings: list[str] = []
    keys = plan_columns(layout, warnings)
    keys += plan_linked(layout, warnings).keys
    return keys, warnings


#: what a missing P0 marker does (the ingest only warns; the run's pre-flight stops)
_P0_MISSING = ("required for the bona fide healthy definition: `python -m sphr_dagster run` "
               "stops before any fit (the ingest alone only warns)")


def _if_missing(f: Field, extract: dict[ColumnKey, str]) -> str:
    """What the ingest says of ``extract`` without ``f``, in its own words."""
    try:
        _, warnings = _plan_columns({k: v for k, v in extract.items() if k.field != f.id})
    except InputError as exc:
        return f"the ingest stops: {exc.message}"
    if warnings:
        return "a warning: " + "; ".join(warnings)
    return "the ingest goes on without a warning"


#: the stages in pipeline order; a predictor is a feature of every one after ingest
STAGES: tuple[str, ...] = ("ingest", "cohorts", "train", "baselines", "evaluate", "risk")


def _use(f: Field) -> tuple[tuple[str, ...], str]:
    """Which stages use ``f`` and for what (the catalog's role; P0 and PhenoAge markers)."""
    if f.role == "predictor":
        uses = ["model feature"]
        if f.name == "age":
            uses += ["age groups (cohorts)", "PhenoAge input (risk)"]
        if f.name in P0_MARKERS:
            uses.append("P0 range of the bona fide healthy (cohorts)")
        if f.name in PHENOAGE_MARKERS:
            uses.append("PhenoAge marker (risk)")
        return STAGES, "; ".join(uses)
    people = {"male": "men", "female": "women"}.get(f.sex or "", "")
    by_role = {
        "sex": (STAGES, "every stage is per sex"),
        "date": (("ingest", "risk"), "baseline date (i0: outcomes' time origin); repeat-visit "
                 "dates (i1-3: risk validation)"),
        "condition": (("ingest", "cohorts", "evaluate", "risk"), "class labels (i0); new "
                      "diagnoses at repeat visits (i1-3: risk validation)"),
        "medication": (("ingest", "cohorts", "evaluate"), f"class labels of {people} (i0: "
                       "cholesterol, blood pressure, insulin)"),
        "outcome": (("ingest", "risk"), f"linked outcomes, {_SOURCE.get(f.id, 'linked')}"
                    f"{_used_by(f)} (outcomes.parquet; risk validation)"),
    }
    if f.role in by_role:
        return by_role[f.role]
    if f.id == ASSESSMENT_CENTRE.id:
        return ("ingest", "risk"), ("country of the baseline centre (i0): each source's "
                                    "censoring date for the participant (outcomes.parquet)")
    if f.id == FASTING_TIME.id:
        return ("ingest",), "kept in baseline.parquet; no stage uses it yet"
    return (), "not read (only the synthetic generator writes it)"


def _used_by(f: Field) -> str:
    """Which built-in outcomes read a First Occurrence or category 42 field."""
    from sphr.data.fields import ALGORITHMIC, FIRST_OCCURRENCE
    from sphr.data.outcomes.definitions import OUTCOMES

    code = next((c for c, fid in FIRST_OCCURRENCE.items() if f.id in (fid, fid + 1)), None)
    name = next((n for n, (fid, _) in ALGORITHMIC.items() if f.id in (fid, fid + 1)), None)
    if code is not None:
        names = [o.name for o in OUTCOMES if "first_occurrence" in o.sources and o.matches(code)]
    elif name is not None:
        names = [o.name for o in OUTCOMES if name in o.algorithmic]
    else:
        return ""
    return f": {', '.join(names)}" if names else ": no built-in outcome"


def _compact(values: tuple[int, ...]) -> str:
    if not values:
        return ""
    if list(values) == list(range(values[0], values[-1] + 1)) and len(values) > 1:
        return f"{values[0]}-{values[-1]}"
    return ",".join(map(str, values))


def field_uses() -> list[FieldUse]:
    """Every catalog field (the linked records included), by Showcase id."""
    every = _every_column()
    read, _ = _plan_columns(every)
    # "required" and "if missing" are asked of the extract the list asks for (only the columns
    # read): in the full catalog a later instance would make a missing instance 0 an error
    extract = {k: every[k] for k in read}
    required: set[ColumnKey] = set()
    for key in (k for k in read if k.field not in {f.id for f in LINKED}):
        try:
            _plan_columns({k: v for k, v in extract.items() if k != key})
        except InputError:
            required.add(key)
    # the ingest goes on without a P0 marker, but nobody is bona fide healthy then: the main
    # command's pre-flight (sphr.settings.preflight) stops on it, so a request needs it
    p0 = {BY_NAME[m].id for m in P0_MARKERS}
    required |= {k for k in read if k.field in p0 and k.instance == 0}
    # the ingest's own rule of which fields it range-checks (see _plan_columns)
    from sphr.data.decode import plausibility

    out = []
    for f in sorted(BY_ID.values(), key=lambda f: f.id):
        keys = sorted(k for k in read if k.field == f.id)
        stages, use = _use(f)
        rule = plausibility(f)
        out.append(FieldUse(
            f.id, f.name, f.title, f.unit, f.value_type, f.role, f.group, tuple(f.instances),
            f.arrays, tuple(sorted({k.instance for k in keys})),
            tuple(sorted({k.array for k in keys})),
            tuple(dict.fromkeys(rap_name(k) for k in keys)),
            tuple(dict.fromkeys(rap_name(k) for k in keys if k in required)),
            stages if keys else (), use, (_P0_MISSING if f.name in P0_MARKERS else
                                          _if_missing(f, extract)) if keys else "not read",
            rule, f.min_value if rule else None, f.max_value if rule else None))
    return out


def rap_columns(*, entity: str = "", required_only: bool = False) -> list[str]:
    """The RAP column names to extract, ``eid`` first, one per column the pipeline reads
    (only those it cannot do without with ``required_only``)."""
    names = [eid_column("rap")]
    for use in field_uses():
        names += use.required_columns if required_only else use.rap_columns
    return [f"{entity}.{n}" if entity else n for n in dict.fromkeys(names)]


def reads_text(use: FieldUse) -> str:
    """``i0-3``, ``i0 a0-2``: the instances and array indices read, for the table."""
    if not use.read_instances:
        return "-"
    text = f"i{_compact(use.read_instances)}"
    if use.arrays > 1:
        text += f" a{_compact(use.read_arrays)}"
    return text


def _instances(names: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(sorted({parsed[1].instance for n in names
                         if (parsed := parse_column(n)) and parsed[1] is not None}))


def plausible_text(use: FieldUse) -> str:
    """``0-100``, ``>=0``, ``finite``: the plausible range, short, for the table (its unit is
    the unit column's); ``-`` for a field the ingest does not range-check."""
    if use.plausible is None:
        return "-"
    lo, hi = use.min_value, use.max_value
    if lo is not None and hi is not None:
        return f"{lo:g}-{hi:g}"
    if lo is not None:
        return f">={lo:g}"
    return f"<={hi:g}" if hi is not None else "finite"


def format_table(uses: list[FieldUse], *, title_width: int = 40) -> str:
    """A plain-text table: id, name, title, unit, plausible range, columns read, need, stages,
    use."""
    header = ("field", "name", "title", "unit", "plausible", "reads", "need", "stages", "use")
    rows = [header]
    for u in uses:
        title = u.title if len(u.title) <= title_width else u.title[:title_width - 3] + "..."
        need = "optional" if u.read_instances else "not read"
        if u.required:
            partial = set(u.required_columns) != set(u.rap_columns)
            need = f"i{_compact(_instances(u.required_columns))} required" if partial else (
                "required")
        stages = "all" if u.stages == STAGES else ",".join(u.stages) or "-"
        rows.append((str(u.id), u.name, title, u.unit, plausible_text(u), reads_text(u), need,
                     stages, u.use))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
             for r in rows]
    return "\n".join(line.rstrip() for line in lines)
