"""Real clusters for the fit engines' tests (``make test-clusters``).

A test here runs only where its cluster is: ``SPHR_CLUSTERS`` names them (``ray,slurm``);
``make test-clusters`` starts the one-node SLURM cluster (``scripts/slurm_local.sh``) and
sets it; the Ray cluster (a head node with 2 CPUs, its raylet, GCS and workers in their own
processes, on 127.0.0.1; scripts/ray_local.sh) is started here and stopped after the
tests. Elsewhere each test skips with one line saying what is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("SPHR_PROGRESS", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def wanted(cluster: str) -> bool:
    return cluster in os.environ.get("SPHR_CLUSTERS", "").split(",")


@pytest.fixture(scope="session")
def ray_cluster():
    """The dashboard address of a local Ray cluster (2 CPUs) started for these tests
    (scripts/ray_local.sh) and stopped after them."""
    if not wanted("ray"):
        pytest.skip("SPHR_CLUSTERS does not name ray (make test-clusters starts it)")
    try:
        import dagster_ray  # noqa: F401
    except ImportError:
        pytest.fail("SPHR_CLUSTERS names ray but the ray extra is not installed: "
                    "pip install -e '.[ray]'")
    env = {**os.environ, "RAY_CLI": str(Path(sys.executable).with_name("ray"))}
    started = subprocess.run(["bash", str(SCRIPTS / "ray_local.sh"), "start", "2"], env=env,
                             capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        pytest.fail(f"the Ray cluster did not start: {started.stderr.strip()[-1500:]}")
    yield started.stdout.strip().splitlines()[-1].split("=", 1)[1]
    subprocess.run(["bash", str(SCRIPTS / "ray_local.sh"), "stop"], env=env,
                   capture_output=True, timeout=180)


@pytest.fixture(scope="session")
def slurm_cluster():
    """SLURM_CONF of the running one-node cluster (scripts/slurm_local.sh)."""
    if not wanted("slurm"):
        pytest.skip("SPHR_CLUSTERS does not name slurm (make test-clusters starts it)")
    # named in SPHR_CLUSTERS, the cluster must be there: a failure, not a skip
    if not shutil.which("sbatch") or not os.environ.get("SLURM_CONF"):
        pytest.fail("no SLURM cluster: sbatch or SLURM_CONF missing "
                    "(bash scripts/slurm_local.sh start)")
    answered = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=30)
    if answered.returncode != 0:
        pytest.fail(f"the SLURM cluster does not answer: {answered.stderr.strip()}")
    return os.environ["SLURM_CONF"]


@pytest.fixture(scope="session")
def fold_cohorts(tmp_path_factory):
    """A small synthetic cohort in 3 cross-fit folds (RUN/cohorts/<sex>)."""
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.data.ingest import run_ingest
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import write_export

    root = tmp_path_factory.mktemp("fold-cohorts")
    export = write_export(generate_cohort(1_500, seed=5), root / "ukb.csv", "ukbconv", seed=5)
    run_ingest(export, root / "ingest")
    run_cohorts(root / "ingest" / "baseline.parquet", root / "cohorts",
                CohortConfig(n_triplets=2_000, seed=5, folds=3, impute=False))
    return root / "cohorts"
