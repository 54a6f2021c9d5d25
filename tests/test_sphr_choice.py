"""benchmarks/sphr_choice.py: each profile's choice by dC, and the export's profile by passing
(docs/METHODS.md, "Higher risk for your age")."""

from __future__ import annotations

from benchmark_loader import load_benchmark

sphr_choice = load_benchmark("sphr_choice")


def _row(profile: str, training: str, mean_dc: float, passes: bool, cost: float = 1.0) -> dict:
    return {"profile": profile, "training": training, "score": "sphr_joint",
            "mean_dc": mean_dc, "passes": passes, "cost": cost}


def test_the_cheaper_profile_ships_when_both_pass_whatever_their_dc():
    rows = [_row("demo", "anchor=1.0", 0.040, True), _row("demo", "anchor=3.0", 0.056, True),
            _row("paper", "anchor=3.0", 0.080, True), _row("demo", "default", 0.090, False)]
    per_profile, export = sphr_choice.ship(rows)
    assert export == "demo" and per_profile["demo"]["training"] == "anchor=3.0"
    assert per_profile["paper"]["mean_dc"] == 0.080  # said, not shipped
    text = sphr_choice.markdown(_per_sex(rows), per_profile, export)
    table = _table(text)
    assert [(t["profile"], t["training"], t["passes in both"]) for t in table] == [
        (r["profile"], r["training"], "yes" if r["passes"] else "no") for r in rows]
    for t, r in zip(table, rows, strict=True):  # each sex's own numbers, in its own column
        assert t["women"].startswith(f"{r['mean_dc'] - 0.01:+.3f} [")
        assert t["men"].startswith(f"{r['mean_dc'] + 0.01:+.3f} [")
        assert t["women"].endswith(", fails") == (not r["passes"])
    shipped = next(line for line in text.splitlines() if line.startswith("Shipped by the rule"))
    assert "`anchor=3.0` at the `demo`" in shipped and "+0.056" in shipped
    other = [line for line in text.splitlines() if line.startswith("At the `paper` profile")]
    assert len(other) == 1 and "`anchor=3.0`" in other[0] and "+0.080" in other[0]
    nothing = sphr_choice.markdown(_per_sex(rows[-1:]), {"demo": None}, None)
    assert "Shipped by the rule: nothing" in nothing


def _per_sex(rows: list[dict]) -> list[dict]:
    """Rows with per-sex results that differ by sex, so a swapped column shows."""
    return [{**r, "per_sex": {sex: {"mean_dc": r["mean_dc"] + shift, "interval": [0.01, 0.1],
                                    "refit_dc": [r["mean_dc"]] * 3, "mean_c": 0.6,
                                    "c_sd": 0.01, "passes": r["passes"]}
                              for sex, shift in (("female", -0.01), ("male", 0.01))}}
            for r in rows]


def _table(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
            for line in lines[2:]]


def test_a_profile_ships_only_when_its_own_candidate_passes():
    rows = [_row("demo", "default", 0.002, False), _row("paper", "anchor=1.0", 0.030, True)]
    assert sphr_choice.ship(rows)[1] == "paper"
    assert sphr_choice.ship([_row("demo", "default", 0.002, False)]) == ({"demo": None}, None)


def test_within_the_tie_the_cheaper_training_and_then_the_smaller_weight_ship():
    rows = [_row("demo", "anchor=3.0", 0.056, True),
            _row("demo", "anchor=1.0,ensemble=5", 0.0545, True, cost=5.0),
            _row("demo", "anchor=1.0", 0.0535, True)]
    assert sphr_choice.choose(rows)["training"] == "anchor=1.0"
    rows[2]["mean_dc"] = 0.050  # outside the tie: the highest dC ships
    assert sphr_choice.choose(rows)["training"] == "anchor=3.0"


def test_earlier_candidates_join_and_a_remeasured_training_replaces_them_in_place(tmp_path):
    import json

    earlier = [_row("demo", "default", 0.002, False), _row("demo", "anchor=3.0", 0.056, True),
               {**_row("paper", "anchor=3.0", 0.041, True), "score": "sphr"},
               _row("paper", "anchor=3.0", 0.041, True)]
    path = tmp_path / "sphr_choice.json"
    path.write_text("a table first\n" + json.dumps({"candidates": earlier}) + "\n")
    new = [_row("paper", "anchor=1.0,ensemble=5", 0.040, True, cost=5.0)]
    rows = sphr_choice.with_earlier(new, path, {"paper:anchor=1.0,ensemble=5": 5.0})
    assert [r["training"] for r in rows] == ["default", "anchor=3.0", "anchor=3.0", "anchor=3.0",
                                             "anchor=1.0,ensemble=5"]
    assert rows[-1] is new[0] and sphr_choice.ship(rows)[0]["paper"]["training"] == "anchor=3.0"
    again = [_row("demo", "anchor=3.0", 0.050, True)]  # remeasured: its old row gives way
    rows = sphr_choice.with_earlier(again, path, {"demo:default": 2.0})
    assert [(r["training"], r["mean_dc"]) for r in rows[:2]] == [("default", 0.002),
                                                                 ("anchor=3.0", 0.050)]
    assert len(rows) == 4 and rows[0]["cost"] == 2.0
    assert sphr_choice.with_earlier(new, None, {}) == new
