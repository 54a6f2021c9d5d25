"""Quality is not traded for speed: fast trainer vs listing-style loop, same seed and epochs.

Both train SPHR with NPLB (ours with this machine's fast settings, as timed by
``benchmarks/train.py``) on one sex's synthetic cohort (the project's own
generator, built here unless ``--cohort`` points at a cohort folder), with the
same seeds, epochs and batch size. The test participants' embeddings of each go
through the evaluation protocol with XGBoost (5 seeded stratified splits, the
paper's settings). Last line: one JSON object with both weighted F1s per task
and their differences.

    python benchmarks/train_quality.py [--participants 20000] [--sex female]
        [--epochs 30] [--batch-size 256] [--seeds 0 1 2] [--cohort RUN/cohorts/female]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import listing_train  # the listing-style loop of benchmarks/train.py


def build_cohort(participants: int, seed: int, sex: str, work: Path) -> Path:
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.data.ingest import run_ingest
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import write_export

    export = write_export(generate_cohort(participants, seed=seed), work / "ukb.parquet", "parquet")
    run_ingest(export, work / "ingest")
    run_cohorts(work / "ingest" / "baseline.parquet", work / "cohorts", CohortConfig(seed=seed))
    return work / "cohorts" / sex


def quality_config(*, epochs: int, batch_size: int, device: str, seed: int,
                   fast: dict[str, object]):
    """The paper profile with this machine's fast settings, trained like the listing: every
    epoch on all the triplets. The paper profile's model selection (a validation share and
    early stopping, which the listing lacks) is off, so both see the same rows for the same
    number of epochs and only the trainer differs."""
    from sphr.train import TrainConfig

    return dataclasses.replace(TrainConfig.profile("paper"), epochs=epochs,
                               batch_size=batch_size, device=device, seed=seed,
                               checkpoint_every=0, validation_size=0.0, patience=None, **fast)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohort", type=Path, help="an existing RUN/cohorts/<sex> folder")
    parser.add_argument("--participants", type=int, default=20_000)
    parser.add_argument("--sex", default="female", choices=["female", "male"])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="training seeds; F1 is averaged over them")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    os.environ.setdefault("SPHR_PROGRESS", "0")

    from sphr.artifacts import load_cohort
    from sphr.device import configure_threads, fast_settings, resolve_device
    from sphr.evaluate.losses import load_triplets
    from sphr.evaluate.protocol import EvalConfig, classify_embeddings
    from sphr.train import embed, train_sphr

    device = resolve_device(args.device)
    configure_threads(None)
    with tempfile.TemporaryDirectory() as tmp:
        cohort_dir = args.cohort or build_cohort(args.participants, 0, args.sex, Path(tmp))
        cohort = load_cohort(cohort_dir)
        X, T = cohort.matrix("train"), load_triplets(cohort)
        X_test, y_test = cohort.matrix("test"), cohort.test["label"].to_numpy()

    fast = fast_settings(device)  # the fast path exactly as benchmarks/train.py times it
    embeddings: dict[str, np.ndarray] = {}
    seconds = {"listing": 0.0, "ours": 0.0}
    for seed in args.seeds:
        t0 = time.perf_counter()
        listing_model, _, _ = listing_train(X, T, epochs=args.epochs, batch_size=args.batch_size,
                                            device=device, seed=seed)
        seconds["listing"] += time.perf_counter() - t0
        cfg = quality_config(epochs=args.epochs, batch_size=args.batch_size,
                             device=str(device), seed=seed, fast=fast)
        t0 = time.perf_counter()
        ours = train_sphr(X, T, cfg)
        seconds["ours"] += time.perf_counter() - t0
        with torch.inference_mode():
            embeddings[f"listing/{seed}"] = listing_model.cpu()(torch.from_numpy(X_test)).numpy()
        embeddings[f"ours/{seed}"] = embed(ours.model, X_test, device="cpu")

    # every embedding on the same 5 evaluation splits
    result = classify_embeddings(embeddings, y_test, EvalConfig(classifiers=("xgboost",), seed=0))
    scores = result.scores.assign(method=result.scores["representation"].str.split("/").str[0])
    per_run = scores.groupby(["method", "representation", "task"])["weighted_f1"].mean()
    f1 = per_run.groupby(["method", "task"]).mean()
    out: dict[str, object] = {"device": str(device), "sex": cohort.sex,
                              "train_rows": len(X), "test_rows": len(X_test),
                              "n_triplets": len(T), "epochs": args.epochs, **{
                                  f"ours_{k}": v for k, v in fast.items()},
                              "batch_size": args.batch_size, "seeds": args.seeds,
                              "listing_train_s": round(seconds["listing"], 1),
                              "ours_train_s": round(seconds["ours"], 1)}
    for task in ("binary", "multi"):
        a, b = float(f1["listing", task]), float(f1["ours", task])
        out[f"listing_xgboost_weighted_f1_{task}"] = round(a, 4)
        out[f"ours_xgboost_weighted_f1_{task}"] = round(b, 4)
        out[f"abs_diff_{task}"] = round(abs(a - b), 4)
        for method in ("listing", "ours"):  # per training seed: how much a seed alone moves F1
            out[f"{method}_per_seed_{task}"] = [round(float(v), 4)
                                                for v in per_run[method].xs(task, level="task")]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
