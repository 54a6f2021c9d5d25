"""Which SPHR score ships, and how far one fit of it can be trusted (docs/METHODS.md, "SPHR's
stability from fit to fit").

SPHR's C for death moves from fit to fit. ``benchmarks/real_nhanes.py --refits K
--record-spread`` measures that spread on the development set (every fold fitted K times,
cross-fitted) and keeps it in ``refit_spread.json`` beside this module, per training profile
and training candidate (``default``, ``ensemble=5``, ``selection=severity``,
``anchor=1.0``). When the risk stage fits, :func:`sphr_record` finds the profile and
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

#: the measured spreads (written by benchmarks/real_nhanes.py --record-spread)
SPREAD_FILE = Path(__file__).with_name("refit_spread.json")
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
