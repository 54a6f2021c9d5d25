"""The settings reference (docs/SETTINGS.md): current with the dataclasses, and every key it
lists either runs or fails up front: its own value at each profile passes the run's checks,
and a value of the wrong type stops before anything is written, naming the table and key
(issue 64, item 5)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sphr.errors import ConfigError
from sphr.options import Override
from sphr.profiles import PROFILES
from sphr.settings.reference import REFERENCE_PAGE, reference_markdown
from sphr.settings.run import resolve
from sphr.settings.stages import STAGES, stage_defaults, stage_types

REPO = Path(__file__).resolve().parent.parent


def test_the_page_is_current():
    page = (REPO / REFERENCE_PAGE).read_text()
    assert page == reference_markdown(), \
        "docs/SETTINGS.md is out of date: run python -m sphr.settings.reference"


def _listed_keys() -> dict[str, list[str]]:
    """Each table's keys as the page lists them (its rows, read back)."""
    out: dict[str, list[str]] = {}
    table = None
    for line in (REPO / REFERENCE_PAGE).read_text().splitlines():
        head = re.match(r"## `\[(\w+)\]`", line)
        if head:
            table = head.group(1)
            out[table] = []
        row = re.match(r"\| `(\w+)` \|", line)
        if row and table is not None:
            out[table].append(row.group(1))
    return out


def test_the_page_lists_every_key_of_every_stage():
    listed = _listed_keys()
    for stage in STAGES:
        assert listed[stage] == list(stage_types(stage)), stage


#: a value of the wrong type for any key: no setting is a list of one dict
_WRONG = [{"not": "a setting"}]


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_listed_key_runs_at_its_value_and_fails_up_front_when_wrong(stage):
    for profile in PROFILES:
        defaults = stage_defaults(stage, profile)
        for key in _listed_keys()[stage]:
            if defaults.get(key) is None:
                continue  # unset: nothing to give back
            # each key given its own value explicitly passes every stage's checks
            settings = resolve(profile=profile,
                               overrides=[Override(stage, (key,), defaults[key])])
            assert settings.stages[stage][key] == defaults[key], (stage, key)
    for key in _listed_keys()[stage]:
        with pytest.raises(ConfigError) as err:
            resolve(overrides=[Override(stage, (key,), _WRONG)])
        assert f"{stage}" in str(err.value) and key in str(err.value), str(err.value)
