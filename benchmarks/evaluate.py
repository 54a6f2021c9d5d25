"""Downstream evaluation at UK Biobank scale on this machine.

1. ``evaluation_s``: the whole protocol (6 representations x 4 classifiers x
   2 tasks x 5 splits = 240 fits) on a 60,000-participant test partition, with
   the paper's settings (KNN k=50, LDA, NN for EHR 100 epochs, XGBoost exact).
   The representations are fitted first on a training partition (timed
   separately, ``representations_fit_s``). SPHR's column uses the trained model
   when ``sphr.train`` is importable and ``--sphr-epochs`` > 0, otherwise an
   untrained SPHR-shaped network as a stand-in (the classifiers' cost depends
   on the embedding's shape, not on how it was trained); ``sphr_source`` says which.
2. ``diffmap_fit_s``: DiffMap at 100,000 participants: the landmark fit plus
   the Nystroem extension to all 100,000 (``diffmap_landmark_fit_s`` and
   ``diffmap_extend_s`` split it).

Data: ``class_structured`` of benchmarks/class_structured.py (three classes, UKB-like
shares, 60 features). Last line: one JSON object.

    python benchmarks/evaluate.py [--test 60000] [--train 20000] [--diffmap-n 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _sphr_standin(X, n_out: int = 32, seed: int = 0):
    """An untrained network of SPHR's shape (docs/METHODS.md), seeded: an
    embedding of the right shape."""
    import torch

    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(X.shape[1], 512), torch.nn.PReLU(), torch.nn.Linear(512, 256),
        torch.nn.PReLU(), torch.nn.Linear(256, n_out), torch.nn.PReLU())
    with torch.no_grad():
        return net(torch.from_numpy(X)).numpy()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", type=int, default=60_000, help="test partition size")
    parser.add_argument("--train", type=int, default=20_000,
                        help="training partition the representations are fitted on")
    parser.add_argument("--features", type=int, default=60)
    parser.add_argument("--diffmap-n", type=int, default=100_000)
    parser.add_argument("--dp-epochs", type=int, default=30, help="DeepPatient epochs per layer")
    parser.add_argument("--sphr-epochs", type=int, default=0,
                        help="train SPHR (demo profile, this many epochs) instead of the stand-in")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--skip-evaluation", action="store_true")
    parser.add_argument("--skip-diffmap", action="store_true")
    return parser.parse_args()


def sphr_embedding(args: argparse.Namespace, Xtr, Xte, y) -> tuple[object, str]:
    """SPHR's test embedding and where it came from: trained (``--sphr-epochs`` > 0 and
    ``sphr.train`` importable) or the stand-in."""
    import numpy as np

    if args.sphr_epochs > 0:
        try:
            import dataclasses

            from sphr.cohorts.triplets import mine_triplets
            from sphr.train import TrainConfig, embed, train_sphr

            cfg = dataclasses.replace(TrainConfig.profile("demo"), epochs=args.sphr_epochs)
            trip = mine_triplets(y[:args.train], 100_000, seed=0)
            res = train_sphr(Xtr, trip, cfg, labels=y[:args.train])
            return (np.asarray(embed(res.model, Xte), dtype=np.float32),
                    f"sphr.train, demo profile, {args.sphr_epochs} epochs")
        except ImportError as exc:
            print(f"sphr.train unavailable ({exc}); using the stand-in", file=sys.stderr)
    return _sphr_standin(Xte), "stand-in (untrained SPHR-shaped network)"


def run_evaluation(args: argparse.Namespace, out: dict[str, object]) -> None:
    """Every representation fitted on the training partition, then the protocol on the test
    partition; the timings and settings go into ``out``."""
    from class_structured import class_structured

    from sphr.baselines import BASELINES, make_representation
    from sphr.evaluate.protocol import EvalConfig, classify_embeddings

    X, y = class_structured(args.train + args.test, args.features, seed=0)
    Xtr, Xte, yte = X[:args.train], X[args.train:], y[args.train:]
    emb, fit_s = {}, {}
    params = {"deep_patient": {"epochs": args.dp_epochs}}
    for name in BASELINES:
        t = time.perf_counter()
        model = make_representation(name, random_state=0, **params.get(name, {})).fit(Xtr)
        emb[name] = model.transform(Xte)
        fit_s[name] = round(time.perf_counter() - t, 2)
        print(f"{name}: fit + transform {fit_s[name]} s", file=sys.stderr)
    t = time.perf_counter()
    emb["sphr"], source = sphr_embedding(args, Xtr, Xte, y)
    fit_s["sphr"] = round(time.perf_counter() - t, 2)
    out["sphr_source"] = source
    out["representations_fit_s"] = fit_s

    t = time.perf_counter()
    res = classify_embeddings(emb, yte, EvalConfig(n_jobs=args.n_jobs))
    out["evaluation_s"] = round(time.perf_counter() - t, 1)
    out["fits"] = len(res.scores)
    per = res.scores.groupby("classifier")["fit_s"].sum().round(1).to_dict()
    out["fit_cpu_s_by_classifier"] = per  # summed over fits (they run in parallel)
    out["device"] = res.settings["device"]
    out["xgboost_tree_method"] = res.settings["classifiers"]["xgboost"]["tree_method"]
    print(f"evaluation: {out['evaluation_s']} s for {out['fits']} fits", file=sys.stderr)


def time_diffmap(args: argparse.Namespace, out: dict[str, object]) -> None:
    """DiffMap's landmark fit and Nystroem extension at ``--diffmap-n`` participants."""
    import numpy as np
    from class_structured import class_structured

    from sphr.baselines import make_representation

    Xd, _ = class_structured(args.diffmap_n, args.features, seed=1)
    dm = make_representation("diffmap", random_state=0)
    t = time.perf_counter()
    dm.fit(Xd)
    t_fit = time.perf_counter() - t
    Z = dm.transform(Xd)
    total = time.perf_counter() - t
    assert Z.shape == (args.diffmap_n, 32) and np.isfinite(Z).all()
    out.update(diffmap_participants=args.diffmap_n, diffmap_landmarks=dm.n_landmarks,
               diffmap_landmark_fit_s=round(t_fit, 1),
               diffmap_extend_s=round(total - t_fit, 1), diffmap_fit_s=round(total, 1))
    print(f"diffmap: {total:.1f} s at {args.diffmap_n}", file=sys.stderr)


def main() -> None:
    args = parse_args()
    os.environ.setdefault("SPHR_PROGRESS", "0")
    # the class-structured fixture lives beside this script, not in the library
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    from sphr.evaluate.protocol import available_cores

    out: dict[str, object] = {"cores": available_cores(), "test_participants": args.test,
                              "train_participants": args.train, "features": args.features}
    if not args.skip_evaluation:
        run_evaluation(args, out)
    if not args.skip_diffmap:
        time_diffmap(args, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
