"""``sphr synth`` and ``sphr ingest``."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # filled in below as stages land
    pass
