"""Which SPHR score ships, and how far one fit of it can be trusted (docs/METHODS.md, "SPHR's
stability from fit to fit").

SPHR's C for death moves from fit to fit. ``benchmarks/real_nhanes.py --refits K
--record-spread`` measures that spread on the development set (every fold fitted K times,
cross-fitted) and keeps it in the study's results, ``benchmarks/results/refit_spread.json``,
per training profile and training candidate (``default``, ``ensemble=5``,
``selection=severity``, ``anchor=1.0``). The report reads it from ``refit_spread.json``
beside this module (:data:`SPREAD_FILE`): package data, so a report works offline from a
wheel, and written only by the release step ``make refit-spread``
(scripts/release_refit_spread.py), which checks the results file with
:func:`check_spreads` and copies it byte for byte; no benchmark writes into the package.
When the risk stage fits, :func:`sphr_record` finds the profile and
candidate of the SPHR model it was given and copies the matching spread into
``risk_model.json`` (``shipped_sphr``, ``sphr_refits``), so the report, and every later
``sphr score`` of that model, shows it beside SPHR's rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphr.io import read_json
from sphr.profiles import PROFILES
from sphr.risk.config import SHIPPED_SPHR, SPHR_VARIANTS
from sphr.train.config import CANDIDATE, RUNTIME, SEED, TrainConfig, settings_with

#: the measured spreads the report reads: package data, released from the study's results
#: (benchmarks/results/refit_spread.json) by ``make refit-spread``, never by a benchmark
SPREAD_FILE = Path(__file__).with_name("refit_spread.json")
#: what every recorded run holds (the report shows the spread, its interval and the run's n)
SPREAD_ENTRY_KEYS: tuple[str, ...] = ("date", "commit", "command", "k", "folds", "space", "n",
                                      "deaths", "spread")
#: the training settings a candidate may change, with their defaults (their fields' role)
CANDIDATE_SETTINGS: dict[str, Any] = {
    name: getattr(TrainConfig(), name) for name in settings_with(TrainConfig, role=CANDIDATE)}
#: settings that change where and how fast a model trains, not what it learns, and the seed
#: (a refit's own)
RUNTIME_SETTINGS: tuple[str, ...] = (*settings_with(TrainConfig, role=SEED),
                                     *settings_with(TrainConfig, role=RUNTIME))
#: the risk methods that read SPHR's embedding
SPHR_METHODS: tuple[str, ...] = ("sphr", *SPHR_VARIANTS)


def profile_of(train: dict[str, Any]) -> str | None:
    """The profile whose training settings ``train`` (a saved ``TrainConfig``) has, runtime
    settings and the candidate's aside; None for settings of no profile."""
    skip = set(RUNTIME_SETTINGS) | set(CANDIDATE_SETTINGS)
    for name in PROFILES:
        base = TrainConfig.profile(name).to_dict()
        if all(train.get(k, v) == v for k, v in base.items() if k not in skip):
            return name
    return None


def changed_candidates(train: dict[str, Any]) -> dict[str, Any]:
    """The candidate settings ``train`` changed from no remedy at all (a profile may carry
    one: demo trains with the anchor)."""
    return {k: train[k] for k, v in CANDIDATE_SETTINGS.items() if train.get(k, v) != v}


def candidate_of(train: dict[str, Any]) -> str:
    """The candidate name of ``train``: the candidate settings it changed (``default``:
    none), as ``benchmarks/real_nhanes.py`` names them."""
    return candidate_key(changed_candidates(train))


def candidate_key(changed: dict[str, Any]) -> str:
    """The key of a candidate in ``refit_spread.json``: its changed settings, ``key=value``
    sorted and joined by commas; ``default`` when none changed."""
    return ",".join(f"{k}={changed[k]}" for k in sorted(changed)) or "default"


def measured_spreads(path: Path = SPREAD_FILE) -> dict[str, Any]:
    """profile -> candidate -> the recorded run (empty when nothing was measured)."""
    return read_json(path) if path.exists() else {}


def sphr_record(train_reports: list[dict[str, Any]], methods: list[str],
                path: Path = SPREAD_FILE) -> dict[str, Any]:
    """What ``risk_model.json`` records about SPHR: the shipped SPHR score (when it was
    computed), the profile and candidate its network was trained with (from the sexes'
    ``train_report.json``) and the spread measured for them, restricted to SPHR's methods
    (None when not measured)."""
    shipped = SHIPPED_SPHR if SHIPPED_SPHR in methods else None
    configs = [r.get("config", {}) for r in train_reports]
    profiles = {profile_of(c) for c in configs}
    candidates = {candidate_of(c) for c in configs}
    profile = profiles.pop() if len(profiles) == 1 else None
    candidate = candidates.pop() if len(candidates) == 1 else None
    entry = measured_spreads(path).get(profile or "", {}).get(candidate or "")
    if entry is not None:
        # SPHR's methods, and the raw distance as the yardstick
        keep = {m for m in methods if m in (*SPHR_METHODS, "raw_euclidean")}
        entry = {**entry, "spread": {sex: {m: v for m, v in by.items() if m in keep}
                                     for sex, by in entry["spread"].items()}}
    return {"shipped_sphr": shipped, "training": {"profile": profile, "candidate": candidate},
            "spread": entry}


def check_spreads(spreads: Any) -> list[str]:
    """What is wrong with a refit spread file's content (empty: nothing): profile ->
    candidate -> run, each profile one of :data:`sphr.profiles.PROFILES`, each candidate a key
    :func:`candidate_key` writes, each run with :data:`SPREAD_ENTRY_KEYS` and a spread per sex
    and method."""
    if not isinstance(spreads, dict):
        return ["not a mapping of profile -> candidate -> run"]
    problems = []
    for profile, runs in spreads.items():
        if profile not in PROFILES or not isinstance(runs, dict):
            problems.append(f"{profile!r}: not a profile's mapping of candidates")
            continue
        for name, run in runs.items():
            where = f"{profile}/{name}"
            changed = dict(kv.split("=", 1) for kv in name.split(",")) if name != "default" \
                else {}
            if name != "default" and candidate_key(changed) != name:
                problems.append(f"{where}: not a candidate key (sorted key=value, comma-joined)")
            missing = [k for k in SPREAD_ENTRY_KEYS if not isinstance(run, dict) or k not in run]
            if missing:
                problems.append(f"{where}: missing {', '.join(missing)}")
            elif not (isinstance(run["spread"], dict) and all(
                    isinstance(by, dict) for by in run["spread"].values())):
                problems.append(f"{where}: spread is not sex -> method -> figures")
    return problems
