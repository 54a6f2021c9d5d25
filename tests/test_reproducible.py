"""Same seed, same cohort, on every machine: frozen checks on values and across BLAS kernels.

The digests in ``tests/data/frozen_digests.json`` were written by ``python -m sphr.synth.frozen``
(docs/SYNTH.md, reproducibility). A change here changes every synthetic result, so it needs a
new generator version, not a new digest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sphr.synth.frozen import RTOL, compare_digests, export_digest, table_digest

DIGESTS = Path(__file__).parent / "data" / "frozen_digests.json"
#: OpenBLAS kernels the generator must agree under (Zen runs Haswell's kernels today; it is
#: named because a user's machine may pick it)
KERNELS = ("Haswell", "Zen", "SkylakeX")


def _frozen(key: str) -> dict:
    return json.loads(DIGESTS.read_text())[key]


def _explain(lines: list[str]) -> str:
    return f"{len(lines)} columns differ: " + "; ".join(lines[:10])


@pytest.mark.parametrize(("world", "seed"), [("linear", 0), ("nonlinear", 3)])
def test_the_synthetic_export_is_frozen(tmp_path, world, seed):
    # ``sphr synth --participants 2000`` (ukbconv, 40 decoys, linked records)
    from sphr.cli import main

    out = tmp_path / "ukb.csv"
    assert main(["-q", "synth", "--participants", "2000", "--seed", str(seed), "--world", world,
                 "--out", str(out)]) == 0
    differences = compare_digests(_frozen(f"export:{world}:{seed}"), export_digest(out))
    assert not differences, _explain(differences)


def test_clean_export_baseline_is_unchanged(ingest_dir):
    # the ``ingest_dir`` fixture: generate_cohort(2_000, seed=11), ukbconv, 25 decoys, ingested
    report = json.loads((ingest_dir / "ingest_report.json").read_text())
    assert report["implausible_values"] == {}
    base = pl.read_parquet(ingest_dir / "baseline.parquet")
    differences = compare_digests(_frozen("baseline:ingest_dir"), table_digest(base))
    assert not differences, _explain(differences)


# ---------------------------------------------------------------- the digest itself
def _frame(n: int = 300) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    x = rng.lognormal(1.0, 0.6, n)
    x[rng.random(n) < 0.1] = np.nan
    return pl.DataFrame({"eid": np.arange(1_000_000, 1_000_000 + n), "30690-0.0": x,
                         "53-0.0": [f"2008-01-{1 + i % 28:02d}" for i in range(n)]})


def _as_text(frame: pl.DataFrame, digits: int) -> pl.DataFrame:
    """The frame as an export holds it: text, floats printed with ``digits`` significant digits."""
    def show(v):
        if isinstance(v, float):
            return "" if np.isnan(v) else f"{v:.{digits}g}"
        return str(v)
    return pl.DataFrame({c: [show(v) for v in frame[c].to_list()] for c in frame.columns})


def test_digest_ignores_how_floats_are_printed_and_rounding_noise():
    frame = _frame()
    want = table_digest(_as_text(frame, 17))
    assert compare_digests(want, table_digest(_as_text(frame, 15))) == []
    noisy = frame.with_columns(pl.col("30690-0.0") * (1 + 1e-14))
    assert compare_digests(want, table_digest(_as_text(noisy, 17))) == []


def test_digest_names_the_column_a_real_change_moves():
    frame = _frame()
    want = table_digest(frame)
    x = frame["30690-0.0"].to_numpy().copy()
    i = int(np.flatnonzero(np.isfinite(x))[7])
    for changed in (x[i] * (1 + 1e-5), np.nan):
        y = x.copy()
        y[i] = changed
        lines = compare_digests(want, table_digest(frame.with_columns(pl.Series("30690-0.0", y))))
        assert len(lines) == 1 and lines[0].startswith("30690-0.0:"), lines
    dates = frame["53-0.0"].to_list()
    dates[3] = "2008-02-30"
    lines = compare_digests(want, table_digest(frame.with_columns(pl.Series("53-0.0", dates))))
    assert lines == ["53-0.0: other text values"]
    assert compare_digests(want, table_digest(frame.drop("eid"))) == ["eid: missing"]
    assert compare_digests(want, table_digest(frame.select(reversed(frame.columns)))) == [
        "columns in another order"]


def test_digest_is_the_same_for_a_csv_and_its_parquet(tmp_path):
    frame = _as_text(_frame(), 12)
    frame.write_csv(tmp_path / "a.csv")
    frame.write_parquet(tmp_path / "a.parquet")
    assert compare_digests(export_digest(tmp_path / "a.csv"),
                           export_digest(tmp_path / "a.parquet")) == []


# ---------------------------------------------------------------- across BLAS kernels
_DRAW = """
import sys
import numpy as np
from threadpoolctl import threadpool_info
from sphr.synth.cohort import generate_cohort
arch = {i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"}
print("ARCH", ",".join(sorted(a or "?" for a in arch)))
cohort = generate_cohort(1500, seed=0, world=sys.argv[2])
for name in ("visits", "truth", "linked"):
    getattr(cohort, name).to_parquet(f"{sys.argv[1]}/{name}.parquet")
"""


def _draw_under(kernel: str, out: Path, world: str) -> str | None:
    """Draw a cohort in a subprocess under ``kernel``; the kernel OpenBLAS ran, or None."""
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    env["OPENBLAS_CORETYPE"] = kernel
    done = subprocess.run([sys.executable, "-c", _DRAW, str(out), world], env=env,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:  # e.g. an illegal instruction: the CPU lacks the kernel's ISA
        return None
    arch = next(line.split(" ", 1)[1] for line in done.stdout.splitlines()
                if line.startswith("ARCH "))
    return arch


def _assert_same_cells(a: Path, b: Path, what: str) -> None:
    import pandas as pd

    for name in ("visits", "truth", "linked"):
        x, y = pd.read_parquet(a / f"{name}.parquet"), pd.read_parquet(b / f"{name}.parquet")
        assert list(x.columns) == list(y.columns) and len(x) == len(y), (what, name)
        for col in x.columns:
            u, v = x[col].to_numpy(), y[col].to_numpy()
            if u.dtype.kind == "f":
                assert np.array_equal(np.isnan(u), np.isnan(v)), (what, name, col)
                ok = np.isnan(u) | np.isclose(u, v, rtol=RTOL, atol=0.0)
                assert ok.all(), (what, name, col, np.nanmax(np.abs(u - v) / np.abs(u)))
            else:
                assert (pd.Series(u).fillna(-1) == pd.Series(v).fillna(-1)).all(), (
                    what, name, col)


@pytest.mark.slow
@pytest.mark.parametrize("world", ["linear", "nonlinear"])
def test_the_generator_draws_the_same_cohort_under_every_blas_kernel(tmp_path, world):
    ran: dict[str, Path] = {}
    unavailable = []
    for kernel in KERNELS:
        arch = _draw_under(kernel, tmp_path / kernel, world)
        # Zen is served by Haswell's kernels; any other answer means the CPU could not run it
        if arch is None or (arch != kernel and not (kernel == "Zen" and arch == "Haswell")):
            unavailable.append(f"{kernel} (ran {arch})")
            continue
        ran[kernel] = tmp_path / kernel
    if len(ran) < 2:
        pytest.skip(f"fewer than two OpenBLAS kernels run on this CPU: {unavailable}")
    first, *rest = ran
    for kernel in rest:
        _assert_same_cells(ran[first], ran[kernel], f"{first} vs {kernel}")
