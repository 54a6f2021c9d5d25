"""``sphr risk``: fit the risk models of a run directory, group everyone, validate, report.

Reads ``RUN/cohorts/<sex>/`` (features, normalized train/test), the deep
representations (``RUN/baselines/<sex>/deep_patient``, ``RUN/train/<sex>/nplb``;
a method whose model is missing is skipped with a log line and listed in the
report), and ``RUN/ingest/followup.parquet`` for validation. Writes the files
listed in :mod:`sphr.risk` into one staged output folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr import __version__
from sphr.cohorts.age import group_names
from sphr.errors import InputError
from sphr.io import read_json, staged_outputs, write_json, write_parquet, write_text
from sphr.labels import SEX_CODE
from sphr.layout import cohort_dir, ingest_dir, risk_dir, train_dir
from sphr.risk.absolute import shipped
from sphr.risk.calibration import AgeStandardizer
from sphr.risk.config import RiskConfig
from sphr.risk.fit import fit_run
from sphr.risk.intervals import NORMAL
from sphr.risk.model import RiskModel, check_written_by
from sphr.risk.supervised import evaluated_on
from sphr.risk.validation.groups import (
    higher_vs_normal,
    holm,
    time_correlation,
    validation_table,
    wide_table,
    wilson,
)

log = logging.getLogger(__name__)

#: the layout of a risk stage folder (RUN/risk and each RUN/risk/<sex>), written into its
#: risk_report.json as ``layout`` with the sphr that wrote it: raised with every change of
#: what the folder holds, so a folder of another layout is refused when it is read back
#: (1: the first stamped; the linked yardstick tables beyond_age and group_ordering written)
RISK_LAYOUT = 1
#: the stamp every risk_report.json of the stage starts with
STAMP = {"layout": RISK_LAYOUT, "sphr_version": __version__}


def read_sex_folders(sex_dirs: list[Path], out: Path) -> dict[str, dict[str, Any]]:
    """Sex -> the risk_report.json of its per-sex folder, once every folder holds its results
    and is of this sphr's layout (else one :class:`InputError` naming the folder and the
    layout that wrote it: :func:`check_written_by`), before anything else of them is read:
    nothing is recomputed for an older folder."""
    missing = [d for d in sex_dirs if not (Path(d) / "risk_groups.parquet").exists()]
    if missing or not sex_dirs:
        raise InputError("no per-sex risk results to merge (run the per-sex risk step)",
                         file=missing[0] if missing else out)
    reports = {}
    for directory in map(Path, sex_dirs):
        path = directory / "risk_report.json"
        reports[directory.name] = read_json(path)
        check_written_by(reports[directory.name], "layout", RISK_LAYOUT, path,
                         "re-run the risk stage (sphr risk RUN_DIR)")
    return reports


def thresholds_table(spec: dict[str, Any]) -> pd.DataFrame:
    """One row per sex, method, mode and age group: the bounds and where they came from."""
    records = []
    for sex, s in spec["sexes"].items():
        for method, m in s["methods"].items():
            for mode, model in m["modes"].items():
                std, bounds = model.get("standardizer") or {}, model.get("bounds") or {}
                names = group_names(tuple(tuple(g) for g in model["age_groups"]))
                strata = model.get("strata") or {g: None for g in names}
                fitted = AgeStandardizer.from_dict(std, names) if std else None
                for group, st in strata.items():
                    row: dict[str, Any] = {"sex": sex, "method": method, "mode": mode,
                                           "age_group": group}
                    if st is not None:
                        row.update(n_bfh=st["n_bfh"], n_reference=st["n_reference"],
                                   pooled_groups=" ".join(st["pooled_groups"]))
                    if fitted is not None:
                        # a standardization linear in age: at the group's midpoint age
                        c, sc = (float(v[0]) for v in fitted.location_scale(np.array([group])))
                        row.update(score_center=c, score_scale=sc, standardized_on=" ".join(
                            fitted.pooled_.get(group, ["every age (line)"])))
                    if mode == "calibrated" and model.get("centiles"):
                        row.update(centile_row(model["centiles"], group))
                    elif mode == "calibrated":
                        row.update(normal_low=np.nan,
                                   normal_high=c + sc * bounds["normal"]["value"],
                                   lower_low=np.nan, lower_high=c + sc * bounds["lower"]["value"],
                                   n_calibration_bfh=bounds["normal"]["n"],
                                   z_normal=bounds["normal"]["value"],
                                   z_lower=bounds["lower"]["value"],
                                   bound_method=f"{bounds['normal']['method']} / "
                                                f"{bounds['lower']['method']}")
                    else:
                        iv = st["intervals"]
                        row.update({k: iv[k] for k in ("normal_low", "normal_high", "lower_low",
                                                       "lower_high")},
                                   repairs=" ".join(iv["repairs"]),
                                   **{f"d_P{q}": st["percentile_distances"][q]
                                      for q in ("2.5", "97.5", "1.0", "99.0")})
                    records.append(row)
    return pd.DataFrame.from_records(records)


def centile_row(centiles: dict[str, Any], group: str) -> dict[str, Any]:
    """A thresholds row of a method read against healthy-reference centiles: its 95% and
    99% bounds at the age group's midpoint age (they move with age inside the group; each
    person's own are in risk_groups) and how many healthy people they rest on."""
    from sphr.risk.calibration import LOWER_LEVEL, NORMAL_LEVEL, _midpoint
    from sphr.risk.centiles import HealthyCentiles

    model = HealthyCentiles.from_dict(centiles)
    age = np.array([_midpoint(group)])
    return {"normal_high": float(model.bound(age, NORMAL_LEVEL)[0]),
            "lower_high": float(model.bound(age, LOWER_LEVEL)[0]),
            "n_calibration_bfh": int(model.n_), "z_normal": np.nan, "z_lower": np.nan,
            "bound_method": f"healthy-reference centiles ({model.tail}, {model.form_used_})"}


def validation_population(rows: pd.DataFrame) -> pd.DataFrame:
    """Apparently healthy participants (classes 1 and 2) of the test partition: nobody a fit
    (representation, covariance, reference, threshold) has seen."""
    return rows.loc[rows["label"].isin((1, 2)) & (rows["partition"] == "test")]


def normal_share_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Share of the bona fide healthy in Normal, per sex, method, mode and role, with Wilson
    95% intervals: on held-out (``test``) BFH a calibrated 95% bound should give ~95%."""
    bfh = rows.loc[(rows["label"] == 2) & rows["partition"].isin(("calibration", "test"))]
    records = []
    for (sex, method, mode, part), g in bfh.groupby(["sex", "method", "mode", "partition"]):
        k, n = int((g["group"] == NORMAL).sum()), len(g)
        lo, hi = wilson(k, n)
        records.append({"sex": sex, "method": method, "mode": mode, "partition": part, "n": n,
                        "normal": k, "normal_share": k / n, "low": float(lo), "high": float(hi),
                        "higher_risk_share": float((g["group"] == "Higher Risk").mean())})
    return pd.DataFrame.from_records(records)


def risk_for_sex(run: str | Path, sex: str, out: str | Path, config: RiskConfig | None = None
                 ) -> dict[str, Any]:
    """Fit and group one sex and validate its held-out people; writes ``out`` (by convention
    ``RUN/risk/<sex>``): risk_groups, thresholds, heldout_bfh, validation, time_correlation,
    discrimination (parquet), model/ and risk_report.json. No report: :func:`merge_risk` writes
    the one people read."""
    run, out = Path(run), Path(out)
    config = config or RiskConfig()
    config.check()
    if not (cohort_dir(run, sex) / "train.parquet").exists():
        raise InputError(f"no {sex} cohort (run `sphr cohorts`)", file=cohort_dir(run, sex))
    followup_path = ingest_dir(run) / "followup.parquet"
    fitted, rows, absolute_rows, design = fit_and_read(run, sex, config)
    fitted.sphr_ = sphr_of(run, [sex], rows)
    with staged_outputs(out) as stage:
        spec = read_json(fitted.save(stage / "model"))
        skipped, unscored = {**fitted.skipped_, **design.pop("skipped")}, fitted.unscored_
        rows["sex"] = rows["sex"].astype(str)
        write_parquet(rows, stage / "risk_groups.parquet")
        write_parquet(absolute_rows, stage / "absolute_risk_candidates.parquet")
        write_parquet(shipped(absolute_rows, config.absolute_method,
                              config.absolute_recalibrate), stage / "absolute_risk.parquet")
        write_parquet(thresholds_table(spec), stage / "thresholds.parquet")
        write_parquet(normal_share_table(rows), stage / "heldout_bfh.parquet")
        if followup_path.exists():
            followup = pd.read_parquet(followup_path)
            followup = followup.loc[followup["sex"] == SEX_CODE[sex]]
            pop = validation_population(rows)
            write_parquet(validation_table(pop, followup), stage / "validation.parquet")
            write_parquet(time_correlation(pop, followup), stage / "time_correlation.parquet")
            write_parquet(discrimination_table(pop, followup, config),
                          stage / "discrimination.parquet")
        else:
            log.warning("no %s: validation skipped", followup_path)
        for name, table in linked_tables(run, rows, config).items():
            write_parquet(table, stage / f"linked_{name}.parquet")
        summary = {**STAMP, "run": str(run), "out": str(out), "sexes": [sex], "rows": len(rows),
                   "skipped": skipped, "unscored": unscored, "design": design,
                   "validation": followup_path.exists()}
        write_json(summary, stage / "risk_report.json")
    return summary


def fit_and_read(run: Path, sex: str, config: RiskConfig
                 ) -> tuple[RiskModel, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(the model ``sphr score`` applies, every participant's rows, their absolute-risk rows,
    the design): the single split's fit; with the cohort's cross-fit folds, every
    participant's rows out of fold (:mod:`sphr.risk.crossfit`); with ``reference =
    "centiles"``, every calibrated method read against healthy-reference centiles, which
    the saved model carries too."""
    from sphr.risk.crossfit import (
        crossfit_sex,
        crossfit_summary,
        folds_of,
        with_centiles,
    )

    fitted = fit_run(run, config, (sex,))
    rows, absolute_rows = fitted.rows_, fitted.absolute_rows_
    design: dict[str, Any] = {"validation": "single split", "folds": 0,
                              "reference": config.reference, "skipped": {}}
    centiles: dict = {}
    if folds_of(run, sex) >= 2:
        cross = crossfit_sex(run, sex, config)
        rows, absolute_rows, centiles = cross.rows, cross.absolute_rows, cross.centiles
        design.update(validation="cross-fit", **crossfit_summary(cross))
    else:  # the single split's 25-60 calibration BFH per sex are too few for a smooth
        # model in age: it keeps the age-group bounds (docs/METHODS.md, "Cross-fitting")
        design["reference"] = "groups"
    design["reference_bfh"] = {m: int(c.n_) for m, c in centiles.items()}
    return with_centiles(fitted, sex, centiles), rows, absolute_rows, design


def sphr_of(run: Path, sexes: list[str], rows: pd.DataFrame) -> dict[str, Any]:
    """The shipped SPHR score and its measured refit spread for the SPHR models the run's
    ``sexes`` were trained with (:func:`sphr.risk.refits.sphr_record`)."""
    from sphr.risk.refits import sphr_record

    reports = [read_json(p) for sex in sexes
               if (p := train_dir(run, sex) / "train_report.json").exists()]
    return sphr_record(reports, sorted(rows["method"].unique().tolist()))


#: the linked-outcome tables of :func:`sphr.risk.linked.linked_validation`
LINKED_TABLES: tuple[str, ...] = ("discrimination", "hazard_ratio", "cumulative_incidence",
                                  "beyond_age", "group_ordering")


def linked_tables(run: Path, rows: pd.DataFrame, config: RiskConfig) -> dict[str, pd.DataFrame]:
    """Validation on linked hospital, cancer and death records (``ingest/outcomes.parquet``),
    which follow every participant, not only the ~4% at a repeat visit. Population: every
    held-out (test) participant, whatever their class at baseline (records follow everyone;
    each outcome's prevalent cases are excluded from that outcome); empty when the export had
    no linked fields."""
    path = ingest_dir(run) / "outcomes.parquet"
    if not path.exists():
        return {}
    from sphr.risk.validation.beyond import scored_tables
    from sphr.risk.validation.linked import linked_validation

    outcomes = pd.read_parquet(path)
    pop = rows.loc[(rows["mode"] == "calibrated") & (rows["partition"] == "test"),
                   ["eid", "sex", "method", "score", "group", "age_years", "label"]]
    if pop.empty or outcomes.empty:
        return {}
    # age alone, the reference every single-visit score has to beat (it has no groups)
    first = pop.drop_duplicates(["sex", "eid"])
    pop = pd.concat([pop, first.assign(method="age", score=first["age_years"], group=None)],
                    ignore_index=True)
    outcomes = outcomes.loc[outcomes["eid"].isin(pop["eid"])]
    tables = linked_validation(pop, outcomes, n_bootstrap=config.n_bootstrap_linked,
                               seed=config.seed, evaluated_on=evaluated_on)
    # what each score adds to age, and whether its groups are ordered (docs/METHODS.md): the
    # same people, as sphr score and the refresh judge theirs
    tables.update(scored_tables(rows, outcomes, n_bootstrap=config.n_bootstrap_linked,
                                seed=config.seed, partition="test"))
    return {k: tables[k] for k in LINKED_TABLES if k in tables}


def merge_risk(run: str | Path, sex_dirs: list[Path], out: str | Path,
               config: RiskConfig | None = None, report: bool = True) -> dict[str, Any]:
    """The cross-sex export from the per-sex folders, nothing refitted: concatenated tables,
    p-values Holm-adjusted again over both sexes, the merged model for ``sphr score``, and
    report.html (``report=False``: every table but no report, for a benchmark's many fits)."""
    from sphr.risk.report import write_report

    run, out = Path(run), Path(out)
    config = config or RiskConfig()
    reports = read_sex_folders(sex_dirs, out)

    def concat(name: str) -> pd.DataFrame | None:
        parts = [pd.read_parquet(Path(d) / name) for d in sex_dirs if (Path(d) / name).exists()]
        parts = [p for p in parts if len(p)] or parts[:1]  # an empty table adds no dtype
        return pd.concat(parts, ignore_index=True) if parts else None

    # the per-sex models as one, nothing refitted: each sex's folder is saved as it was read
    model = RiskModel.combine([RiskModel.load(Path(d) / "model") for d in sex_dirs])
    sexes = list(model.sexes_)
    rows, thresholds, normal_share = (concat("risk_groups.parquet"), concat("thresholds.parquet"),
                                      concat("heldout_bfh.parquet"))
    model.sphr_ = sphr_of(run, sexes, rows)
    validation, correlation = concat("validation.parquet"), concat("time_correlation.parquet")
    discrimination = concat("discrimination.parquet")
    if discrimination is not None:  # one family of comparisons over both sexes
        discrimination["p_diff_holm"] = holm(discrimination["p_diff"].to_numpy(float))
    linked = {k: t for k in LINKED_TABLES if (t := concat(f"linked_{k}.parquet")) is not None}
    candidates = concat("absolute_risk_candidates.parquet")
    absolute_eval = _absolute_eval(run, candidates, config)
    with staged_outputs(out) as stage:
        spec = read_json(model.save(stage / "model"))
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_parquet(thresholds, stage / "thresholds.parquet")
        write_text(thresholds.to_csv(index=False), stage / "thresholds.csv")
        write_parquet(normal_share, stage / "heldout_bfh.parquet")
        if validation is not None:
            write_parquet(validation, stage / "validation.parquet")
            write_parquet(correlation, stage / "time_correlation.parquet")
            write_parquet(discrimination, stage / "discrimination.parquet")
            write_text(validation_markdown(validation, correlation),
                       stage / "validation.md")
        for name, table in linked.items():
            write_parquet(table, stage / f"linked_{name}.parquet")
        if candidates is not None:
            write_parquet(candidates, stage / "absolute_risk_candidates.parquet")
            write_parquet(shipped(candidates, config.absolute_method, config.absolute_recalibrate),
                          stage / "absolute_risk.parquet")
        for name, table in zip(("metrics", "deciles"), absolute_eval[1:], strict=True):
            if table is not None:
                write_parquet(table, stage / f"absolute_{name}.parquet")
        summary = {**STAMP, "run": str(run), "out": str(out), "sexes": sexes, "rows": len(rows),
                   **_design(run, reports),
                   "absolute_method": config.absolute_method,
                   "absolute_recalibrate": config.absolute_recalibrate,
                   "methods": sorted(rows["method"].unique().tolist()),
                   "modes": sorted(rows["mode"].unique().tolist()),
                   "skipped": spec["skipped"], "unscored": spec["unscored"],
                   "sphr": model.sphr_,
                   "validation": validation is not None, "linked_outcomes": bool(linked),
                   "min_group_size": spec["config"]["min_group_size"],
                   "standardization": spec["config"]["standardization"],
                   "tail_bound": spec["config"]["tail_bound"],
                   "heldout_bfh_normal_share": {
                       f"{r.sex}/{r.method}/{r.mode}": {
                           "n": int(r.n), "share": round(r.normal_share, 4),
                           "low": round(r.low, 4), "high": round(r.high, 4)}
                       for r in normal_share.itertuples() if r.partition == "test"}}
        write_json(summary, stage / "risk_report.json")
        if not report:
            return summary
        write_report(stage / "report.html", rows=rows, thresholds=thresholds,
                     validation=validation, correlation=correlation, summary=summary,
                     heldout=normal_share, discrimination=discrimination,
                     followup=ingest_dir(run) / "followup.parquet", linked=linked or None,
                     absolute=(candidates, *absolute_eval))
    return summary


def _design(run: Path, reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each sex's design (cross-fit or single split, the reference's size) and why people of
    the export are in no cohort, for the merged summary."""
    return {"design": {sex: report["design"] for sex, report in reports.items()},
            "cohort_left_out": _left_out(run)}


def _left_out(run: Path) -> dict[str, int]:
    """Why people of the export are not in a cohort (cohorts/cohort_report.json)."""
    for path in (run / "cohorts" / "cohort_report.json",
                 *sorted((run / "cohorts").glob("*/cohort_report.json"))):
        if path.exists():
            report = read_json(path)
            left = report.get("left_out") or (report.get("export") or {}).get("left_out")
            if left:
                return dict(left)
    return {}


def _absolute_eval(run: Path, candidates: pd.DataFrame | None, config: RiskConfig
                   ) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """(outcomes, metrics, deciles) of the absolute-risk candidates on the test partition
    (:mod:`sphr.risk.report.absolute`); Nones without candidates or linked outcomes."""
    path = ingest_dir(run) / "outcomes.parquet"
    if candidates is None or candidates.empty or not path.exists():
        return None, None, None
    from sphr.risk.report.absolute import absolute_tables

    outcomes = pd.read_parquet(path)
    return (outcomes, *absolute_tables(candidates, outcomes, config))


def run_risk(run: str | Path, out: str | Path | None = None, config: RiskConfig | None = None,
             report: bool = True) -> dict[str, Any]:
    """``sphr risk``: each sex into ``OUT/<sex>/`` (:func:`risk_for_sex`), then the merged
    export in ``OUT`` (:func:`merge_risk`): the same tree the Dagster assets write."""
    run = Path(run)
    out = Path(out) if out is not None else risk_dir(run)
    config = config or RiskConfig()
    config.check()
    sexes = [s for s in config.sexes if (cohort_dir(run, s) / "train.parquet").exists()]
    if not sexes:
        raise InputError("no cohorts/<sex>/train.parquet (run `sphr cohorts`)",
                         file=run / "cohorts")
    for sex in sexes:
        risk_for_sex(run, sex, out / sex, config)
    return merge_risk(run, [out / s for s in sexes], out, config, report=report)
def discrimination_table(pop: pd.DataFrame, followup: pd.DataFrame, config: RiskConfig
                         ) -> pd.DataFrame:
    """:func:`sphr.risk.discrimination.discrimination` of every method, plus age alone as a
    reference score (its group is undefined)."""
    from sphr.risk.validation.discrimination import discrimination

    # a supervised comparator of a linked outcome is judged on that outcome only
    pop = pop.loc[[evaluated_on(m, "new diagnosis") for m in pop["method"]]]
    first = pop.loc[pop["mode"] == "calibrated"].drop_duplicates(["sex", "eid"])
    age = first.assign(method="age", score=first["age_years"], group=None)
    return discrimination(pd.concat([pop, age], ignore_index=True), followup,
                          n_bootstrap=config.n_bootstrap, seed=config.seed)


def validation_markdown(validation: pd.DataFrame, correlation: pd.DataFrame) -> str:
    from sphr.risk.paper import paper_cell

    wide = wide_table(validation)
    wide["paper (N / LR / HR)"] = [
        " / ".join(paper_cell(r.sex, r.method, r.measure, g) or "-" for g in
                   ("Normal", "Lower Risk", "Higher Risk"))
        for r in wide.itertuples()]
    lines = ["# Risk-group validation (population: apparently healthy, test partition, with a "
             "repeat visit)", "",
             "Cells: share % (count/denominator) [Wilson 95% CI]. Paper: Table 4 (women), "
             "Table A7 (men); '-' = not published.", "", wide.to_markdown(index=False), "",
             "## Higher Risk vs Normal (one-sided Fisher exact test, HR rate > N rate)", "",
             higher_vs_normal(validation).to_markdown(index=False, floatfmt=".4g"), "",
             "## Time to diagnosis (Appendix C): Pearson r of health distance vs years", "",
             correlation.to_markdown(index=False, floatfmt=".4g"), ""]
    return "\n".join(lines)
