"""The ``sphr`` command line. Each stage registers its own sub-command.

Stage modules import their heavy dependencies inside the command handler, so
``sphr --help`` stays fast and a GPU box without polars can still run
``sphr train``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from sphr import __version__
from sphr.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, SphrError

#: modules with a ``register(subparsers)`` function, in the order of the pipeline
COMMAND_MODULES: tuple[str, ...] = (
    "sphr.synth.commands",
    "sphr.data.commands",
    "sphr.cohorts.commands",
    "sphr.train.commands",
    "sphr.baselines.commands",
    "sphr.evaluate.commands",
    "sphr.risk.commands",
    "sphr.retrieval.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sphr",
        description="Similarity-based patient health-risk modeling on UK Biobank-style data.",
    )
    parser.add_argument("--version", action="version", version=f"sphr {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--verbose", action="store_true",
                        help="on an unexpected error, show the traceback here too")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


#: dependencies whose INFO lines say nothing about the run
QUIET_LOGGERS: tuple[str, ...] = ("numexpr", "numexpr.utils")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    # a dependency's start-up notes ("NumExpr defaulting to 2 threads") are not the run's
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if args.quiet:
        import os

        os.environ["SPHR_PROGRESS"] = "0"
    try:
        _read_settings_table(args)
        return int(args.func(args) or 0)
    except SphrError as exc:
        print(f"sphr {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        if exc.filename is None:  # not about a file the user named: an internal error
            return _internal_error(args, exc)
        # a path the user gave that cannot be read or written is bad input, said in one line
        print(f"sphr {args.command}: error: {exc.filename}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # any other error: one line, its traceback in a file
        return _internal_error(args, exc)


#: the traceback file of an unexpected error, in the command's output folder when it has one
ERROR_LOG = "sphr_error.log"


def _internal_error(args: argparse.Namespace, exc: BaseException) -> int:
    """An error the library did not expect: its type and message in one line, the traceback
    in :data:`ERROR_LOG` (the command's output folder, else the temporary folder), and on the
    terminal too with ``--verbose``."""
    import tempfile
    import traceback
    from pathlib import Path

    text = "".join(traceback.format_exception(exc))
    if args.verbose:
        print(text, file=sys.stderr, end="")
    folders = [getattr(args, name, None) for name in ("out", "run_dir")]
    folder = next((Path(f) for f in folders if f is not None and Path(f).is_dir()),
                  Path(tempfile.gettempdir()))
    log = folder / ERROR_LOG
    try:
        log.write_text(f"sphr {' '.join(sys.argv[1:])}\n{text}")
        where = f"traceback in {log}"
    except OSError:
        where = "run with --verbose for the traceback"
    message = " ".join(str(exc).split()) or "(no message)"
    print(f"sphr {args.command}: internal error: {type(exc).__name__}: {message} ({where})",
          file=sys.stderr)
    return EXIT_INTERNAL


def _read_settings_table(args: argparse.Namespace) -> None:
    """A command that reads a table of a settings file (``settings_table``, e.g. ``sphr score
    --config FILE``'s ``[score]``) gets its checked values as ``args.file_settings``: the
    settings package composes the stages, so the stage's command does not import it."""
    table = getattr(args, "settings_table", None)
    if table is None:
        return
    args.file_settings = {}
    if getattr(args, "config", None) is not None:
        from sphr.settings import command_table

        args.file_settings = command_table(args.config, table)


if __name__ == "__main__":
    sys.exit(main())
