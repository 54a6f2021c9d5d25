"""``python -m pipeline run`` materializes everything in-process; ``python -m pipeline ui`` starts Dagster.

``run`` is the README's main command: the unpartitioned ingest assets once,
then every per-sex asset for each partition, then the cross-sex assets (risk
report, image retrieval), through the same Definitions the UI shows, on a
persistent DAGSTER_HOME, so the runs appear in the UI afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pipeline.home import PROJECT_ROOT, ensure_dagster_home


def _run_config(profile: str) -> dict:
    return {"ops": {
        "cohorts": {"config": {"profile": profile}},
        "sphr_training": {"config": {"profile": profile}},
        "evaluate__tables": {"config": {"loss_profile": profile}},
    }}


def run(args: argparse.Namespace) -> int:
    ensure_dagster_home()
    os.environ["SPHR_RUN_DIR"] = str(Path(args.run_dir).resolve())
    if args.export:
        os.environ["SPHR_EXPORT"] = str(Path(args.export).resolve())
    if args.device:
        os.environ["SPHR_DEVICE"] = args.device
    import dagster as dg

    from pipeline.definitions import ASSETS, CHECKS, CROSS_SEX_GROUPS, PER_SEX_GROUPS, defs
    from pipeline.resources import default_resources
    from sphr.labels import SEXES

    instance = dg.DagsterInstance.get()
    graph = defs.resolve_asset_graph()
    assets = [*ASSETS, *CHECKS]
    resources = default_resources(os.environ["SPHR_RUN_DIR"])
    stages: list[tuple[str, dg.AssetSelection, str | None]] = [
        ("export + ingest", dg.AssetSelection.groups("ingest"), None)]
    stages += [(f"{sex}: cohorts, training, baselines, evaluation, risk groups",
                dg.AssetSelection.groups(*PER_SEX_GROUPS), sex) for sex in SEXES]
    cross = [g for g in CROSS_SEX_GROUPS if args.retrieval or g != "retrieval"]
    if cross:
        stages.append((" + ".join(cross), dg.AssetSelection.groups(*cross), None))
    t_all = time.perf_counter()
    # the export's data version (content fingerprint) first, so what follows records it
    from assets.ingest import export_observation

    instance.report_runless_asset_event(export_observation(resources["data_source"],
                                                           resources["storage"]))
    for title, selection, partition in stages:
        keys = selection.resolve(graph)
        if not keys:
            continue
        t0 = time.perf_counter()
        print(f"== {title}", flush=True)
        config = _run_config(args.profile) if partition else {}
        # source assets (the observed export file) have no op to configure
        ops = {a.op.name for a in assets if isinstance(a, dg.AssetsDefinition) and a.keys & keys}
        config = {"ops": {k: v for k, v in config.get("ops", {}).items() if k in ops},
                  # Dagster's own step events are DEBUG; the assets' messages are INFO
                  "loggers": {"console": {"config": {"log_level": args.log_level}}}}
        result = dg.materialize(assets, selection=selection, partition_key=partition,
                                instance=instance, resources=resources, run_config=config,
                                raise_on_error=False, tags={"sphr/profile": args.profile})
        if not result.success:
            print(f"failed: {title} (run {result.run_id}); open the run in the UI "
                  "(`make ui`) to see the failing step and re-execute from failure",
                  file=sys.stderr)
            return 1
        print(f"   done in {time.perf_counter() - t0:.0f} s", flush=True)
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
    parser = argparse.ArgumentParser(prog="python -m pipeline")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="materialize every asset and partition in-process")
    p.add_argument("--profile", default="demo", choices=("demo", "paper"))
    p.add_argument("--run-dir", default=os.environ.get("SPHR_RUN_DIR", "runs/demo"))
    p.add_argument("--export", default=None, help="a UK Biobank export (default: synthetic cohort)")
    p.add_argument("--device", default=None, help="auto, cpu or cuda")
    p.add_argument("--log-level", default="INFO", help="Dagster console log level (DEBUG: every event)")
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
