"""Where a training epoch's time goes: the PyTorch profiler over one epoch of the trainer.

Trains the paper profile on ``benchmarks/train.py``'s synthetic cohort (64 features,
100,000 triplets) at batch 256 for four epochs and profiles the third, after the first
epoch's compile and graph capture. On CUDA that epoch is CUDA graph replays, and the
profiler still sees each kernel inside them. Prints the top operations and kernels by device
time, then one JSON object with the epoch's wall time, its steps, the kernels a step runs and
the device's busy time in them: ``kernel_s`` near ``epoch_s`` means the GPU is the bound, far
below it means launches or the host are.

``--stack`` instead profiles ``train.py``'s seven pure-loss models as one stack, the
cross-fit's five fold fits of one sex as one stack, and the first
of them alone, each trained twice in a row and profiled the second time (the in-process
compile cache then holds its step): kernels a step and seconds an
epoch of each, and their ratio, the stack's cost in one model's.

    python benchmarks/train_profile.py [--device cuda] [--compile on|off] [--trace FILE]
        [--stack [--epochs 3]] [--triplets 100000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import ours_train, synthetic  # the benchmark's own data and config

PROFILED_EPOCH = 3


def _activities(device: str) -> list:
    """What the profiler records: the device's kernels on CUDA, the host's ops elsewhere."""
    from torch.profiler import ProfilerActivity

    if device.startswith("cuda") and torch.cuda.is_available():
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    return [ProfilerActivity.CPU]


def _table(prof, activities: list, rows: int) -> str:
    """The top ``rows`` operations by their own time, on the device where it is recorded."""
    from torch.profiler import ProfilerActivity

    sort = ("self_device_time_total" if ProfilerActivity.CUDA in activities
            else "self_cpu_time_total")
    return prof.key_averages().table(sort_by=sort, row_limit=rows)


def _kernels(prof) -> list:
    """The profiled kernels (the profiler's step annotations carry device time too)."""
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.startswith("ProfilerStep")]


def stack_profile(args: argparse.Namespace, X, T, y) -> dict:
    """Seven pure-loss models as one stack against the first alone: kernels a step, seconds
    an epoch (the trainer's clock) and the ratios."""
    from torch.profiler import profile
    from train import SEVEN, fold_sets, paper_config

    from sphr.train import TrainData, train_jobs

    data = TrainData(X, T, y)
    base = {"epochs": args.epochs, "batch_size": args.batch_size, "device": args.device,
            "precision": args.precision, "compile": args.compile == "on"}
    seven = [(data, paper_config(**base, loss=loss, margin=m, p=p, seed=i))
             for i, (loss, m, p) in enumerate(SEVEN)]
    activities = _activities(args.device)[-1:]  # the device's own: no host-op overhead
    steps = args.epochs * -(-len(T) // args.batch_size)
    out: dict[str, object] = {"device": args.device, "epochs": args.epochs}
    folds5 = [(d, paper_config(**base)) for d in fold_sets(X, y, len(T))]
    for name, jobs in (("one", seven[:1]), ("stack7", seven), ("folds5", folds5)):
        train_jobs(jobs)  # compiles and warms up: the profiled run below reuses its steps
        with profile(activities=activities) as prof:
            results = train_jobs(jobs)
        epochs = results[0].timings["epoch_s"]
        out[f"{name}_s_per_epoch"] = round(float(np.median(epochs[1:] or epochs)), 4)
        out[f"{name}_kernels_per_step"] = round(len(_kernels(prof)) / steps, 1)
        out[f"{name}_cuda_graphs"] = results[0].timings.get("cuda_graphs")
        print(_table(prof, activities, 15), file=sys.stderr)
    for name in ("stack7", "folds5"):
        out[f"{name}_over_one"] = round(out[f"{name}_s_per_epoch"] / out["one_s_per_epoch"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compile", default="on", choices=("on", "off"))
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--trace", default=None, help="also write a Chrome trace here")
    parser.add_argument("--stack", action="store_true",
                        help="the seven-model stack against one model alone")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of each --stack run")
    parser.add_argument("--triplets", type=int, default=100_000)
    args = parser.parse_args()

    from torch._dynamo.utils import counters
    from torch.profiler import profile, schedule

    X, T, y = synthetic(20_000, args.triplets)
    if args.stack:
        print(json.dumps(stack_profile(args, X, T, y)))
        return
    activities = _activities(args.device)
    marks: dict[int, float] = {}
    # epoch k's callback is profiler step k: waits 1, warms 1, records the third epoch
    with profile(activities=activities,
                 schedule=schedule(wait=1, warmup=PROFILED_EPOCH - 2, active=1, repeat=1)) as prof:
        def on_epoch(epoch: int, values) -> None:
            marks[epoch] = time.perf_counter()
            prof.step()

        res, _ = ours_train(X, T, y, epochs=PROFILED_EPOCH + 1, batch_size=args.batch_size,
                            device=args.device, precision=args.precision,
                            compile=args.compile == "on", on_epoch=on_epoch)
    print(_table(prof, activities, 25), file=sys.stderr)
    if args.trace:
        prof.export_chrome_trace(args.trace)
    kernels = _kernels(prof)
    steps = -(-len(T) // args.batch_size)
    out = {
        "device": torch.cuda.get_device_name() if len(activities) > 1 else "cpu",
        "torch": torch.__version__,
        "compile": args.compile == "on", "precision": args.precision,
        "batch_size": args.batch_size, "steps_per_epoch": steps,
        "cuda_graphs": res.timings.get("cuda_graphs"),
        "epoch_s": round(marks[PROFILED_EPOCH] - marks[PROFILED_EPOCH - 1], 4),
        "trainer_epoch_s": [round(s, 4) for s in res.timings["epoch_s"]],
        "kernels_per_step": round(len(kernels) / steps, 1),
        "kernel_s": round(sum(e.device_time for e in kernels) / 1e6, 4),
        "graph_failed": res.timings.get("graph_failed"),
        "dynamo_graph_breaks": dict(counters["graph_break"]),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
