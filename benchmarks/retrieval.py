"""Image retrieval: training throughput and top-k retrieval time on the chosen device.

Training: images per second for the default backbone of a profile (``demo``:
the small CNN, D 128) at that profile's image size for a dataset (forensic: 64
px, grey), m-per-class batches of 128, train-time augmentation on the device,
one loss (AdaTriplet + AutoMargin by default), Adam; warm-up steps are not
timed; ``--code-bits 16 64`` adds the S-output code heads and their losses
(what OCAM's S-bit codes cost). Retrieval: top-k (k 10) for 10,000 query embeddings against 100,000
gallery embeddings, D = 128, by chunked matmul + topk
(``sphr.retrieval.metrics.knn``), median of a few repeats after a warm-up.
Last line: one JSON object with device, train_images_per_s, query_10k_vs_100k_s.

    python benchmarks/retrieval.py [--device auto] [--profile demo] [--dataset forensic]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_throughput(device, profile: str, dataset: str, loss_name: str, steps: int, warmup: int,
                     threads: int, code_bits: tuple[int, ...] = ()) -> dict:
    import numpy as np
    import torch

    from sphr.losses.registry import RETRIEVAL, build_loss
    from sphr.retrieval.backbones import build_model
    from sphr.retrieval.data.transforms import BatchTransform
    from sphr.retrieval.profiles import get_profile

    prof = get_profile(profile)
    size = int(prof.image_size.get(dataset, prof.image_size["manifest"]))
    native = {"digits": 8, "forensic": 64}.get(dataset, 280)
    channels = 1
    torch.manual_seed(0)
    model = build_model(prof.backbone, in_channels=channels, dim=prof.dim, width=prof.width,
                        code_bits=code_bits).to(device)
    loss = build_loss(loss_name, RETRIEVAL).to(device)
    code_losses = {b: build_loss(loss_name, RETRIEVAL).to(device) for b in code_bits}
    opt = torch.optim.Adam(model.parameters(), lr=prof.lr, weight_decay=prof.weight_decay)
    transform = BatchTransform(size, train=prof.augment)
    per_batch = prof.batch_size // prof.m_per_class
    labels = torch.as_tensor(np.repeat(np.arange(per_batch), prof.m_per_class), device=device)
    images = torch.randint(0, 256, (prof.batch_size, channels, native, native), dtype=torch.uint8)
    gen = torch.Generator(device=device).manual_seed(0)
    model.train()

    def step() -> None:
        x = transform(images.to(device, non_blocking=True), gen)
        if code_losses:
            emb, codes = model.forward_all(x)
            value = loss(emb, labels) + sum(c(codes[b], labels) for b, c in code_losses.items())
        else:
            value = loss(model(x), labels)
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()

    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    for _ in range(warmup):
        step()
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    seconds = time.perf_counter() - t
    return {"profile": profile, "dataset": dataset, "backbone": prof.backbone, "width": prof.width,
            "image_size": size, "batch_size": prof.batch_size, "loss": loss_name, "steps": steps,
            "code_bits": list(code_bits),
            "train_images_per_s": round(steps * prof.batch_size / seconds, 1), "threads": threads}


def query_time(device, n_query: int, n_gallery: int, dim: int, k: int, repeats: int) -> dict:
    import torch
    import torch.nn.functional as F

    from sphr.retrieval.metrics import knn

    gen = torch.Generator().manual_seed(0)
    q = F.normalize(torch.randn(n_query, dim, generator=gen), dim=1).to(device)
    g = F.normalize(torch.randn(n_gallery, dim, generator=gen), dim=1).to(device)
    knn(q[:1000], g, k)  # warm-up
    _sync(device)
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        _, idx = knn(q, g, k)
        _sync(device)
        runs.append(time.perf_counter() - t)
    assert idx.shape == (n_query, k)
    return {"queries": n_query, "gallery": n_gallery, "dim": dim, "k": k, "repeats": repeats,
            "query_runs_s": [round(r, 4) for r in runs],
            "query_10k_vs_100k_s": round(statistics.median(runs), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    parser.add_argument("--profile", default="demo")
    parser.add_argument("--dataset", default="forensic",
                        help="which of the profile's image sizes to use")
    parser.add_argument("--loss", default="adatriplet_automargin")
    parser.add_argument("--code-bits", type=int, nargs="*", default=[],
                        help="also train S-output code heads (OCAM's S-bit codes), e.g. 16 64")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--gallery", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: allowed cores)")
    args = parser.parse_args()

    import torch

    from sphr.device import configure_threads, resolve_device

    threads = configure_threads(args.threads)
    device = resolve_device(args.device)
    name = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"cpu ({threads} threads)")
    print(f"device: {name}", file=sys.stderr)
    train = train_throughput(device, args.profile, args.dataset, args.loss, args.steps, args.warmup,
                             threads, tuple(args.code_bits))
    print(f"train: {train}", file=sys.stderr)
    query = query_time(device, args.queries, args.gallery, args.dim, args.k, args.repeats)
    print(f"query: {query}", file=sys.stderr)
    print(json.dumps({"device": name, "train_images_per_s": train["train_images_per_s"],
                      "query_10k_vs_100k_s": query["query_10k_vs_100k_s"],
                      "train": train, "query": query, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
