"""DAGSTER_HOME for this project: runs persist in ``.dagster_home`` unless set otherwise."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = PROJECT_ROOT / ".dagster_home"


def ensure_dagster_home() -> Path:
    """Set DAGSTER_HOME (if unset) and give it our dagster.yaml (telemetry off)."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(Path(__file__).with_name("dagster.yaml"), config)
    os.environ["DAGSTER_HOME"] = str(home)
    return home
