"""A model folder or risk-stage folder written by another sphr layout is refused with one
message naming the layout (and sphr) that wrote it and what to do, exit 2, no traceback; the
folders this sphr writes state their layout (sphr.risk.model.persistence.check_written_by)."""

from __future__ import annotations

import pandas as pd
import pytest

from sphr.cli import main
from sphr.errors import InputError
from sphr.io import read_json, write_json
from sphr.risk.model import MODEL_VERSION
from sphr.risk.pipeline import RISK_LAYOUT, merge_risk


def _model_folder(run, spec: dict) -> None:
    """RUN/risk/model/risk_model.json as ``spec``: the version check comes before any other
    file of the folder is read, so nothing else is needed."""
    write_json({"sexes": {}, "age_groups": [[40, 70]], "config": {}, **spec},
               run / "risk" / "model" / "risk_model.json")


@pytest.mark.parametrize(("spec", "said"), [
    ({"version": 3}, "written by an older sphr (layout 3; this sphr"),
    ({"version": MODEL_VERSION + 1, "sphr_version": "9.0.0"},
     f"written by a newer sphr (sphr 9.0.0, layout {MODEL_VERSION + 1}; this sphr"),
    ({}, "written by an older sphr (no layout stated; this sphr"),
])
def test_score_refuses_a_model_folder_of_another_layout_in_one_line(tmp_path, capsys, spec,
                                                                    said):
    _model_folder(tmp_path, spec)
    code = main(["score", str(tmp_path), str(tmp_path / "export.csv"),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("sphr score: error:")]
    assert len(lines) == 1 and said in lines[0], err
    assert f"reads layout {MODEL_VERSION} only" in lines[0]
    assert "re-fit the model (sphr risk RUN_DIR) with this version, or use the sphr version " \
           "that wrote it" in lines[0]
    assert "risk_model.json" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_merge_refuses_a_per_sex_folder_without_its_layout(tmp_path):
    """A per-sex folder written before folders stated their layout (no linked yardstick
    tables then) is refused before anything of it is read, nothing recomputed."""
    sex = tmp_path / "female"
    sex.mkdir()
    pd.DataFrame({"eid": [1]}).to_parquet(sex / "risk_groups.parquet")
    write_json({"sexes": ["female"], "design": None}, sex / "risk_report.json")
    with pytest.raises(InputError, match="no layout stated") as err:
        merge_risk(tmp_path, [sex], tmp_path / "merged", report=False)
    assert err.value.file == str(sex / "risk_report.json")
    assert "re-run the risk stage (sphr risk RUN_DIR) with this version" in str(err.value)
    write_json({"sexes": ["female"], "layout": RISK_LAYOUT + 1}, sex / "risk_report.json")
    with pytest.raises(InputError, match=f"newer sphr \\(layout {RISK_LAYOUT + 1}"):
        merge_risk(tmp_path, [sex], tmp_path / "merged", report=False)


def test_a_fitted_model_folder_states_its_layout(tmp_path):
    """What RiskModel.save writes is read back past the check (the stamp is written where the
    folder is written)."""
    from sphr.risk.model import RiskModel

    model = RiskModel()
    model._init_fitted(MODEL_VERSION)
    model.save(tmp_path)
    spec = read_json(tmp_path / "risk_model.json")
    assert spec["version"] == MODEL_VERSION and spec["sphr_version"]
    assert RiskModel.load(tmp_path).version_ == MODEL_VERSION
