"""Seconds per epoch: a listing-style training loop vs the project's trainer.

On a synthetic 64-feature cohort (3 classes) with 100,000 triplets, both train
SPHR with NPLB (Adam, lr 1e-3, margin 1) at batch 256 and 4096:

(a) listing-style, as the paper's listings suggest: a per-triplet torch
    ``Dataset`` returning the (a, p, n) rows, ``DataLoader(batch_size,
    shuffle=True)``, each batch copied to the device, three forward passes
    (one per role), ``nn.TripletMarginLoss`` + the regularizer, ``loss.item()``
    per batch;
(b) ``sphr.train.train_sphr`` at the paper profile: device-resident data,
    index-gathered batches, one forward pass, one host read per epoch (with
    ``--compile`` the whole step is one graph, ``sphr.train.fused``), with this machine's fastest
    native settings (``sphr.device.fast_settings``: bf16 where the hardware
    has it, torch.compile where kernels can be built; ``--precision`` /
    ``--compile`` override). The default fp32 eager trainer is timed too.

Each is warmed up for one epoch, then timed for ``--epochs`` epochs: both over the same
100,000 triplets per epoch; the paper profile's model selection (a validation pass per
epoch, which the listing lacks) is timed apart (``ours_validation_s_per_epoch_b*``). Also timed: the
network's matrix products alone at the same shapes (``matmul_floor_s_per_epoch_b*``), the
least time any fp32 loop needs, so ``max_fp32_speedup_b*`` = listing / floor bounds the
speedup an fp32 trainer can reach. Last line: one JSON object (device, s/epoch of each at
each batch size, speedups, floors).

On a CUDA device ``ours`` is the compiled step's epoch as CUDA graph replays
(``sphr.train.graph``; ``ours_cuda_graphs_b*`` says whether it captured), and the JSON adds
at batch 256: the per-batch fused step without graphs (``fused_nograph_s_per_epoch_b256``,
the 0.92 s of 2026-11-25), graphs of several steps (``graph_steps{4,16}_...``), stacks of
pure-loss models as one graph, K = 7 (seven losses/settings, seven seeds) and K = 14 (the
same on two data sets of one shape, the two sexes) with the K = 7 stack without graphs, the
cross-fit's five fold fits of one sex as one stack (``stacked_folds5_...``; each stack also
as a ratio to one model, ``..._over_one``),
the 7-loss comparison (its 3 pure losses captured, the other 4 eager; null without
pytorch-metric-learning), and the host synchronisations per epoch once the graphs are
captured (``graph_host_syncs_per_epoch_b256``, torch's sync debug mode; 1 is the epoch's
one read). ``--json-out FILE`` writes the JSON after each step, so a run cut short still
leaves what it measured.

    python benchmarks/train.py [--device auto|cpu|cuda] [--epochs 2] [--rows 20000]
        [--precision auto|fp32|bf16|tf32] [--compile auto|on|off] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from sphr.io import atomic_path


def synthetic(rows: int, n_triplets: int,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, rows)
    X = (rng.normal(size=(rows, 64)) + 0.4 * y[:, None] * rng.normal(size=64)).astype(np.float32)
    return X, sample_triplets(y, n_triplets, rng), y


def sample_triplets(y: np.ndarray, n_triplets: int, rng: np.random.Generator) -> np.ndarray:
    """Random (anchor, same-class positive, other-class negative) row triples."""
    rows = len(y)
    by = [np.flatnonzero(y == c) for c in range(3)]
    a = rng.integers(0, rows, n_triplets)
    p = np.empty_like(a)
    n = np.empty_like(a)
    for c in range(3):
        sel = np.flatnonzero(y[a] == c)
        p[sel] = rng.choice(by[c], len(sel))
        others = np.concatenate([by[k] for k in range(3) if k != c])
        n[sel] = rng.choice(others, len(sel))
    return np.stack([a, p, n], 1)


def fold_sets(X: np.ndarray, y: np.ndarray, n_triplets: int, folds: int = 5, seed: int = 0):
    """The cross-fit's training sets of one sex: fold k's fit sees every row outside fold k,
    with as many triplets as the profile mines (so the fold fits stack)."""
    from sphr.train import TrainData

    rng = np.random.default_rng(seed)
    fold = rng.permutation(len(X)) % folds
    out = []
    for k in range(folds):
        keep = fold != k
        out.append(TrainData(X[keep], sample_triplets(y[keep], n_triplets, rng), y[keep]))
    return out


class TripletRows(Dataset):
    """The listing's per-triplet dataset: one (anchor, positive, negative) row triple per item."""

    def __init__(self, X: np.ndarray, triplets: np.ndarray) -> None:
        self.X, self.T = X, triplets

    def __len__(self) -> int:
        return len(self.T)

    def __getitem__(self, i: int):
        a, p, n = self.T[i]
        return torch.from_numpy(self.X[a]), torch.from_numpy(self.X[p]), torch.from_numpy(self.X[n])


_TRIPLET = torch.nn.TripletMarginLoss(margin=1.0)


def listing_nplb(a, p, n):
    """The paper's Listing 1 with margin 1."""
    pn = torch.nn.functional.pairwise_distance(p, n, keepdim=True)
    an = torch.nn.functional.pairwise_distance(a, n, keepdim=True)
    return _TRIPLET(a, p, n) + torch.mean(torch.pow(pn - an, 2))


def listing_train(X, T, *, epochs: int, batch_size: int, device: torch.device, seed: int = 0,
                  time_from: int = 1) -> tuple[torch.nn.Module, list[float], float]:
    """Train listing-style; returns (model, loss curve, seconds per epoch after ``time_from``)."""
    from sphr.models import SPHRNet

    torch.manual_seed(seed)
    model = SPHRNet(X.shape[1]).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.95)
    loader = DataLoader(TripletRows(X, T), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    curve, times = [], []
    for _ in range(epochs):
        t0 = time.perf_counter()
        running, nb = 0.0, 0
        for a, p, n in loader:
            a, p, n = a.to(device), p.to(device), n.to(device)
            loss = listing_nplb(model(a), model(p), model(n))
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item()
            nb += 1
        sched.step()
        curve.append(running / nb)
        times.append(time.perf_counter() - t0)
    return model.eval(), curve, float(np.mean(times[time_from:] or times))


def paper_config(*, epochs: int, batch_size: int, device: str, seed: int = 0,
                 precision: str = "fp32", compile: bool = False, **more):
    from sphr.train import TrainConfig

    return dataclasses.replace(TrainConfig.profile("paper"), epochs=epochs,
                               batch_size=batch_size, device=device, seed=seed,
                               checkpoint_every=0, precision=precision, compile=compile, **more)


def ours_train(X, T, y, *, epochs: int, batch_size: int, device: str, seed: int = 0,
               precision: str = "fp32", compile: bool = False, on_epoch=None, **more):
    from sphr.train import train_sphr

    cfg = paper_config(epochs=epochs, batch_size=batch_size, device=device, seed=seed,
                       precision=precision, compile=compile, **more)
    t0 = time.perf_counter()
    res = train_sphr(X, T, cfg, labels=y, on_epoch=on_epoch)
    return res, time.perf_counter() - t0


def epoch_seconds(timings: dict) -> tuple[float, float]:
    """(training s/epoch, model selection's s/epoch) after the warm-up epoch.

    Training is the median of the trainer's own per-epoch clock over the 100,000 triplets,
    the work the listing does; model selection's validation pass (the paper profile's, which
    the listing lacks) is timed apart: whatever of ``train_s`` is not a training epoch,
    averaged over the epochs (its first call's one-off imports included)."""
    epochs = timings["epoch_s"]
    train = float(np.median(epochs[1:] if len(epochs) > 1 else epochs))
    validation = (timings["train_s"] - sum(epochs)) / len(epochs)
    return train, validation


def matmul_floor(n_features: int, batch_size: int, n_triplets: int, device: torch.device,
                 repeats: int = 3) -> float:
    """Seconds per epoch of the network's matrix products alone (no activation, dropout,
    loss, optimizer or gather): the forward products, the backward products for the
    weights and for the hidden layers' inputs, at the trainer's shapes. No fp32 trainer of
    this network can run an epoch faster on this machine, so ``listing / floor`` bounds the
    speedup any fp32 loop can reach over the listing."""
    from sphr.models import HIDDEN

    m = 3 * batch_size
    widths = [n_features, *HIDDEN, 32]
    g = torch.Generator(device=device).manual_seed(0)
    W = [torch.randn(i, o, generator=g, device=device) for i, o in itertools.pairwise(widths)]
    H = [torch.randn(m, w, generator=g, device=device) for w in widths]

    def step() -> None:
        for k, w in enumerate(W):
            H[k] @ w  # forward
            H[k].T @ H[k + 1]  # weight gradient
            if k:
                H[k + 1] @ w.T  # input gradient (not needed for the features)

    steps = -(-n_triplets // batch_size)
    for _ in range(20):
        step()
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t)
    return best


#: seven pure-loss models (the comparison's three pure losses at several settings), seeds 0-6
SEVEN = (("nplb", 1.0, 2), ("triplet", 0.5, 2), ("distance_swap", 1.0, 2), ("nplb", 1.0, 4),
         ("triplet", 1.0, 2), ("nplb", 2.0, 2), ("distance_swap", 0.5, 2))


def stack_seconds(results) -> float:
    """Training s/epoch of the stacks that trained ``results`` (one each, summed: a mixed
    stack on CUDA is a captured pure stack and an eager one)."""
    stacks = {(r.timings["models_in_stack"], r.timings["device_epoch"]): r for r in results}
    return sum(epoch_seconds(r.timings)[0] for r in stacks.values())


def host_syncs(X, T, y, *, epochs: int, device: str, precision: str) -> list[int]:
    """Device-to-host synchronisations per epoch of a graph run (torch's sync debug mode)."""
    import warnings

    counts: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            def on_epoch(epoch, values):
                counts.append(sum("synchronizing" in str(w.message) for w in caught))

            ours_train(X, T, y, epochs=epochs, batch_size=256, device=device,
                       precision=precision, compile=True, on_epoch=on_epoch)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return [b - a for a, b in itertools.pairwise([0, *counts])]


def cuda_extras(X, T, y, *, epochs: int, device: str, precision: str, emit,
                one: float) -> None:
    """The CUDA graph measurements at batch 256 (see the module docstring); ``emit(key,
    value)`` records each as it comes; ``one``: one model's s/epoch, for the stacks' ratios."""
    from sphr.train import COMPARISON_LOSSES, TrainData, train_jobs, train_many

    base = {"epochs": epochs, "batch_size": 256, "device": device, "precision": precision,
            "compile": True}
    # in order of what they decide, so a run cut short loses the least
    res, _ = ours_train(X, T, y, cuda_graphs="off", **base)
    emit("fused_nograph_s_per_epoch_b256", round(epoch_seconds(res.timings)[0], 4))
    # the cross-fit's five fold fits of one sex as one stack: what the main command trains
    # per sex on a GPU (sphr.train.run.train_folds packs them there)
    results = train_jobs([(d, paper_config(**base)) for d in fold_sets(X, y, len(T))])
    folds5 = stack_seconds(results)
    emit("stacked_folds5_graph_s_per_epoch_b256", round(folds5, 4))
    emit("stacked_folds5_cuda_graphs", all(r.timings["cuda_graphs"] for r in results))
    emit("stacked_folds5_over_one", round(folds5 / one, 2))
    seven = [paper_config(**base, loss=loss, margin=m, p=p, seed=i)
             for i, (loss, m, p) in enumerate(SEVEN)]
    first = TrainData(X, T, y)
    X2, T2, y2 = synthetic(len(X), len(T), seed=1)  # a second data set of the same shape
    for name, jobs in (("k7", [(first, c) for c in seven]),
                       ("k14", [(d, c) for d in (first, TrainData(X2, T2, y2)) for c in seven])):
        results = train_jobs(jobs)
        emit(f"stacked_{name}_graph_s_per_epoch_b256", round(stack_seconds(results), 4))
        emit(f"stacked_{name}_cuda_graphs", all(r.timings["cuda_graphs"] for r in results))
        emit(f"stacked_{name}_over_one", round(stack_seconds(results) / one, 2))
    emit("graph_host_syncs_per_epoch_b256",
         host_syncs(X, T, y, epochs=4, device=device, precision=precision))
    for steps in (4, 16):
        res, _ = ours_train(X, T, y, steps_per_graph=steps, **base)
        emit(f"graph_steps{steps}_s_per_epoch_b256", round(epoch_seconds(res.timings)[0], 4))
    results = train_jobs([(first, dataclasses.replace(c, cuda_graphs="off")) for c in seven])
    emit("stacked_k7_nograph_s_per_epoch_b256", round(stack_seconds(results), 4))
    try:
        import pytorch_metric_learning  # noqa: F401 - three of the seven losses need it
    except ImportError:
        emit("loss_comparison7_s_per_epoch_b256", None)
        return
    configs = [paper_config(**base, loss=loss) for loss in COMPARISON_LOSSES]
    emit("loss_comparison7_s_per_epoch_b256",
         round(stack_seconds(train_many(X, T, configs, labels=y)), 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (after 1 warm-up)")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--triplets", type=int, default=100_000)
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "tf32"),
                        help="the trainer's precision (auto: sphr.device.fast_settings)")
    parser.add_argument("--compile", default="auto", choices=("auto", "on", "off"))
    parser.add_argument("--json-out", default=None,
                        help="also write the JSON here, after each step")
    args = parser.parse_args()

    import os

    os.environ.setdefault("SPHR_PROGRESS", "0")
    from sphr.device import configure_threads, fast_settings, resolve_device

    device = resolve_device(args.device)
    threads = configure_threads(None)
    fast = fast_settings(device)
    precision = fast["precision"] if args.precision == "auto" else args.precision
    compiled = bool(fast["compile"]) if args.compile == "auto" else args.compile == "on"
    X, T, y = synthetic(args.rows, args.triplets)
    out: dict[str, object] = {"device": str(device) if device.type == "cpu"
                              else torch.cuda.get_device_name(device), "threads": threads,
                              "n_triplets": len(T), "n_features": X.shape[1],
                              "timed_epochs": args.epochs, "ours_precision": precision,
                              "ours_compile": compiled}

    def emit(key: str, value: object) -> None:
        out[key] = value
        print(f"{key}: {value}", file=sys.stderr, flush=True)
        if args.json_out:
            with atomic_path(args.json_out) as tmp, open(tmp, "w") as f:
                json.dump(out, f, indent=1)

    for bs in (256, 4096):
        # listing: warm-up epoch + timed epochs in one run
        _, _, listing = listing_train(X, T, epochs=args.epochs + 1, batch_size=bs, device=device)
        # ours: s/epoch excluding the first (warm-up) epoch, from the per-run timings
        res, _ = ours_train(X, T, y, epochs=args.epochs + 1, batch_size=bs, device=str(device),
                            precision=precision, compile=compiled)
        ours, validation = epoch_seconds(res.timings)
        out[f"ours_fused_step_b{bs}"] = res.timings["fused_step"]
        if device.type == "cuda":
            out[f"ours_cuda_graphs_b{bs}"] = res.timings["cuda_graphs"]
            out[f"ours_graph_failed_b{bs}"] = res.timings["graph_failed"]
        out[f"ours_validation_s_per_epoch_b{bs}"] = round(validation, 4)
        if (precision, compiled) != ("fp32", False):  # the defaults too, for the ratio
            plain, _ = ours_train(X, T, y, epochs=args.epochs + 1, batch_size=bs,
                                  device=str(device))
            out[f"ours_fp32_eager_s_per_epoch_b{bs}"] = round(epoch_seconds(plain.timings)[0], 4)
        out[f"listing_s_per_epoch_b{bs}"] = round(listing, 4)
        out[f"ours_s_per_epoch_b{bs}"] = round(ours, 4)
        out[f"speedup_ratio_b{bs}"] = round(listing / ours, 2)
        out[f"ours_1000_epochs_s_b{bs}"] = round(1000 * ours, 1)
        out[f"listing_1000_epochs_s_b{bs}"] = round(1000 * listing, 1)
        floor = matmul_floor(X.shape[1], bs, len(T), device)
        out[f"matmul_floor_s_per_epoch_b{bs}"] = round(floor, 4)
        emit(f"max_fp32_speedup_b{bs}", round(listing / floor, 2))  # and the file, so far
        print(f"batch {bs}: listing {listing:.3f} s/epoch, ours {ours:.3f} s/epoch "
              f"({listing / ours:.2f}x); model selection {validation:.3f} s/epoch",
              file=sys.stderr)
    from torch._dynamo.utils import counters  # eager Python inside a compiled step: on CUDA
    # a host read there breaks its capture

    emit("dynamo_graph_breaks", dict(counters["graph_break"]))
    if device.type == "cuda" and compiled:
        cuda_extras(X, T, y, epochs=args.epochs + 1, device=str(device), precision=precision,
                    emit=emit, one=float(out["ours_s_per_epoch_b256"]))
    out["dynamo_graph_breaks"] = dict(counters["graph_break"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
