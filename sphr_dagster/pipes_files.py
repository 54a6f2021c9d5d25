"""A Pipes message file read to its end: no fit's last message is lost.

Dagster's ``PipesFileMessageReader`` tails the file with ``dagster._utils.tail_file``: read a
line; at the end of the file, stop if the session has closed, else sleep and read again. A
fit that writes its last lines (its ``{"fit", "metadata"}`` message and ``closed``) and
exits in the moment between that empty read and the closed check loses them: the reader
stops without reading again, and the step says "finished without reporting". Under load
(many fits at once, issue 67's cluster lane) it happened. Here the closed flag is read
*before* each read, so the reader stops only after a read that began once the writer was
done has found nothing; a line is handed on only once its newline has arrived.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import Event
from typing import IO, TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from dagster._core.pipes.context import PipesMessageHandler


def drained_lines(stream: IO[str], should_stop: Callable[[], bool],
                  poll_s: float = 0.01) -> Iterator[str]:
    """Whole lines of a file another process appends to, until ``should_stop()`` and the
    file's end: everything written before the stop signal is yielded."""
    pending = ""
    while True:
        stopping = should_stop()
        chunk = stream.readline()
        if chunk:
            pending += chunk
            if pending.endswith("\n"):
                yield pending
                pending = ""
            continue
        if stopping:
            if pending.strip():
                yield pending
            return
        time.sleep(poll_s)


class DrainingFileMessageReader(dg.PipesFileMessageReader):
    """``dg.PipesFileMessageReader`` whose reader thread reads the file to its end
    (:func:`drained_lines`) once the session closes."""

    def _reader_thread(self, handler: PipesMessageHandler, is_resource_complete: Event
                       ) -> None:
        try:
            with open(self._path, encoding="utf-8") as stream:
                for line in drained_lines(stream, is_resource_complete.is_set):
                    handler.handle_message(json.loads(line))
        except BaseException:
            handler.report_pipes_framework_exception(
                f"{type(self).__name__} reader thread", sys.exc_info())
            raise


class DrainingTempFileMessageReader(dg.PipesMessageReader):
    """The local engine's reader: a :class:`DrainingFileMessageReader` on a file in a
    temporary folder (what ``dg.PipesTempFileMessageReader`` is to Dagster's)."""

    @contextmanager
    def read_messages(self, handler: PipesMessageHandler) -> Iterator[dict]:
        with tempfile.TemporaryDirectory(prefix="sphr-pipes-") as folder:
            reader = DrainingFileMessageReader(os.path.join(folder, "messages.jsonl"))
            with reader.read_messages(handler) as params:
                yield params

    def no_messages_debug_text(self) -> str:
        return "Attempted to read messages from a local temporary file."
