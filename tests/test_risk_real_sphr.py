"""The real training stage feeds the risk stage: SPHR trained by ``run_train`` at the demo
profile (tests/test_risk.py trains a smaller SPHREmbedding for speed)."""

from __future__ import annotations

from test_risk import _cli


def trained_risk_run(tmp_path, ingest_dir, cohorts_dir, methods):
    """RUN with the fixture's ingest and cohorts, SPHR trained for one epoch per sex by the
    real training stage, and ``sphr risk`` fitted with ``methods``."""
    from sphr.layout import train_dir
    from sphr.train import TrainConfig, run_train

    run = tmp_path / "run"
    (run / "ingest").mkdir(parents=True)
    for name in ("baseline.parquet", "followup.parquet", "ingest_report.json"):
        (run / "ingest" / name).symlink_to(ingest_dir / name)
    (run / "cohorts").symlink_to(cohorts_dir)
    for sex in ("female", "male"):
        run_train(cohorts_dir / sex, train_dir(run, sex),
                  TrainConfig.profile("demo", epochs=1, batch_size=512, device="cpu"))
    assert _cli(["risk", str(run), "--bootstrap", "20", "--methods", ",".join(methods)]) == 0
    return run


def test_risk_with_a_really_trained_sphr_model(tmp_path, ingest_dir, cohorts_dir):
    """The real training stage -> the risk stage: the risk model carries the trained network
    unchanged (the same file) and scores every participant with it."""
    import hashlib

    import numpy as np
    import pandas as pd

    from sphr.artifacts import load_cohort, read_embeddings
    from sphr.layout import train_dir
    from sphr.train import SPHREmbedding

    def sha256(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    run = trained_risk_run(tmp_path, ingest_dir, cohorts_dir, ("raw_euclidean", "sphr"))
    rows = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    for sex in ("female", "male"):
        trained = train_dir(run, sex) / "model.pt"
        kept = run / "risk" / "model" / sex / "sphr.pt"
        assert sha256(kept) == sha256(trained)
        sphr = rows[(rows["sex"] == sex) & (rows["method"] == "sphr")]
        raw = rows[(rows["sex"] == sex) & (rows["method"] == "raw_euclidean")]
        assert len(sphr) == len(raw) > 0 and np.isfinite(sphr["distance"]).all()
        # the SPHR distances are those of the trained network's space, not the raw one
        assert not np.allclose(np.sort(sphr["distance"]), np.sort(raw["distance"]))
        # and the kept file embeds the test participants as the training stage did
        _, Z_train_stage = read_embeddings(train_dir(run, sex) / "embeddings_test.parquet")
        Z = SPHREmbedding.load(kept, device="cpu").transform(
            load_cohort(cohorts_dir / sex).matrix("test"))
        np.testing.assert_allclose(Z, Z_train_stage, rtol=1e-5, atol=1e-6)
