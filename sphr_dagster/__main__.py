"""``python -m sphr_dagster run`` materializes everything in-process; ``python -m sphr_dagster ui`` starts Dagster.

``run`` is the README's main command: the unpartitioned ingest assets once; then
every per-sex asset for each partition and the image-retrieval comparison, side by
side in their own processes (:mod:`sphr_dagster.runner`); then the cross-sex merges
(evaluation tables and results page, risk report). It goes through the same
Definitions the UI shows, on a persistent DAGSTER_HOME, so the runs appear in the
UI afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from sphr.profiles import DEFAULT_PROFILE, PROFILES
from sphr_dagster.home import PROJECT_ROOT, ensure_dagster_home

#: the training stage's 7-loss comparison: `--no-losses` leaves it out (and the loss table)
LOSS_COMPARISON = "train/loss_comparison"


def _run_config(profile: str, losses: bool = True) -> dict:
    ops: dict = {
        "cohorts": {"config": {"profile": profile}},
        "sphr_training": {"config": {"profile": profile}},
        "train__loss_comparison": {"config": {"profile": profile}},
    }
    if not losses:
        ops["evaluate__tables"] = {"config": {"losses": []}}
    return {"ops": ops}


def run(args: argparse.Namespace) -> int:
    ensure_dagster_home()
    os.environ["SPHR_RUN_DIR"] = str(Path(args.run_dir).resolve())
    if args.export:
        os.environ["SPHR_EXPORT"] = str(Path(args.export).resolve())
    if args.device:
        os.environ["SPHR_DEVICE"] = args.device
    if args.world:
        os.environ["SPHR_SYNTHETIC_WORLD"] = args.world
    import dagster as dg

    from sphr.labels import SEXES
    from sphr_dagster.definitions import CROSS_SEX_GROUPS, PER_SEX_GROUPS, STANDALONE_GROUPS
    from sphr_dagster.resources import default_resources
    from sphr_dagster.runner import materialize_side_by_side

    instance = dg.DagsterInstance.get()
    resources = default_resources(os.environ["SPHR_RUN_DIR"])
    # the two sexes write disjoint folders and the retrieval comparison reads neither, so
    # they run side by side (--jobs at a time); the cross-sex merges come after them
    middle: list[tuple[tuple[str, ...], str | None]] = [(PER_SEX_GROUPS, s) for s in SEXES]
    if args.retrieval:
        middle += [(STANDALONE_GROUPS, None)]
    stages = [("export + ingest", [(("ingest",), None)]),
              (f"{' + '.join(SEXES)}: cohorts, training, baselines, evaluation, risk groups"
               + (" | image retrieval" if args.retrieval else "")
               + f" ({min(args.jobs, len(middle))} at a time)", middle),
              (" + ".join(CROSS_SEX_GROUPS), [(CROSS_SEX_GROUPS, None)])]
    t_all = time.perf_counter()
    # the export's data version (content fingerprint) first, so what follows records it
    from sphr_dagster.assets.ingest import export_observation

    instance.report_runless_asset_event(export_observation(resources["data_source"],
                                                           resources["storage"]))
    kwargs = {"tags": {"sphr/profile": args.profile}, "log_level": args.log_level,
              "skip": () if args.losses else (LOSS_COMPARISON,)}
    for title, tasks in stages:
        t0 = time.perf_counter()
        print(f"== {title}", flush=True)
        results = materialize_side_by_side(tasks, workers=args.jobs,
                                           run_config=_run_config(args.profile, args.losses),
                                           **kwargs)
        for r in results:
            if not r.success:
                where = f" ({r.partition})" if r.partition else ""
                print(f"failed: {' + '.join(r.groups)}{where} (run {r.run_id}); open the run in "
                      "the UI (`make ui`) to see the failing step and re-execute from failure",
                      file=sys.stderr)
                return 1
        each = ", ".join(f"{r.partition or '+'.join(r.groups)} {r.seconds:.0f} s"
                         for r in results) if len(results) > 1 else ""
        print(f"   done in {time.perf_counter() - t0:.0f} s" + (f" ({each})" if each else ""),
              flush=True)
    run_dir = Path(os.environ["SPHR_RUN_DIR"])
    print(f"\nwhole pipeline: {time.perf_counter() - t_all:.0f} s, run directory {run_dir}")
    for label, rel in (("risk report", "risk/report.html"), ("risk report PDF", "risk/report.pdf"),
                       ("risk groups", "risk/risk_groups.csv"),
                       ("results page", "evaluate/report.html"),
                       ("result tables", "evaluate/tables.md"),
                       ("retrieval", "retrieval/digits/comparison.md"),
                       ("retrieval", "retrieval/forensic/comparison.md")):
        if (run_dir / rel).exists():
            print(f"{label:>14}: {run_dir / rel}")
    return 0


def ui(args: argparse.Namespace) -> int:
    home = ensure_dagster_home()
    print(f"DAGSTER_HOME={home}; open http://{args.host}:{args.port}", flush=True)
    cmd = [str(Path(sys.executable).with_name("dagster")), "dev", "-w",
           str(PROJECT_ROOT / "workspace.yaml"), "-h", args.host, "-p", str(args.port)]
    os.chdir(PROJECT_ROOT)
    os.execv(cmd[0], cmd)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sphr_dagster")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="materialize every asset and partition in-process")
    p.add_argument("--profile", default=DEFAULT_PROFILE, choices=PROFILES)
    p.add_argument("--run-dir", default=os.environ.get("SPHR_RUN_DIR", "runs/demo"))
    p.add_argument("--export", default=None, help="a UK Biobank export (default: synthetic cohort)")
    p.add_argument("--device", default=None, help="auto, cpu or cuda")
    p.add_argument("--world", default=None, choices=("linear", "nonlinear"),
                   help="the synthetic cohort's world (docs/SYNTH.md; default linear)")
    p.add_argument("--log-level", default="INFO", help="Dagster console log level (DEBUG: every event)")
    p.add_argument("--jobs", type=int, default=3,
                   help="how many of the per-sex runs and the retrieval comparison run at the "
                   "same time, each in its own process (1: one after the other, in this one)")
    p.add_argument("--no-losses", dest="losses", action="store_false",
                   help="skip the 7-loss comparison (hours per sex at the paper profile on a CPU)")
    p.add_argument("--no-retrieval", dest="retrieval", action="store_false",
                   help="skip the image-retrieval loss comparison")
    p.set_defaults(func=run)
    p = sub.add_parser("ui", help="start the Dagster UI (dagster dev)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.set_defaults(func=ui)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
