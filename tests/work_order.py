"""The order pytest-xdist hands out test files in (conftest.py): the longest first.

With one work unit per file, a run ends when the worker holding the last unit finishes it;
a 58-s file handed out last kept one worker busy 16 s after the other had run out of work
(a cold run's timeline, docs/BENCHMARKS.md). Handed out longest first, the last units are
files of a second or two. The seconds below are one cold run of each file on a 2-core box
(empty inductor cache, per-file sums of a plugin's per-test start and end, fixtures
included); they only order the work, so a stale figure costs balance, never a result. A file
not listed counts as 0 s and keeps its place among the unlisted ones (slow ones first).
"""

from __future__ import annotations

from compiled_setup import node_file

#: seconds of one cold run of each file (rootdir-relative), files of 2 s or more
FILE_SECONDS: dict[str, int] = {
    "tests/test_ui_browser.py": 92,
    "tests/test_parallel_partitions.py": 83,
    "tests/test_risk.py": 58,
    "tests/test_drift_transport.py": 50,
    "tests/test_settings.py": 37,
    "tests/test_pipeline.py": 32,
    "tests/test_evaluate.py": 30,
    "tests/test_reports.py": 14,
    "tests/test_train.py": 12,
    "tests/test_reproducible.py": 11,
    "tests/test_real_dev.py": 11,
    "tests/test_refresh.py": 10,
    "tests/test_outcomes.py": 10,
    "tests/test_data_synth.py": 9,
    "tests/test_architecture.py": 8,
    "tests/test_fields_cli.py": 8,
    "tests/test_refresh_pipes.py": 7,
    "tests/test_report_main.py": 7,
    "tests/test_train_tracking.py": 6,
    "tests/test_score_report.py": 6,
    "tests/test_absolute_risk.py": 5,
    "tests/test_baselines.py": 5,
    "tests/test_data_roundtrip.py": 5,
    "tests/test_risk_real_sphr.py": 4,
    "tests/test_retrieval_models.py": 3,
    "tests/test_train_selection.py": 3,
    "tests/test_retrieval_losses_pml.py": 2,
    "tests/test_retrieval_budget.py": 2,
    "tests/test_synth_worlds.py": 2,
    "tests/test_tail_bound.py": 2,
}


def file_seconds(nodeid: str) -> int:
    """The recorded seconds of the file of a node id (``path::name[params]``); 0 if unlisted."""
    return FILE_SECONDS.get(node_file(nodeid), 0)
