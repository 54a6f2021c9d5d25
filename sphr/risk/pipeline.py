"""``sphr risk``: fit the risk models of a run directory, group everyone, validate, report.

Reads ``RUN/cohorts/<sex>/`` (features, normalized train/test), the deep
representations (``RUN/baselines/<sex>/deep_patient``, ``RUN/train/<sex>/nplb``;
a method whose model is missing is skipped with a log line and listed in the
report), and ``RUN/ingest/followup.parquet`` for validation. Writes the files
listed in :mod:`sphr.risk` into one staged output folder.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.age import DEFAULT_AGE_GROUPS
from sphr.errors import ConfigError, InputError, SphrError
from sphr.io import read_json, staged_outputs, write_json, write_parquet, write_text
from sphr.labels import SEX_CODE, SEXES
from sphr.layout import cohort_dir, ingest_dir, risk_dir
from sphr.risk.intervals import MODES
from sphr.risk.model import RiskModel
from sphr.risk.spaces import METHODS, build_space
from sphr.risk.validation import higher_vs_normal, time_correlation, validation_table, wide_table

log = logging.getLogger(__name__)

#: the stable columns of risk_groups.parquet / .csv, in order
COLUMNS: tuple[str, ...] = ("eid", "sex", "age_group", "method", "mode", "distance", "group",
                            "normal_low", "normal_high", "lower_low", "lower_high",
                            "partition", "label")
MODEL_VERSION = 1


@dataclass
class RiskConfig:
    methods: tuple[str, ...] = METHODS
    modes: tuple[str, ...] = MODES
    #: validation population: ``test`` (default) or ``all`` real participants
    validate_on: str = "test"
    min_group_size: int = 10
    device: str = "auto"
    sexes: tuple[str, ...] = SEXES

    def check(self) -> None:
        bad = [m for m in self.methods if m not in METHODS] + [m for m in self.modes if m not in MODES]
        if bad:
            raise ConfigError(f"unknown method/mode {bad}: methods {METHODS}, modes {MODES}")
        if self.validate_on not in ("test", "all"):
            raise ConfigError("validate_on must be test or all")


def _age_groups(run: Path) -> tuple[tuple[int, int], ...]:
    report = Path(run) / "cohorts" / "cohort_report.json"
    if report.exists():
        groups = read_json(report).get("config", {}).get("age_groups")
        if groups:
            return tuple(tuple(int(v) for v in g) for g in groups)
    return DEFAULT_AGE_GROUPS


def participants(cohort) -> pd.DataFrame:
    """Every real participant of one sex: training rows (not augmented) and test rows."""
    train = cohort.train.loc[~cohort.train["augmented"].to_numpy(bool)].assign(partition="train")
    test = cohort.test.assign(partition="test")
    return pd.concat([train, test], ignore_index=True)


def fit_sex(run: Path, sex: str, config: RiskConfig, model_dir: Path | None = None
            ) -> tuple[pd.DataFrame, dict[str, Any], dict[str, str]]:
    """Fit every method and mode of one sex; (risk rows, saved model spec, skipped methods)."""
    from sphr.baselines.pipeline import load_cohort

    cohort = load_cohort(cohort_dir(run, sex))
    people = participants(cohort)
    groups = _age_groups(run)
    spec: dict[str, Any] = {"features": cohort.features, "methods": {}}
    skipped: dict[str, str] = {}
    frames = []
    for method in config.methods:
        try:
            space = build_space(method, cohort.features, run=run, sex=sex, device=config.device)
        except SphrError as exc:
            if method not in ("deep_patient", "sphr"):
                raise
            log.warning("%s: skipping method %s: %s", sex, method, exc)
            skipped[method] = str(exc)
            continue
        entry: dict[str, Any] = {"modes": {}}
        for mode in config.modes:
            model = RiskModel(method, mode, cohort.features, age_groups=groups,
                              min_group_size=config.min_group_size, space=space).fit(cohort.train)
            out = model.transform(people)
            out.insert(0, "eid", people["eid"].to_numpy(np.int64))
            frames.append(out.assign(sex=sex, method=method, mode=mode,
                                     partition=people["partition"].to_numpy(),
                                     label=people["label"].to_numpy(np.int8)))
            entry["modes"][mode] = model.to_dict()
        if model_dir is not None:
            entry["space"] = space.save(model_dir, method)
        spec["methods"][method] = entry
    rows = pd.concat(frames, ignore_index=True)[list(COLUMNS)] if frames else \
        pd.DataFrame(columns=list(COLUMNS))
    return rows, spec, skipped


def thresholds_table(spec: dict[str, Any]) -> pd.DataFrame:
    """One row per sex, method, mode and age group: the intervals and where they came from."""
    records = []
    for sex, s in spec["sexes"].items():
        for method, m in s["methods"].items():
            for mode, model in m["modes"].items():
                for group, st in model["strata"].items():
                    iv = st["intervals"]
                    records.append({
                        "sex": sex, "method": method, "mode": mode, "age_group": group,
                        "n_bfh": st["n_bfh"], "n_reference": st["n_reference"],
                        "pooled_groups": " ".join(st["pooled_groups"]),
                        **{k: iv[k] for k in ("normal_low", "normal_high", "lower_low", "lower_high")},
                        "repairs": " ".join(iv["repairs"]),
                        **{f"d_P{q}": st["percentile_distances"][q]
                           for q in ("2.5", "97.5", "1.0", "99.0")}})
    return pd.DataFrame.from_records(records)


def validation_population(rows: pd.DataFrame, validate_on: str) -> pd.DataFrame:
    """Apparently healthy participants (classes 1 and 2) of the test partition, or of all real
    rows except the training BFH: those fitted the references, so their groups are in-sample."""
    healthy = rows["label"].isin((1, 2))
    if validate_on == "test":
        healthy &= rows["partition"] == "test"
    else:
        healthy &= ~((rows["partition"] == "train") & (rows["label"] == 2))
    return rows.loc[healthy]


def run_risk(run: str | Path, out: str | Path | None = None, config: RiskConfig | None = None
             ) -> dict[str, Any]:
    """Fit, group, validate and report; returns the summary written to risk_report.json."""
    from sphr.risk.report import write_report

    run = Path(run)
    out = Path(out) if out is not None else risk_dir(run)
    config = config or RiskConfig()
    config.check()
    sexes = [s for s in config.sexes if (cohort_dir(run, s) / "train.parquet").exists()]
    if not sexes:
        raise InputError("no cohorts/<sex>/train.parquet (run `sphr cohorts`)", file=run / "cohorts")
    followup_path = ingest_dir(run) / "followup.parquet"
    with staged_outputs(out) as stage:
        spec: dict[str, Any] = {"version": MODEL_VERSION, "age_groups": _age_groups(run),
                                "config": asdict(config), "sexes": {}}
        all_rows, skipped = [], {}
        for sex in sexes:
            model_dir = stage / "model" / sex
            model_dir.mkdir(parents=True, exist_ok=True)
            rows, sex_spec, sk = fit_sex(run, sex, config, model_dir)
            for name in ("normalizer.json", "features.json"):
                shutil.copyfile(cohort_dir(run, sex) / name, model_dir / name)
            spec["sexes"][sex] = sex_spec
            all_rows.append(rows)
            skipped.update({f"{sex}/{m}": why for m, why in sk.items()})
        spec["skipped"] = skipped
        rows = pd.concat(all_rows, ignore_index=True)
        rows["sex"] = rows["sex"].astype(str)
        write_json(spec, stage / "model" / "risk_model.json")
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        thresholds = thresholds_table(spec)
        write_parquet(thresholds, stage / "thresholds.parquet")
        write_text(thresholds.to_csv(index=False), stage / "thresholds.csv")

        validation = correlation = None
        if followup_path.exists():
            followup = pd.read_parquet(followup_path)
            followup = followup.loc[followup["sex"].isin([SEX_CODE[s] for s in sexes])]
            pop = validation_population(rows, config.validate_on)
            validation = validation_table(pop, followup)
            correlation = time_correlation(pop, followup)
            write_parquet(validation, stage / "validation.parquet")
            write_parquet(correlation, stage / "time_correlation.parquet")
            write_text(validation_markdown(validation, correlation, config), stage / "validation.md")
        else:
            log.warning("no %s: validation skipped", followup_path)
        summary = {"run": str(run), "out": str(out), "sexes": sexes, "rows": len(rows),
                   "methods": sorted(rows["method"].unique().tolist()), "modes": list(config.modes),
                   "skipped": skipped, "validate_on": config.validate_on,
                   "validation": followup_path.exists(),
                   "min_group_size": config.min_group_size}
        write_json(summary, stage / "risk_report.json")
        write_report(stage / "report.html", rows=rows, thresholds=thresholds,
                     validation=validation, correlation=correlation, summary=summary)
    return summary


def validation_markdown(validation: pd.DataFrame, correlation: pd.DataFrame,
                        config: RiskConfig) -> str:
    from sphr.risk.paper import paper_cell

    wide = wide_table(validation)
    wide["paper (N / LR / HR)"] = [
        " / ".join(paper_cell(r.sex, r.method, r.measure, g) or "-" for g in
                   ("Normal", "Lower Risk", "Higher Risk"))
        for r in wide.itertuples()]
    lines = [f"# Risk-group validation (population: apparently healthy, {config.validate_on} "
             "partition, with a repeat visit)", "",
             "Cells: share % (count/denominator) [Wilson 95% CI]. Paper: Table 4 (women), "
             "Table A7 (men); '-' = not published.", "", wide.to_markdown(index=False), "",
             "## Higher Risk vs Normal (one-sided Fisher exact test, HR rate > N rate)", "",
             higher_vs_normal(validation).to_markdown(index=False, floatfmt=".4g"), "",
             "## Time to diagnosis (Appendix C): Pearson r of health distance vs years", "",
             correlation.to_markdown(index=False, floatfmt=".4g"), ""]
    return "\n".join(lines)
