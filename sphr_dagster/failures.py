"""Why a run failed, in one line per failed step, and where its full log is.

``python -m sphr_dagster run`` sends each materialization's console output (Dagster's event
log, tracebacks, the training subprocess's output) to a log file in the run directory
(:func:`log_to`), reads the failed steps back from the instance's event log
(:func:`step_failures`) and prints for each its reason: the library's own message for bad
input or settings (:class:`sphr.errors.SphrError`), else the error's type and message. A bad
input or setting exits 2, anything else 1, as the ``sphr`` commands do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sphr.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, SphrError

#: the run directory's folder of console logs, one file per materialization
LOG_DIR = "logs"
#: written when a run fails (its reasons), removed when the next run starts
FAILED_FILE = "run_failed.json"
#: Dagster's wrappers around the error an asset raised (the reason is their cause)
_WRAPPERS = ("DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError",
             "DagsterExecutionInterruptedError")


def _sphr_error_names() -> set[str]:
    names, todo = set(), [SphrError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo += cls.__subclasses__()
    return names


@dataclass(frozen=True)
class StepFailure:
    """One failed step of a run: the step, the error's class name and its message."""

    step: str
    error: str
    message: str

    @property
    def bad_input(self) -> bool:
        # a blocking asset check that failed stopped bad data, which is the input's fault
        return self.error in _sphr_error_names() or self.error == "DagsterAssetCheckFailedError"

    def line(self) -> str:
        if self.error in _sphr_error_names():
            return self.message
        return f"{self.error}: {self.message}"


def _root(error: Any) -> Any:
    """The error an asset raised, under Dagster's wrappers."""
    while error.cause is not None and error.cls_name in _WRAPPERS:
        error = error.cause
    return error


def _message(error: Any) -> str:
    text = (error.message or "").strip()
    # SerializableErrorInfo's message starts with the exception's qualified name
    head, sep, rest = text.partition(": ")
    if sep and head.rsplit(".", 1)[-1] == error.cls_name:
        text = rest
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def step_failures(instance: Any, run_id: str) -> list[StepFailure]:
    """The run's failed steps, in the order they failed."""
    import dagster as dg

    out = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = entry.dagster_event
        error = event.step_failure_data.error if event.step_failure_data else None
        if error is None:
            out.append(StepFailure(event.step_key or "?", "Error", "the step failed"))
            continue
        root = _root(error)
        out.append(StepFailure(event.step_key or "?", root.cls_name or "Error", _message(root)))
    return out


def failure_record(name: str, partition: str | None, run_id: str, log: str | None,
                   failures: list[StepFailure]) -> dict[str, Any]:
    """One failed run as ``RUN/run_failed.json`` lists it: what ran, where its log is, and
    each failed step's error and message."""
    return {"name": name, "partition": partition, "run_id": run_id, "log": log,
            "failures": [{"step": f.step, "error": f.error, "message": f.message}
                         for f in failures]}


def write_failed(path: Path, records: list[dict[str, Any]]) -> None:
    """The failed runs' records at ``path`` (atomically: a reader sees all or nothing)."""
    from sphr.io import write_json

    write_json({"failed": records}, path)


def exit_code(failures: list[StepFailure]) -> int:
    return EXIT_BAD_INPUT if failures and all(f.bad_input for f in failures) else EXIT_INTERNAL


@contextmanager
def log_to(path: str | Path | None) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so child processes and
    C libraries too) to ``path`` for the block; None: leave them on the terminal."""
    if path is None:
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
