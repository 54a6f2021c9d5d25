"""Shared fixtures: small cohorts from the project's own synthetic generator."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPHR_PROGRESS", "0")


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
    """Per-sex cohort folders (RUN/cohorts/<sex>) built from the 2,000-participant export."""
    from sphr.cohorts import CohortConfig, run_cohorts

    out = tmp_path_factory.mktemp("cohorts")
    run_cohorts(ingest_dir / "baseline.parquet", out, CohortConfig(n_triplets=5_000, seed=11))
    return out
