"""``sphr ingest`` and ``sphr fields`` (``sphr synth`` is :mod:`sphr.synth.commands`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: the ingest settings (IngestSettings fields) that ``--outcomes FILE`` sets, as one JSON
#: override file (as ``sphr run --outcomes`` does), not an option each
OUTCOME_FILE_KEYS: tuple[str, ...] = ("outcomes", "censoring", "first_occurrence_fields")


def register(sub: argparse._SubParsersAction) -> None:
    # every other ingest setting's option is generated from the library's IngestSettings: its
    # default, and its help the field's doc (sphr.options)
    from sphr.data.config import IngestSettings
    from sphr.options import add_settings

    p = sub.add_parser("ingest", help="read a UKB export into baseline/followup parquet",
                       description="Read a UK Biobank main-dataset export (ukbconv CSV, TSV, R "
                       ".tab, RAP CSV with codes or labels, parquet; detected from the header), "
                       "reading only the columns sphr uses.")
    p.add_argument("export", type=Path)
    p.add_argument("--out", type=Path, required=True, help="output folder")
    options = add_settings(p, IngestSettings, defaults=IngestSettings(), skip=OUTCOME_FILE_KEYS,
                           stage="ingest")
    p.add_argument("--outcomes", type=Path, default=None,
                   help='JSON override of the outcome table and censoring dates, e.g. '
                   '{"outcomes": {"copd": {"codes": ["J44"], "sources": ["hospital"]}}, '
                   '"censoring": {"hospital": "2021-03-31"}} (docs/OUTCOMES.md)')
    p.set_defaults(func=_ingest, setting_options=options)

    p = sub.add_parser("fields", help="list the UK Biobank fields the pipeline reads",
                       description="The catalog's fields: Showcase id, title, unit, the "
                       "plausible range (a value outside it becomes missing at ingest), the "
                       "instances and array indices sphr ingest reads, whether the ingest stops "
                       "without them, and which stages use them. --rap prints the column names "
                       "to extract on the UK Biobank Research Analysis Platform (docs/RAP.md).")
    p.add_argument("--rap", action="store_true",
                   help="print the RAP column names, one per line, eid first: a field list for "
                   "the Table Exporter (with --entity participant: for dx extract_dataset "
                   "--fields-file)")
    p.add_argument("--entity", default=None,
                   help="with --rap: write each name as ENTITY.NAME, as dx extract_dataset "
                   "wants them (participant.p31)")
    p.add_argument("--format", default=None, choices=("table", "json"),
                   help="table (default) or json (one object per field, every detail)")
    p.add_argument("--required-only", action="store_true",
                   help="only the columns without which sphr ingest stops (enough for the "
                   "ingest, not for the models: every predictor it lacks is dropped)")
    p.set_defaults(func=_fields)


def _ingest(args: argparse.Namespace) -> int:
    from sphr.data.ingest import run_ingest
    from sphr.data.outcomes.config import load_outcome_config

    result = run_ingest(args.export, args.out, drop_truncated_last_row=args.drop_truncated_last_row,
                        outcome_config=load_outcome_config(args.outcomes))
    r = result.report
    print(f"read {r['rows_read']} rows ({r['format']}, {r['columns_read']} of "
          f"{r['columns_in_file']} columns) in {r['seconds']} s")
    print("labels by sex: " + json.dumps(r["labels_by_sex"]))
    files = "baseline.parquet, followup.parquet, "
    if result.outcomes is not None:
        files += "outcomes.parquet, "
        counts = {o: f"{v['events']} events, {v['prevalent']} prevalent"
                  for o, v in r["outcomes"]["by_outcome"].items()}
        print("outcomes: " + json.dumps(counts))
    else:
        print(f"no outcomes: {r['outcomes']['why']}")
    print(f"wrote {args.out}/{files}ingest_report.json")
    return 0


def _fields(args: argparse.Namespace) -> int:
    import re

    from sphr.data.catalog_view import field_uses, format_table, rap_columns
    from sphr.errors import ConfigError

    if args.entity is not None and not args.rap:
        raise ConfigError("--entity prefixes the names --rap prints; add --rap")
    if args.rap and args.format is not None:
        raise ConfigError("--rap prints one name per line; leave out --format")
    if args.entity is not None and not re.fullmatch(r"[A-Za-z_]\w*", args.entity):
        raise ConfigError(f"--entity {args.entity!r} is not an entity name (e.g. participant)")
    if args.rap:
        _emit("\n".join(rap_columns(entity=args.entity or "", required_only=args.required_only)))
        return 0
    uses = field_uses()
    if args.required_only:
        uses = [u for u in uses if u.required]
    if args.format == "json":
        _emit(json.dumps([u.to_dict() for u in uses], indent=2))
    else:
        _emit(format_table(uses))
    return 0


def _emit(text: str) -> None:
    """Print ``text``; a reader that stops early (``sphr fields --rap | head``) is no error."""
    import os
    import sys

    try:
        print(text, flush=True)
    except BrokenPipeError:
        # without this, Python reports the closed pipe once more when it flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
