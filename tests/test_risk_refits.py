"""Which SPHR score ships and its measured refit spread: the fitted model records both, the
report shows them (sphr.risk.refits, sphr.risk.report.trust)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sphr.risk.refits import candidate_of, profile_of, sphr_record
from sphr.risk.report.trust import sphr_trust, with_refit_sd
from sphr.train import TrainConfig

ENTRY = {"date": "2026-11-27", "commit": "abc1234", "command": "python benchmarks/x.py",
         "k": 3, "folds": 5, "space": "marker", "n": 4806, "deaths": 496,
         "spread": {"female": {"sphr": {"mean": 0.54, "sd": 0.013, "min": 0.53, "max": 0.55},
                               "sphr_joint": {"mean": 0.56, "sd": 0.016, "min": 0.55,
                                              "max": 0.58},
                               "raw_euclidean": {"mean": 0.65, "sd": 0.012, "min": 0.64,
                                                 "max": 0.66},
                               "phenoage": {"mean": 0.65, "sd": 0.006, "min": 0.65,
                                            "max": 0.66}},
                    "male": {"sphr_joint": {"mean": 0.53, "sd": 0.011, "min": 0.52,
                                            "max": 0.54}}}}


def test_the_profile_and_candidate_of_a_saved_training_config():
    # the demo profile trains the shipped candidate, the anchor at weight 3 (docs/METHODS.md)
    demo = TrainConfig.profile("demo", seed=7, device="cpu", threads=1).to_dict()
    assert profile_of(demo) == "demo" and candidate_of(demo) == "anchor=3.0"
    bare = TrainConfig.profile("demo", anchor=0).to_dict()
    assert profile_of(bare) == "demo" and candidate_of(bare) == "default"
    paper = TrainConfig.profile("paper", ensemble=5).to_dict()
    assert profile_of(paper) == "paper" and candidate_of(paper) == "ensemble=5"
    both = TrainConfig.profile("demo", anchor=0, ensemble=3, selection="severity").to_dict()
    assert candidate_of(both) == "ensemble=3,selection=severity"
    assert profile_of(TrainConfig.profile("demo", epochs=3).to_dict()) is None
    # R3 / R4: an anchor given as 1 is filed as the saved config holds it
    anchored = TrainConfig.profile("paper", anchor=1, ensemble=5).to_dict()
    assert profile_of(anchored) == "paper" and candidate_of(anchored) == "anchor=1.0,ensemble=5"


def test_every_recorded_candidate_is_one_a_trained_model_can_name():
    """Each key of the shipped refit_spread.json is what candidate_of gives for a model
    trained with its settings, so the report finds every measured spread."""
    from sphr.risk.refits import CANDIDATE_SETTINGS, measured_spreads

    held = measured_spreads()
    assert held, "refit_spread.json holds no measured run"
    for profile, candidates in held.items():
        for key in candidates:
            items = [] if key == "default" else key.split(",")
            settings = dict(item.split("=", 1) for item in items)
            assert set(settings) <= set(CANDIDATE_SETTINGS), key
            typed = {k: type(CANDIDATE_SETTINGS[k])(v) for k, v in settings.items()}
            # a key names every candidate setting that differs from no remedy at all
            config = TrainConfig.profile(profile, **{**CANDIDATE_SETTINGS, **typed})
            assert candidate_of(config.to_dict()) == key


def test_sphr_record_takes_the_spread_measured_for_the_models_training(tmp_path):
    path = tmp_path / "refit_spread.json"
    path.write_text(json.dumps({"demo": {"default": ENTRY}}))
    demo = {"config": TrainConfig.profile("demo", anchor=0).to_dict()}
    rec = sphr_record([demo, demo], ["raw_euclidean", "sphr", "sphr_joint", "phenoage"], path)
    assert rec["shipped_sphr"] == "sphr_joint"
    assert rec["training"] == {"profile": "demo", "candidate": "default"}
    # SPHR's methods and the raw distance only; PhenoAge is not SPHR's business
    assert set(rec["spread"]["spread"]["female"]) == {"sphr", "sphr_joint", "raw_euclidean"}
    paper = {"config": TrainConfig.profile("paper").to_dict()}
    assert sphr_record([paper], ["sphr_joint"], path)["spread"] is None  # not measured
    mixed = sphr_record([demo, paper], ["sphr"], path)
    assert mixed["training"]["profile"] is None and mixed["shipped_sphr"] is None
    assert sphr_record([demo], ["sphr"], tmp_path / "absent.json")["spread"] is None


def test_the_report_block_names_the_shipped_score_and_its_spread():
    rec = {"shipped_sphr": "sphr_joint", "training": {"profile": "demo", "candidate": "default"},
           "spread": ENTRY}
    block = sphr_trust(rec, ["raw_euclidean", "sphr_joint"])
    assert "SPHR + markers" in block["sentence"] and "4,806 people" in block["sentence"]
    assert "0.560, SD 0.016 [0.550-0.580]" in block["table"].to_string()
    assert "python benchmarks/x.py" in block["sentence"]
    assert "stability rule" not in block["sentence"]  # no verdict recorded
    rule = {"female": {"sphr_joint": {"passes": True, "above_half": True,
                                      "sd_at_most_raw": True, "sd": 0.01, "raw_sd": 0.012}},
            "male": {"sphr_joint": {"passes": False, "above_half": False,
                                    "sd_at_most_raw": False, "sd": 0.011, "raw_sd": 0.002}}}
    judged = sphr_trust({**rec, "spread": {**ENTRY, "rule": rule}}, ["sphr_joint"])["sentence"]
    assert "the shipped score: in women it passes; in men it does not pass (its interval " \
           "reaches 0.5; its refit SD (0.011) exceeds the raw distance's (0.002))." in judged
    assert "The shipped SPHR score is SPHR + markers." in judged
    # a sex where it did not pass is named with what to read instead; none when all pass
    assert "So in men its groups are one fit's ordering" in judged
    assert "Euclidean (raw), measured over the same refits" in judged
    passed = {sex: {"sphr_joint": {**rule["female"]["sphr_joint"]}} for sex in rule}
    assert "one fit's ordering" not in sphr_trust(
        {**rec, "spread": {**ENTRY, "rule": passed}}, ["sphr_joint"])["sentence"]
    # a record with the per-refit yardstick shows what each score adds to age beside its C
    gains = [{"female": {"sphr_joint": {"dc": [g, g - 0.03, g + 0.03]}}} for g in (0.05, 0.07)]
    with_dc = sphr_trust({**rec, "spread": {**ENTRY, "beyond_age": gains}}, ["sphr_joint"])
    assert "what it adds to age, dC = C(age + score) - C(age)" in with_dc["sentence"]
    table = with_dc["table"].set_index("method")
    assert table.loc["SPHR + markers (shipped)", "women: dC over refits"] == \
        "+0.060 [+0.050 to +0.070]"
    assert table.loc["SPHR + markers (shipped)", "men: dC over refits"] == "-"  # not measured
    assert "dC over refits" not in " ".join(block["table"].columns)  # none recorded
    unmeasured = sphr_trust({**rec, "spread": None}, ["sphr_joint"])
    assert "not been measured for the demo profile" in unmeasured["sentence"]
    assert unmeasured["table"] is None
    assert sphr_trust(rec, ["raw_euclidean"]) is None  # no SPHR score in the report
    frame = pd.DataFrame({"sex": ["female", "female", "male"],
                          "method": ["sphr_joint", "mahalanobis", "sphr_joint"], "c": [1, 2, 3]})
    out = with_refit_sd(frame, rec)
    col = "refit SD of death C (development set)"
    assert out[col].iloc[0] == 0.016 and np.isnan(out[col].iloc[1]) and out[col].iloc[2] == 0.011
    assert with_refit_sd(frame, {**rec, "spread": None}).equals(frame)
