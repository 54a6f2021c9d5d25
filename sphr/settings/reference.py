"""The settings reference (docs/SETTINGS.md): every key of every table a settings file (or
``--set STAGE.KEY=VALUE``) may hold, with its type, its value under each profile and its doc,
generated from the stages' dataclasses, the one source of each, so the page cannot drift
(tests/test_settings_reference.py regenerates and compares it)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sphr.options import plain_doc
from sphr.profiles import DEFAULT_PROFILE, PROFILES

#: where the generated page lives, from the repository root
REFERENCE_PAGE = "docs/SETTINGS.md"

_INTRO = """# Settings reference

Every key of a settings file (`--config settings.toml`, one table per stage) and of
`--set STAGE.KEY=VALUE` on the main command and the `sphr` stage commands. A value reads as
in TOML; a key left out keeps its value under the profile (`--profile`, default `{default}`).
An unknown key, a removed one or a value of the wrong type stops the run before anything is
written, naming the file (or `--set`) and the key; settings that cannot work together, or
too few people for them, are stopped by the pre-flight (docs/DAGSTER.md).

Generated from the stages' dataclasses by `python -m sphr.settings.reference` (do not edit;
tests/test_settings_reference.py checks it is current). `[run]` holds the main command's own
options (`--export`, `--profile`, ...; `python -m sphr_dagster run --help`).
"""


def _shown(value: Any) -> str:
    """A value as a settings file would write it (null: unset, which TOML writes by omission)."""
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, tuple):
        value = list(value)
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table_markdown(stage: str) -> str:
    """One table's keys: name, type, value under each profile, doc."""
    from sphr.settings.stages import stage_defaults, stage_docs, stage_types
    from sphr.values import type_name

    types_, docs = stage_types(stage), stage_docs(stage)
    values = {p: stage_defaults(stage, p) for p in PROFILES}
    head = " | ".join(f"`{p}`" for p in PROFILES)
    lines = [f"## `[{stage}]`", "", f"| key | type | {head} | what it sets |",
             "|---|---|" + "---|" * len(PROFILES) + "---|"]
    for key, tp in types_.items():
        cells = " | ".join(f"`{_cell(_shown(values[p].get(key)))}`" for p in PROFILES)
        lines.append(f"| `{key}` | {_cell(type_name(tp))} | {cells} | "
                     f"{_cell(plain_doc(docs.get(key, '')))} |")
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    """The whole page: every stage's table, then the commands' own tables (``[score]``)."""
    from sphr.settings.stages import COMMAND_TABLES, STAGES, command_class
    from sphr.values import field_types

    parts = [_INTRO.format(default=DEFAULT_PROFILE)]
    parts += [table_markdown(stage) for stage in STAGES]
    for table in COMMAND_TABLES:
        cls = command_class(table)
        from sphr.options import field_docs

        docs, defaults = field_docs(cls), cls()
        lines = [f"## `[{table}]` (read by `sphr {table} --config FILE`; a run ignores it)", "",
                 "| key | type | default | what it sets |", "|---|---|---|---|"]
        from sphr.values import type_name

        for key, tp in field_types(cls).items():
            lines.append(f"| `{key}` | {_cell(type_name(tp))} | "
                         f"`{_cell(_shown(getattr(defaults, key)))}` | "
                         f"{_cell(plain_doc(docs.get(key, '')))} |")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


if __name__ == "__main__":
    from pathlib import Path

    from sphr.io import write_text

    page = Path(__file__).resolve().parents[2] / REFERENCE_PAGE
    write_text(reference_markdown(), page)
    print(f"wrote {page}")
