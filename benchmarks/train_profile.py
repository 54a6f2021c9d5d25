"""Where a training epoch's time goes: the PyTorch profiler over one epoch of the trainer.

Trains the paper profile on ``benchmarks/train.py``'s synthetic cohort (64 features,
100,000 triplets) at batch 256 for four epochs and profiles the third, after the first
epoch's compile and graph capture. On CUDA that epoch is CUDA graph replays, and the
profiler still sees each kernel inside them. Prints the top operations and kernels by device
time, then one JSON object with the epoch's wall time, its steps, the kernels a step runs and
the device's busy time in them: ``kernel_s`` near ``epoch_s`` means the GPU is the bound, far
below it means launches or the host are.

    python benchmarks/train_profile.py [--device cuda] [--compile on|off] [--trace FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import ours_train, synthetic  # the benchmark's own data and config

PROFILED_EPOCH = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compile", default="on", choices=("on", "off"))
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--trace", default=None, help="also write a Chrome trace here")
    args = parser.parse_args()

    from torch._dynamo.utils import counters
    from torch.profiler import ProfilerActivity, profile, schedule

    X, T, y = synthetic(20_000, 100_000)
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available() and args.device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
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
    events = prof.key_averages()
    sort = "self_device_time_total" if len(activities) > 1 else "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=25), file=sys.stderr)
    if args.trace:
        prof.export_chrome_trace(args.trace)
    # the step's own annotation carries the whole epoch's device time too: not a kernel
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith("ProfilerStep")]
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
