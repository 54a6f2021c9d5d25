"""DAGSTER_HOME for this project: each run directory keeps its own run history.

``python -m sphr_dagster run --run-dir RUN`` and ``python -m sphr_dagster ui --run-dir RUN`` use
``RUN/.dagster_home`` unless DAGSTER_HOME is set, so a failed run on one export never changes
what the UI shows for another run directory; without a run directory, the checkout's
``.dagster_home``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = PROJECT_ROOT / ".dagster_home"
#: the run directory's folder of Dagster's run history
RUN_HOME = ".dagster_home"
#: the DAGSTER_HOME this process set itself (a later call for another run directory moves it)
_SET_HERE: list[str] = []


def dagster_home(run_dir: str | Path | None = None) -> Path:
    """DAGSTER_HOME as the user set it, else ``run_dir``'s own, else the checkout's."""
    given = os.environ.get("DAGSTER_HOME")
    if given and given not in _SET_HERE:
        return Path(given).resolve()
    return (Path(run_dir) / RUN_HOME if run_dir is not None else DEFAULT_HOME).resolve()


def ensure_dagster_home(run_dir: str | Path | None = None) -> Path:
    """Set DAGSTER_HOME (:func:`dagster_home`) and give it our dagster.yaml (telemetry off)."""
    home = dagster_home(run_dir)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(Path(__file__).with_name("dagster.yaml"), config)
    os.environ["DAGSTER_HOME"] = str(home)
    _SET_HERE.append(str(home))
    return home
