"""Generator v2: literature correlations, age trends, treatment, visits, missingness, two worlds."""

from __future__ import annotations

import numpy as np
import pytest

from sphr.synth.checks import age_trend, correlation_check, repeat_visit, treated_diabetes
from sphr.synth.cohort import WORLDS, generate_cohort


@pytest.fixture(scope="module")
def cohort():
    return generate_cohort(8_000, seed=1)


@pytest.mark.parametrize("world", WORLDS)
def test_every_world_is_deterministic_for_a_seed(world, tmp_path):
    from sphr.synth.export import truth_path, write_export

    a, b = generate_cohort(400, seed=5, world=world), generate_cohort(400, seed=5, world=world)
    assert a.visits.equals(b.visits) and a.truth.equals(b.truth) and a.linked.equals(b.linked)
    assert a.truth.attrs == b.truth.attrs
    pa = write_export(a, tmp_path / "a.csv", "ukbconv", decoys=3, seed=5)
    pb = write_export(b, tmp_path / "b.csv", "ukbconv", decoys=3, seed=5)
    assert pa.read_bytes() == pb.read_bytes()
    assert truth_path(pa).read_bytes() == truth_path(pb).read_bytes()
    assert not a.visits.equals(generate_cohort(400, seed=6, world=world).visits)


def test_worlds_share_participants_but_not_who_is_ill():
    lin, non = (generate_cohort(3_000, seed=2, world=w) for w in WORLDS)
    cols = ["eid", "sex", "age", "frailty", "metabolic", "renal"]
    assert lin.truth[cols].equals(non.truth[cols])
    assert not np.allclose(lin.truth["hazard_diabetes"], non.truth["hazard_diabetes"])
    assert (lin.truth["subtype"] == 0).all() and set(non.truth["subtype"]) == {0, 1, 2}
    # each condition has the same expected prevalence by construction (docs/SYNTH.md, worlds);
    # their union differs a little, as the conditions overlap less in the non-linear world
    for k in ("diabetes", "cancer", "other_serious"):
        col = f"p_baseline_{k}"
        assert abs(lin.truth[col].mean() - non.truth[col].mean()) < 1e-3
    assert abs(lin.truth["p_unhealthy"].mean() - non.truth["p_unhealthy"].mean()) < 0.05


def test_unknown_world_is_a_config_error():
    from sphr.errors import ConfigError

    with pytest.raises(ConfigError, match="world"):
        generate_cohort(10, world="quadratic")


def test_targeted_correlations_land_in_their_documented_ranges(cohort):
    table = correlation_check(cohort.visits)
    assert table["within"].all(), table[~table["within"]].to_string()
    kidney = table[(table["a"] == "cystatin_c") & (table["b"] == "creatinine")]
    assert len(kidney) == 2 and (kidney["spearman"] >= 0.5).all()


def test_ldl_and_cholesterol_rise_with_age_in_women(cohort):
    for marker in ("ldl", "cholesterol"):
        trend = age_trend(cohort.visits, marker, sex=0)
        assert trend["spearman_age"] > 0.05
        assert trend["by_decade"][60] > trend["by_decade"][40] + 0.2


def test_treatment_response_varies(cohort):
    dm = treated_diabetes(cohort.visits, cohort.truth)
    assert 0.2 < dm["share_below_48"] < 0.5  # some treated diabetics are at target
    b = cohort.visits[cohort.visits["instance"] == 0].set_index("eid").loc[cohort.truth["eid"]]
    statin = cohort.truth["baseline_statin"].to_numpy()
    ratio = b["ldl"].to_numpy() / b["apob"].to_numpy()
    assert np.nanstd(ratio[statin]) > 0  # the LDL fall differs between participants


def test_repeat_visit_in_its_window_and_healthier(cohort):
    rep = repeat_visit(cohort.visits, cohort.truth)
    assert rep["first_date"] >= "2012-08-01" and rep["last_date"] <= "2013-06-30"
    assert 0.03 < rep["share"] < 0.05 and rep["frailty_repeat_minus_all"] < -0.1


def test_missing_not_at_random(cohort):
    b = cohort.visits[cohort.visits["instance"] == 0].set_index("eid").loc[cohort.truth["eid"]]
    # below the assay's lower limit nothing is reported
    assert b["testosterone"].min() >= 0.35 and b["vitamin_d"].min() >= 10
    # the MET panel goes missing more often for the less fit (an unobserved latent)
    fitness = cohort.truth["fitness"].to_numpy()
    gone = b["met_total"].isna().to_numpy()
    assert fitness[gone].mean() < fitness[~gone].mean() - 0.1


def test_truth_file_carries_world_and_oracle_ceilings(tmp_path):
    from sphr.synth.export import truth_path, write_export
    from sphr.synth.worlds import read_world

    cohort = generate_cohort(2_000, seed=4, world="nonlinear")
    path = write_export(cohort, tmp_path / "ukb.parquet", "parquet", decoys=0, seed=4)
    world = read_world(str(truth_path(path)))
    assert world["name"] == "nonlinear" and "subtype" in world["definition"]
    oracle = world["oracle_auroc"]
    assert set(oracle) == {"labels", "new_diagnoses", "linked"}
    assert set(oracle["linked"]) == {"type2_diabetes", "cancer", "cardiovascular", "death"}
    for group in oracle.values():
        for auc in group.values():
            assert 0.5 < auc["all"] < 1.0 and set(auc) == {"all", "female", "male"}


def test_cli_world_option(tmp_path, capsys):
    from sphr.cli import main
    from sphr.synth.export import truth_path
    from sphr.synth.worlds import read_world

    out = tmp_path / "ukb.csv"
    assert main(["synth", "--participants", "300", "--world", "nonlinear", "--decoys", "0",
                 "--out", str(out)]) == 0
    assert "nonlinear world" in capsys.readouterr().out
    assert read_world(str(truth_path(out)))["name"] == "nonlinear"


# The frozen exports are checked on values in tests/test_reproducible.py.
