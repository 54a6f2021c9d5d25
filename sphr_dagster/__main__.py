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
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sphr.errors import ConfigError
from sphr.options import add_set_option
from sphr.profiles import PROFILES
from sphr.settings import (
    EXPORT_PROFILE,
    FIT_ENGINES,
    RunOptions,
    RunSettings,
    resolve,
    write_run_settings,
)
from sphr_dagster.failures import (
    EXIT_BAD_INPUT,
    FAILED_FILE,
    LOG_DIR,
    exit_code,
    failure_record,
    write_failed,
)
from sphr_dagster.home import PROJECT_ROOT, ensure_dagster_home

if TYPE_CHECKING:
    from sphr_dagster.runner import StageResult

#: what the run prints at the end, when the run wrote it
OUTPUTS = (("risk report", "risk/report.html"), ("risk report PDF", "risk/report.pdf"),
           ("risk groups", "risk/risk_groups.csv"), ("results page", "evaluate/report.html"),
           ("result tables", "evaluate/tables.md"),
           ("retrieval", "retrieval/digits/comparison.md"),
           ("retrieval", "retrieval/forensic/comparison.md"))


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The run's settings: the library's defaults, the profile's, ``--config``'s, the flags."""
    return resolve(args.config, world=args.world, overrides=getattr(args, "overrides", ()),
                   profile=args.profile, export=args.export,
                   outcomes=args.outcomes, ranges=args.ranges, run_dir=args.run_dir,
                   device=args.device, jobs=getattr(args, "jobs", None),
                   engine=args.engine, fit_cpus=args.fit_cpus, fit_gpus=args.fit_gpus,
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
    """Say which profile and settings run (the run's first line), record them all in
    ``RUN/run_settings.json`` before anything runs, and clear what a failed run before it
    left: its failure marker and logs."""
    print(settings.summary(), flush=True)
    run_dir = Path(settings.run_dir)
    (run_dir / FAILED_FILE).unlink(missing_ok=True)
    shutil.rmtree(run_dir / LOG_DIR, ignore_errors=True)
    return write_run_settings(settings, run_dir, command=command)


def check_before_running(settings: RunSettings) -> int | None:
    """The pre-flight (:mod:`sphr.settings.preflight`): None when it passes, else the exit
    code after one line per problem; nothing is written."""
    from sphr.settings.preflight import PreflightError, preflight

    t0 = time.perf_counter()
    try:
        preflight(settings)
    except PreflightError as err:
        print(settings.summary(), flush=True)
        for problem in err.problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"stopped before any fit ({time.perf_counter() - t0:.1f} s); nothing written",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    return None


def report_failures(failed: list[StageResult], run_dir: Path) -> int:
    """One line per failed step, where its log is, ``RUN/run_failed.json``; the exit code."""
    failures = [f for r in failed for f in r.failures]
    for r in failed:
        where = f"{r.name}{f' ({r.partition})' if r.partition and r.partition != r.name else ''}"
        for f in r.failures or ():
            print(f"failed: {where}, {f.step}: {f.line()}", file=sys.stderr)
        if not r.failures:
            print(f"failed: {where} (run {r.run_id})", file=sys.stderr)
        print(f"   full log: {r.log or 'above'}; run {r.run_id} in the UI "
              f"(`python -m sphr_dagster ui --run-dir {run_dir}`) can re-execute from the "
              "failure", file=sys.stderr)
    write_failed(run_dir / FAILED_FILE, [failure_record(r.name, r.partition, r.run_id, r.log,
                                                        list(r.failures or ()))
                                         for r in failed])
    return exit_code(failures)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stopped = check_before_running(settings)
    if stopped is not None:
        return stopped
    announce(settings, args.command_line)
    run_dir = Path(settings.run_dir)
    ensure_dagster_home(run_dir)
    import warnings

    import dagster as dg

    # a note to Dagster's developers (observable_source_asset is in beta), not to the user
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    from sphr_dagster.assets.ingest import export_observation
    from sphr_dagster.resources import run_resources
    from sphr_dagster.runner import materialize_side_by_side

    t_all = time.perf_counter()
    # the export's data version (content fingerprint) first, so what follows records it
    resources = run_resources(settings)
    dg.DagsterInstance.get().report_runless_asset_event(
        export_observation(resources["data_source"], resources["storage"]))
    log_dir = None if args.verbose else run_dir / LOG_DIR
    for title, tasks in _stages(settings):
        t0 = time.perf_counter()
        print(f"== {title}", flush=True)
        results = materialize_side_by_side(tasks, settings, workers=settings.jobs,
                                           log_dir=log_dir)
        failed = [r for r in results if not r.success]
        if failed:
            return report_failures(failed, run_dir)
        each = ", ".join(f"{r.name} {r.seconds:.0f} s" for r in results) \
            if len(results) > 1 else ""
        print(f"   done in {time.perf_counter() - t0:.0f} s" + (f" ({each})" if each else ""),
              flush=True)
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


#: seconds ``ui`` gives dagster dev to stop after Ctrl-C before it ends its processes
UI_STOP_SECONDS = 10


def _stop(process: subprocess.Popen) -> int:
    """Stop dagster dev and everything it started: SIGINT to its process group (its own clean
    shutdown), then, after :data:`UI_STOP_SECONDS`, SIGKILL to what is left of the group (its
    webserver, daemon and code servers may outlive it)."""
    import os
    import signal

    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=UI_STOP_SECONDS)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    return 0


def ui(args: argparse.Namespace) -> int:
    """dagster dev on the run directory's own history (``RUN/.dagster_home``) and resources
    (``SPHR_RUN_DIR``), in a process group of its own that Ctrl-C or SIGTERM stops whole."""
    import os
    import signal

    run_dir = Path(args.run_dir).resolve()
    home = ensure_dagster_home(run_dir)
    os.environ.setdefault("SPHR_RUN_DIR", str(run_dir))
    print(f"run directory {run_dir}, DAGSTER_HOME={home}; open http://{args.host}:{args.port}",
          flush=True)
    cmd = [str(Path(sys.executable).with_name("dagster")), "dev", "-w",
           str(PROJECT_ROOT / "workspace.yaml"), "-h", args.host, "-p", str(args.port)]
    process = subprocess.Popen(cmd, cwd=PROJECT_ROOT, start_new_session=True)

    def _on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGINT too: a shell starts a background command with SIGINT ignored, and Python then
    # leaves it ignored, so `kill -INT` (or a parent's Ctrl-C) would not stop the UI
    signal.signal(signal.SIGINT, _on_term)
    signal.signal(signal.SIGTERM, _on_term)
    try:
        return process.wait()
    except KeyboardInterrupt:
        return _stop(process)


def _settings_options(p: argparse.ArgumentParser) -> None:
    """The options every settings-taking command shares; None: not given (the file's, then
    the default, applies)."""
    d = RunOptions()
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (TOML): [run], [synth], [ingest], [cohorts], [train], "
                   "[baselines], [evaluate], [risk], [retrieval]; the options here override it")
    add_set_option(p, "set one key of a stage's table as --config's file would, over it "
                   "(e.g. --set train.epochs=200 --set cohorts.ranges.glucose.high=6.0; a value "
                   "reads as in TOML, null for unset); repeatable")
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
    p.add_argument("--engine", default=None, choices=FIT_ENGINES,
                   help="where the training fits run: local processes, a Ray cluster "
                   "(RAY_ADDRESS), a SLURM cluster (SLURM_CONF) or Kubernetes pods "
                   f"(docs/SCALE_OUT.md; default {d.engine})")
    p.add_argument("--fit-cpus", type=float, default=None, metavar="N",
                   help="CPUs each fit asks of the engine, its torch threads (default: one on "
                   "a cluster, a local fit the run's own)")
    p.add_argument("--fit-gpus", type=float, default=None, metavar="N",
                   help="GPUs each fit asks of the engine; a fraction on Ray (0.2: five fits "
                   "share one GPU)")
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
    p.add_argument("--verbose", action="store_true",
                   help="Dagster's log and every traceback on the terminal (default: in "
                   f"RUN/{LOG_DIR}/, one line per failure here)")
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
    p.add_argument("--run-dir", default=d.run_dir, metavar="DIR",
                   help="the run directory whose runs and outputs the UI shows (default: "
                   "%(default)s)")
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
