"""``--record-spread``: the refit spread, filed under the profile and the candidate the run's
settings name, in the study's results file ``benchmarks/results/refit_spread.json``.

A benchmark never writes into the library: the report reads the spread from the risk stage's
package data (``sphr/risk/refit_spread.json``, sphr.risk.refits), which only the release step
``make refit-spread`` (scripts/release_refit_spread.py) writes, after validating this file."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from .common import REPO

#: where a measured refit spread is kept: the study's results, outside the package
SPREAD_FILE = REPO / "benchmarks" / "results" / "refit_spread.json"


def candidate_name(train: dict, profile: str) -> str:
    """The training settings a refit run changed from ``profile``, as the key of its spread
    (``default``: the profile as it is), written as the report looks it up: an override that
    restates the profile's value (``ensemble=1``) changes nothing, so it is no part of the key;
    values as the saved config holds them (``anchor=1`` is ``anchor=1.0``). Where and how fast
    the fits ran (``device=cuda``, ``compile=true``) is no part of it."""
    from sphr.risk.refits import (
        CANDIDATE_SETTINGS,
        RUNTIME_SETTINGS,
        candidate_key,
        changed_candidates,
    )
    from sphr.train.config import TrainConfig

    base = TrainConfig.profile(profile).to_dict()
    given = TrainConfig.profile(profile, **train).to_dict()
    # the candidate settings as sphr.risk.refits.candidate_of names a trained model's
    changed = changed_candidates(given)
    changed.update({k: given[k] for k in train if k not in RUNTIME_SETTINGS
                    and k not in CANDIDATE_SETTINGS and base.get(k, object()) != given[k]})
    return candidate_key(changed)


def measuring_command(args: argparse.Namespace) -> str:
    """The command that measures what ``args`` asked for, without where it wrote (a machine's
    path) or whether it re-read an earlier run's scores."""
    parts = ["python benchmarks/real_nhanes.py", f"--profile {args.profile}",
             f"--refits {args.refits}", f"--folds {args.folds}", f"--seed {args.seed}",
             f"--spaces {args.spaces}", f"--bootstrap {args.bootstrap}", "--no-main",
             *(f"--set train.{k}={_value(v)}" for k, v in args.train.items()),
             *(f"--set risk.{k}={_value(v)}" for k, v in getattr(args, "risk", {}).items()),
             "--record-spread"]
    return " ".join(parts)


def _value(value: object) -> str:
    """A setting as ``--set`` reads it back (:func:`sphr.options.parse_value`)."""
    return value if isinstance(value, str) else json.dumps(value)


def record_spread(path: Path, args: argparse.Namespace, result: dict) -> dict:
    """Keep this run's refit spread of the default space's scores in ``path`` (atomically)
    under its profile and candidate (other entries kept; a first run starts from the shipped
    spreads), with the date, commit, command, n and deaths; once released into the package
    (``make refit-spread``) the report shows it beside SPHR's rows (sphr.risk.refits)."""
    import datetime

    from sphr.io import write_json
    from sphr.risk.refits import measured_spreads

    space = args.spaces.split(",")[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip() or None
    held = json.loads(path.read_text()) if path.exists() else measured_spreads()
    entry = {"date": datetime.date.today().isoformat(), "commit": commit,
             "command": measuring_command(args),
             # --reuse: the scores of an earlier run at an earlier commit, re-read here
             "scores_reread": bool(args.reuse),
             "k": result["refits"]["k"], "folds": args.folds, "space": space,
             "n": result["n"], "deaths": result["deaths"],
             "spread": result["refits"]["spread"][space],
             "interval": result["refits"].get("interval", {}).get(space),
             "risk": getattr(args, "risk", {}),
             "beyond_age": result["refits"].get("beyond_age", {}).get(space),
             "rule": result.get("rule")}
    name = candidate_name(args.train, args.profile)
    held.setdefault(args.profile, {})[name] = entry
    write_json(held, path)
    return entry
