"""The main command's checks before any fit (sphr.settings.preflight): one line naming the
file, field or setting, exit code 2, nothing written, no training (issue #64). Each case is cut
from the real-people development set, so every test runs in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from sphr.settings import resolve
from sphr.settings.preflight import REQUIREMENTS, PreflightError, preflight

DEV = Path(__file__).resolve().parent.parent / "sphr" / "data" / "real" / "nhanes_ukb_dev.csv"


def _slice(tmp_path: Path, rows: int, replace: tuple[str, str] | None = None) -> Path:
    header, *body = DEV.read_text().splitlines()[: rows + 1]
    if replace:
        header = header.replace(*replace)
    out = tmp_path / "export.csv"
    out.write_text("\n".join([header, *body]) + "\n")
    return out


def _run(argv: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    import sphr.cohorts.build as build
    from sphr_dagster.__main__ import main

    def no_fit(*args, **kwargs):
        raise AssertionError("a check that fails before fitting built a cohort")

    monkeypatch.setattr(build, "build_sex_cohort", no_fit)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("case", "expected"), [
    ("missing", "no such export file"),
    # 44 with imputation (43 complete cases): the cohort step's own count
    ("small", "male: 44 evaluation training participants per split, the evaluation's kNN "
              "needs 50"),
    ("no_21003", "field 21003-0.0, row 0: required field 21003"),
    ("no_glucose", "field 30740-0.0, row 0: P0 marker 30740 (glucose) missing: bona fide "
                   "healthy cannot be defined"),
])
def test_a_bad_export_stops_with_one_line_and_leaves_nothing(case, expected, tmp_path,
                                                             monkeypatch, capsys):
    export = {"missing": lambda: tmp_path / "none.csv",
              "small": lambda: _slice(tmp_path, 400),
              "no_21003": lambda: _slice(tmp_path, 400, ("21003-0.0", "21003x0.0")),
              "no_glucose": lambda: _slice(tmp_path, 400, ("30740-0.0", "30740x0.0"))}[case]()
    run = tmp_path / "run"
    code, out, err = _run(["run", "--export", str(export), "--run-dir", str(run),
                           "--no-losses", "--no-retrieval"], monkeypatch, capsys)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert any(expected in line for line in errors), err
    assert "Traceback" not in err + out
    assert not run.exists()


def test_custom_age_groups_pass_and_reach_the_risk_stage(tmp_path, ingest_dir):
    """`[cohorts] age_groups` of one's own: the pre-flight lets them through, and the risk
    stage of a partitioned run (each sex's cohort report only, as the Dagster assets write
    it) fits its references on them, not on the default groups."""
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.risk.fit import age_groups

    config = tmp_path / "run.toml"
    config.write_text("[cohorts]\nage_groups = [[40, 50], [51, 60], [61, 73]]\n")
    preflight(resolve(config, export=str(DEV)))
    groups = ((40, 50), (51, 60), (61, 73))
    run = tmp_path / "run"
    run_cohorts(ingest_dir / "baseline.parquet", run / "cohorts",
                CohortConfig(n_triplets=200, folds=0, age_groups=groups))
    (run / "cohorts" / "cohort_report.json").unlink()
    assert age_groups(run) == groups


def test_markers_in_other_units_name_both_sexes(tmp_path):
    """Glucose in mg/dL: nobody is bona fide healthy, and the message says so per sex."""
    import csv

    rows = list(csv.reader(DEV.read_text().splitlines()[:1501]))
    j = rows[0].index("30740-0.0")
    for r in rows[1:]:
        r[j] = str(round(float(r[j]) * 18.016, 1)) if r[j] else r[j]
    export = tmp_path / "mgdl.csv"
    with export.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    with pytest.raises(PreflightError) as info:
        preflight(resolve(export=str(export)))
    lines = info.value.problems
    assert [line.split(":")[0] for line in lines] == ["female", "male"]
    assert all("bona fide healthy participants, the bona fide healthy definition needs 1"
               in line for line in lines)


def test_each_minimum_follows_its_setting(tmp_path):
    """Without kNN the 400-person slice passes the kNN need; the need is one table entry."""
    export = _slice(tmp_path, 400)
    config = tmp_path / "run.toml"
    config.write_text('[evaluate]\nclassifiers = ["lda", "xgboost"]\n')
    knn = next(r for r in REQUIREMENTS if r.what == "the evaluation's kNN")
    assert knn.minimum(resolve(export=str(export))) == 50
    assert knn.minimum(resolve(config, export=str(export))) is None
    try:
        preflight(resolve(config, export=str(export)))
    except PreflightError as err:
        assert not any("kNN" in p for p in err.problems), err.problems


def test_the_development_set_passes(tmp_path):
    preflight(resolve(export=str(DEV)))


def test_a_truncated_last_row_is_read_as_the_ingest_will_read_it(tmp_path):
    """An export cut off mid-row stops the pre-flight naming the row, unless `[ingest]
    drop_truncated_last_row` says to drop it, as the ingest stage then does."""
    lines = DEV.read_text().splitlines()
    cut = lines[-1][: len(lines[-1]) // 3]  # the last row ends in the middle of its fields
    export = tmp_path / "export.csv"
    export.write_text("\n".join([*lines[:-1], cut]))
    with pytest.raises(PreflightError) as err:
        preflight(resolve(export=str(export)))
    assert any("row" in p and "truncated" in p.lower() for p in err.value.problems), \
        err.value.problems
    config = tmp_path / "run.toml"
    config.write_text("[ingest]\ndrop_truncated_last_row = true\n")
    preflight(resolve(config, export=str(export)))
