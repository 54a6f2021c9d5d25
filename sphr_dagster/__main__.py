"""``python -m sphr_dagster run`` (or ``sphr-pipeline run``) materializes everything in-process;
``config`` prints the run config of a settings file for the UI's launchpad; ``ui`` starts Dagster.

``run`` is the README's main command. Its settings come from the command line and a
settings file (``--config run.toml``, :mod:`sphr.settings`), resolved once: the first line
it prints says which profile and settings run, and ``RUN/run_settings.json`` records them
all. Then the export and its ingest; every per-sex asset for each partition and the
image-retrieval comparison, side by side in their own processes
(:mod:`sphr_dagster.runner`); then the cross-sex merges (evaluation tables and results
page, risk report). It goes through the same Definitions the UI shows, on a persistent
DAGSTER_HOME, so the runs appear in the UI afterwards.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sphr.errors import ConfigError
from sphr.profiles import PROFILES
from sphr.settings import EXPORT_PROFILE, RunOptions, RunSettings, resolve, write_run_settings
from sphr_dagster.home import PROJECT_ROOT, ensure_dagster_home

#: what the run prints at the end, when the run wrote it
OUTPUTS = (("risk report", "risk/report.html"), ("risk report PDF", "risk/report.pdf"),
           ("risk groups", "risk/risk_groups.csv"), ("results page", "evaluate/report.html"),
           ("result tables", "evaluate/tables.md"),
           ("retrieval", "retrieval/digits/comparison.md"),
           ("retrieval", "retrieval/forensic/comparison.md"))


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The run's settings: the library's defaults, the profile's, ``--config``'s, the flags."""
    return resolve(args.config, world=args.world, profile=args.profile, export=args.export,
                   outcomes=args.outcomes, ranges=args.ranges, run_dir=args.run_dir,
                   device=args.device, jobs=getattr(args, "jobs", None),
                   losses=args.losses, retrieval=args.retrieval,
                   log_level=getattr(args, "log_level", None))


def _stages(settings: RunSettings) -> list[tuple[str, list[tuple[object, str | None, str]]]]:
    """(title, [(selection, partition, name)]) in the order they run."""
    from sphr.labels import SEXES
    from sphr_dagster.definitions import CROSS_SEX, INGEST, LOSS_COMPARISON, PER_SEX, RETRIEVAL

    per_sex = PER_SEX if settings.losses else PER_SEX - LOSS_COMPARISON
    # the two sexes write disjoint folders and the retrieval comparison reads neither, so
    # they run side by side (--jobs at a time); the cross-sex merges come after them
    middle = [(per_sex, sex, sex) for sex in SEXES]
    if settings.retrieval:
        middle.append((RETRIEVAL, None, "retrieval"))
    title = (f"{' + '.join(SEXES)}: cohorts, training, baselines, evaluation, risk groups"
             + (" | image retrieval" if settings.retrieval else "")
             + f" ({min(settings.jobs, len(middle))} at a time)")
    return [("export + ingest", [(INGEST, None, "ingest")]), (title, middle),
            ("evaluation report + risk report", [(CROSS_SEX, None, "merge")])]


def announce(settings: RunSettings, command: list[str]) -> Path:
    """Say which profile and settings run (the run's first line) and record them all in
    ``RUN/run_settings.json`` before anything runs."""
    print(settings.summary(), flush=True)
    return write_run_settings(settings, settings.run_dir, command=command)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    announce(settings, args.command_line)
    ensure_dagster_home()
    import dagster as dg

    from sphr_dagster.assets.ingest import export_observation
    from sphr_dagster.resources import run_resources
    from sphr_dagster.runner import materialize_side_by_side

    t_all = time.perf_counter()
    # the export's data version (content fingerprint) first, so what follows records it
    resources = run_resources(settings)
    dg.DagsterInstance.get().report_runless_asset_event(
        export_observation(resources["data_source"], resources["storage"]))
    for title, tasks in _stages(settings):
        t0 = time.perf_counter()
        print(f"== {title}", flush=True)
        results = materialize_side_by_side(tasks, settings, workers=settings.jobs)
        for r in results:
            if not r.success:
                where = f" ({r.partition})" if r.partition else ""
                print(f"failed: {r.name}{where} (run {r.run_id}); open the run in the UI "
                      "(`make ui`) to see the failing step and re-execute from failure",
                      file=sys.stderr)
                return 1
        each = ", ".join(f"{r.name} {r.seconds:.0f} s" for r in results) \
            if len(results) > 1 else ""
        print(f"   done in {time.perf_counter() - t0:.0f} s" + (f" ({each})" if each else ""),
              flush=True)
    run_dir = Path(settings.run_dir)
    print(f"\nwhole pipeline: {time.perf_counter() - t_all:.0f} s, run directory {run_dir}")
    for label, rel in OUTPUTS:
        if (run_dir / rel).exists():
            print(f"{label:>14}: {run_dir / rel}")
    return 0


def config(args: argparse.Namespace) -> int:
    """Print the run config of these settings as launchpad YAML."""
    import yaml

    args.config = args.file or args.config
    try:
        settings = settings_from_args(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from sphr_dagster.config import PROFILE_TAG
    from sphr_dagster.run_config import job_run_config

    print(f"# {settings.summary()}\n# the {args.job} job's launchpad config; add the run tag "
          f"{PROFILE_TAG}: {settings.profile} so the reports name the profile")
    print(yaml.safe_dump(job_run_config(settings, args.job), sort_keys=False), end="")
    return 0


def ui(args: argparse.Namespace) -> int:
    import os

    home = ensure_dagster_home()
    print(f"DAGSTER_HOME={home}; open http://{args.host}:{args.port}", flush=True)
    cmd = [str(Path(sys.executable).with_name("dagster")), "dev", "-w",
           str(PROJECT_ROOT / "workspace.yaml"), "-h", args.host, "-p", str(args.port)]
    os.chdir(PROJECT_ROOT)
    os.execv(cmd[0], cmd)
    return 0


def _settings_options(p: argparse.ArgumentParser) -> None:
    """The options every settings-taking command shares; None: not given (the file's, then
    the default, applies)."""
    d = RunOptions()
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (TOML): [run], [synth], [ingest], [cohorts], [train], "
                   "[baselines], [evaluate], [risk], [retrieval]; the options here override it")
    p.add_argument("--export", default=None, metavar="FILE",
                   help="a UK Biobank export (default: the synthetic cohort)")
    p.add_argument("--outcomes", default=None, metavar="FILE",
                   help="JSON override of the outcome table and censoring dates, as `sphr ingest "
                   "--outcomes` (docs/OUTCOMES.md); set your release's censoring dates")
    p.add_argument("--ranges", default=None, metavar="FILE",
                   help="JSON override of the P0 clinical ranges, as `sphr cohorts --ranges` "
                   "(docs/METHODS.md)")
    p.add_argument("--profile", default=None, choices=PROFILES,
                   help=f"default: {EXPORT_PROFILE} with --export, demo without")
    p.add_argument("--run-dir", default=None, metavar="DIR", help=f"default: {d.run_dir}")
    p.add_argument("--device", default=None, help=f"auto, cpu or cuda (default: {d.device})")
    p.add_argument("--world", default=None, choices=("linear", "nonlinear"),
                   help="the synthetic cohort's world (docs/SYNTH.md; [synth] world)")
    p.add_argument("--losses", default=None, action=argparse.BooleanOptionalAction,
                   help="the 7-loss comparison (25-33 min per sex at the paper profile on a CPU); "
                   "default: on without --export, off with it")
    p.add_argument("--retrieval", default=None, action=argparse.BooleanOptionalAction,
                   help="the image-retrieval loss comparison; default: on without --export, "
                   "off with it")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sphr_dagster")
    sub = parser.add_subparsers(dest="command", required=True)
    d = RunOptions()
    p = sub.add_parser("run", help="materialize every asset and partition in-process")
    _settings_options(p)
    p.add_argument("--log-level", default=None,
                   help=f"Dagster console log level (DEBUG: every event; default {d.log_level})")
    p.add_argument("--jobs", type=int, default=None,
                   help="how many of the per-sex runs and the retrieval comparison run at the "
                   "same time, each in its own process (1: one after the other, in this one; "
                   f"default {d.jobs})")
    p.set_defaults(func=run)
    p = sub.add_parser("config", help="print the run config of these settings (launchpad YAML)")
    p.add_argument("file", nargs="?", type=Path, default=None,
                   help="settings file (TOML), the same as --config")
    _settings_options(p)
    p.add_argument("--job", default="sphr_pipeline",
                   help="the defined job whose ops to configure (default: %(default)s)")
    p.set_defaults(func=config)
    p = sub.add_parser("ui", help="start the Dagster UI (dagster dev)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.set_defaults(func=ui)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    # as the user typed it, for run_settings.json
    prog = Path(sys.argv[0]).name
    args.command_line = [*(["python", "-m", "sphr_dagster"] if prog in ("__main__.py", "-m")
                           or not prog.startswith("sphr") else [prog]), *argv]
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
