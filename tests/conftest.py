"""Shared fixtures: small cohorts from the project's own synthetic generator."""

from __future__ import annotations

import os

import pytest
from compiled_setup import in_compiled_files, node_file
from work_order import file_seconds

os.environ.setdefault("SPHR_PROGRESS", "0")
# reports without their PDF copy unless a test reads it (tests/pdf_setup.py)
os.environ.setdefault("SPHR_PDF", "0")


def _share_the_cores() -> None:
    """Each pytest-xdist worker gets its share of the cores for torch's and the BLAS' thread
    pools. Left alone, each of ``-n 2``'s workers starts as many OpenMP threads as the box has
    cores, and on 2 cores the 4 threads wait on each other at every parallel op (measured:
    the risk, drift, evaluation, real-data and fields-CLI test files took 161 s with -n 2,
    140 s with one thread a worker). Set before torch and numpy load, as OpenMP reads it
    once; processes the tests start inherit it, and an explicit setting wins."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 0:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, share)


_share_the_cores()


@pytest.fixture(scope="session")
def synthetic_cohort():
    from sphr.synth.cohort import generate_cohort

    return generate_cohort(2_000, seed=11)


@pytest.fixture(scope="session")
def ukb_export(tmp_path_factory, synthetic_cohort):
    """A 2,000-participant legacy ukbconv CSV with decoy columns."""
    from sphr.synth.export import write_export

    path = tmp_path_factory.mktemp("export") / "ukb.csv"
    return write_export(synthetic_cohort, path, "ukbconv", decoys=25, seed=11)


@pytest.fixture(scope="session")
def ingest_dir(tmp_path_factory, ukb_export):
    from sphr.data.ingest import run_ingest

    out = tmp_path_factory.mktemp("ingest")
    run_ingest(ukb_export, out)
    return out


@pytest.fixture(scope="session")
def cohorts_dir(tmp_path_factory, ingest_dir):
    """Per-sex cohort folders (RUN/cohorts/<sex>) built from the 2,000-participant export,
    under the synthetic demo's protocol (complete cases, one split)."""
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.cohorts.config import PAPER_PROTOCOL

    out = tmp_path_factory.mktemp("cohorts")
    run_cohorts(ingest_dir / "baseline.parquet", out,
                CohortConfig(n_triplets=5_000, seed=11, **PAPER_PROTOCOL))
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The compiled tests (tests/compiled_setup.py) skipped without a C++ compiler; the order
    pytest-xdist hands out work in (below): the compiled tests' files first, then the other
    files longest first (tests/work_order.py), the unlisted ones with slow tests before the
    rest."""
    from sphr.device import cpu_compiler_found

    has_compiler = cpu_compiler_found()
    for item in items:
        if item.get_closest_marker("compiled"):
            if not in_compiled_files(item.nodeid):
                raise pytest.UsageError(f"{item.nodeid} is marked compiled: add its file to "
                                        "tests/compiled_setup.py's COMPILED_FILES")
            if not has_compiler:
                item.add_marker(pytest.mark.skip(
                    reason="torch.compile needs a C++ compiler on the CPU"))

    def rank(item: pytest.Item) -> tuple[int, int, int]:
        if in_compiled_files(item.nodeid):
            return (0, 0, 0)
        return (1, -file_seconds(item.nodeid), 0 if item.get_closest_marker("slow") else 1)

    items.sort(key=rank)  # stable: files of the same rank keep their order


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``-n``, one work unit per test file, handed out in collection order (above), with
    the compiled tests' files as one unit, first.

    - Per file: a file's module-scoped fixtures (a fitted risk run, a scored export) are built
      once, not once per worker (pytest-xdist's default spread the tests of a file over both
      workers: 56 s of duplicated set-up on 2 cores).
    - The compiled files together, first: one worker builds each compiled graph once, in
      order, and later tests take it from inductor's cache, while the other worker runs the
      slow files (pytest-xdist's ``--dist loadgroup`` would group by marker, but it cannot
      rename the tests it groups under pytest 9).
    An explicit ``--dist`` other than load keeps its own scheduling."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FilesCompiledFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "compiled" if in_compiled_files(nodeid) else node_file(nodeid)

    config.option.loadscopereorder = False  # keep the collection's order, not the largest first
    return FilesCompiledFirst(config, log)
