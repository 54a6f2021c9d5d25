"""benchmarks/real_nhanes.py --refits: the refit seeds and the spread summary (no fit)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark

real_nhanes = load_benchmark("real_nhanes")


def test_refit_zero_is_the_run_without_refits_and_later_refits_differ():
    for seed in (0, 1, 7):
        seeds = [real_nhanes.refit_seed(seed, r) for r in range(6)]
        assert seeds[0] == seed  # refit 0 reproduces today's figure
        assert len(set(seeds)) == len(seeds)
        assert all(0 <= s < 2**31 for s in seeds)
        assert seeds == [real_nhanes.refit_seed(seed, r) for r in range(6)]  # same in, same out
    # the fold seed enters: refit 1 of fold seed 0 is not refit 1 of fold seed 1
    assert real_nhanes.refit_seed(0, 1) != real_nhanes.refit_seed(1, 1)
    with pytest.raises(ValueError):
        real_nhanes.refit_seed(0, -1)
    assert real_nhanes.refit_dir(Path("out"), 0) == Path("out")
    assert real_nhanes.refit_dir(Path("out"), 2) == Path("out") / "refit2"


def test_spread_is_mean_sample_sd_min_max():
    s = real_nhanes.spread([0.60, 0.50, 0.70])
    assert s == {"mean": 0.6, "sd": 0.1, "min": 0.5, "max": 0.7}
    assert real_nhanes.spread([0.55, 0.55])["sd"] == 0.0
    assert np.isnan(real_nhanes.spread([0.55])["sd"])


def _people(n: int, rng: np.random.Generator) -> pd.DataFrame:
    time = rng.uniform(1, 10, n)
    return pd.DataFrame({"eid": np.arange(n), "sex": np.where(np.arange(n) % 2, "male", "female"),
                         "time_years": time, "died": (rng.uniform(size=n) < 0.4).astype(int),
                         "risk": -time})


def test_refit_spread_reads_each_refit_and_each_fold():
    rng = np.random.default_rng(0)
    base = _people(80, rng)
    flipped = base.assign(risk=-base["risk"])  # a refit that orders everyone the other way
    folds = pd.DataFrame({"eid": base["eid"], "fold": (base["eid"] // 2) % 2})
    c_index = {"marker": {"female": {"risk": [0, 0, 0]}, "male": {"risk": [0, 0, 0]}}}
    out = real_nhanes.refit_spread([{"marker": base}, {"marker": flipped}], c_index, folds, seed=0)
    assert out["k"] == 2 and out["seeds"] == [0, real_nhanes.refit_seed(0, 1)]
    for sex in ("female", "male"):
        c = out["c_index"]["marker"][sex]["risk"]
        assert c[0] == pytest.approx(1 - c[1], abs=1e-3)  # reversing the score mirrors C
        sp = out["spread"]["marker"][sex]["risk"]
        assert sp["min"] == min(c) and sp["max"] == max(c)
        assert sp["sd"] == pytest.approx(np.std(c, ddof=1), abs=1e-4)
        per = out["per_fold"]["marker"][sex]["risk"]
        assert len(per["c"]) == 2 and all(len(f) == 2 for f in per["c"])
        sub = base.loc[(base["sex"] == sex) & ((base["eid"] // 2) % 2 == 1)]
        assert per["c"][1][0] == pytest.approx(real_nhanes.plain_c(sub, "risk"), abs=1e-4)
        assert per["mean_fold_sd"] > 0


def _train(*items: str, device: str | None = None) -> dict:
    """The training settings ``--set train.ITEM`` (and ``--device``) give every fold."""
    return real_nhanes.parse_args([x for i in items for x in ("--set", f"train.{i}")]
                                  + (["--device", device] if device else [])).train


def test_train_overrides_and_the_candidate_name():
    over = _train("selection=severity", "ensemble=5", "lr=0.002")
    assert over == {"selection": "severity", "ensemble": 5, "lr": 0.002}
    assert real_nhanes.candidate_name(over, "paper") == "ensemble=5,lr=0.002,selection=severity"
    assert real_nhanes.candidate_name({}, "paper") == "default"


def test_the_folds_settings_are_the_main_commands_set_and_refused_when_read(capsys):
    args = real_nhanes.parse_args(["--set", "train.anchor=1", "--set", "risk.tail_bound=lognormal",
                                   "--set", "cohorts.triplet_classes=severity",
                                   "--set", "cohorts.age_groups=[[40, 55], [56, 73]]"])
    assert (args.train, args.risk) == ({"anchor": 1}, {"tail_bound": "lognormal"})
    assert args.cohort == {"triplet_classes": "severity", "age_groups": [[40, 55], [56, 73]]}
    # refused when the arguments are read, before any fold is split, naming the item
    for bad, says in (("anchor", "expected STAGE.KEY=VALUE, got 'anchor'"),
                      ("=3", "expected STAGE.KEY=VALUE"),
                      ("anchor=1", "'anchor=1' names no stage"),
                      ("train.anchr=1", "[train]: no key 'anchr'"),
                      ("train.epochs=many", "[train] epochs must be integer, got 'many'"),
                      ("evaluate.n_splits=3", "a cross-fit's folds take [cohorts], [train], "
                                              "[risk]")):
        with pytest.raises(SystemExit):
            real_nhanes.parse_args(["--set", bad])
        assert says in capsys.readouterr().err, bad


def test_an_override_that_restates_the_profile_names_the_default_candidate():
    """``--train ensemble=1`` trains what the profile trains: its spread must be filed where a
    model of that profile looks it up (sphr.risk.refits.candidate_of)."""
    from sphr.risk.refits import candidate_of
    from sphr.train.config import TrainConfig

    # the demo profile trains the shipped candidate (the anchor at weight 3), the paper's none
    for profile, own in (("demo", "anchor=3.0"), ("paper", "default")):
        over = _train("ensemble=1", "selection=loss")
        name = real_nhanes.candidate_name(over, profile)
        assert name == own == candidate_of(TrainConfig.profile(profile).to_dict())
        assert candidate_of(TrainConfig.profile(profile, **over).to_dict()) == name
    # no remedy at all is "default" at either profile
    assert real_nhanes.candidate_name({"anchor": 0}, "demo") == "default"
    # the demo's epochs restated at the demo profile change nothing; at the paper's they do
    assert real_nhanes.candidate_name({"epochs": 8}, "demo") == "anchor=3.0"
    assert real_nhanes.candidate_name({"epochs": 8}, "paper") == "epochs=8"
    # on a GPU: the candidate is what was trained, not where
    gpu = _train("anchor=1", "ensemble=5", "compile=true", device="cuda")
    assert gpu["device"] == "cuda"
    assert gpu["compile"] is True
    assert real_nhanes.candidate_name(gpu, "paper") == "anchor=1.0,ensemble=5"


def test_record_spread_keeps_other_entries(tmp_path):
    import json

    path = tmp_path / "spread.json"
    path.write_text(json.dumps({"paper": {"default": {"k": 2}}}))
    args = argparse.Namespace(spaces="marker,quantile", folds=5, profile="demo",
                              train={"ensemble": 5}, refits=3, seed=0, bootstrap=1000,
                              reuse=False)
    spread = {"female": {"sphr": {"mean": 0.55, "sd": 0.01, "min": 0.54, "max": 0.56}}}
    result = {"n": 10, "deaths": 2, "refits": {"k": 3, "spread": {"marker": spread}}}
    entry = real_nhanes.record_spread(path, args, result)
    held = json.loads(path.read_text())
    assert held["paper"] == {"default": {"k": 2}}
    assert held["demo"]["anchor=3.0,ensemble=5"] == entry
    assert entry["spread"] == spread and entry["k"] == 3 and entry["space"] == "marker"
    assert entry["command"] == ("python benchmarks/real_nhanes.py --profile demo --refits 3 "
                                "--folds 5 --seed 0 --spaces marker,quantile --bootstrap 1000 "
                                "--no-main --set train.ensemble=5 --record-spread")


def test_tracking_summary_splits_fits_by_whether_the_heldout_c_inverted():
    rows = []
    for fold, c in enumerate([0.45, 0.6, 0.7]):
        for epoch in (1, 2, 3):
            rows.append({"refit": 0, "fold": fold, "sex": "male", "epoch": epoch,
                         "kept_epoch": 2, "val_loss": 1.0 / epoch,
                         "val_severity_c": 0.8 + 0.01 * epoch, "fit_death_c": c + 0.01 * epoch})
    tracks = pd.DataFrame(rows)
    heldout = {(0, 0, "male"): 0.45, (0, 1, "male"): 0.6, (0, 2, "male"): 0.7}
    out = real_nhanes.tracking_summary(tracks, heldout)
    male = out["by_sex"]["male"]
    assert male["n_fits"] == 3 and male["n_inverted"] == 1 and male["kept_epoch_mean"] == 2
    assert male["inverted"]["fit_death_c@kept"] == pytest.approx(0.47)
    assert male["not_inverted"]["fit_death_c@first"] == pytest.approx(0.66)
    assert male["rho_with_heldout_c"]["fit_death_c@kept"] == pytest.approx(1.0)
    assert "| male | 3 (1) | fit_death_c |" in real_nhanes.tracking_markdown(out)


def test_the_stability_rule_passes_only_above_half_and_no_wider_than_raw():
    spread = {sex: {"raw_euclidean": {"sd": 0.01, "mean": 0.65},
                    "sphr": {"sd": 0.005, "mean": 0.6},
                    "sphr_joint": {"sd": 0.02, "mean": 0.62}} for sex in ("female", "male")}
    intervals = {"female": {"sphr": [0.55, 0.65], "sphr_joint": [0.57, 0.66]},
                 "male": {"sphr": [0.49, 0.6], "sphr_joint": [0.57, 0.66]}}
    rule = real_nhanes.stability_rule(spread, intervals)
    assert rule["female"]["sphr"]["passes"]
    assert not rule["male"]["sphr"]["passes"] and not rule["male"]["sphr"]["above_half"]
    assert not rule["female"]["sphr_joint"]["passes"]  # wider than the raw distance
    assert not rule["female"]["sphr_joint"]["sd_at_most_raw"]
    assert "| female | SPHR | 0.600 [0.550, 0.650] | 0.005 (0.010) | yes |" in \
        real_nhanes.rule_markdown(rule)
