"""The losses as a distance and a reducer, composed, change no bit of today's numbers.

Two pins of the code before the composition (commit e4df0a8), both compared bit for bit
(``torch.equal`` on the raw bits, so NaN payloads and the sign of zero count too):

1. ``tests/data/losses_composition.npz``: every tabular loss of ``sphr.losses.LOSSES`` (value
   and gradients w.r.t. anchor, positive and negative; float32 and float64; B = 1 and 64;
   coinciding rows for the clamp / eps paths; with and without class labels), every
   retrieval loss of the registry, the distance helpers, and a short stacked training run
   of all seven losses (loss curves, validation losses, a SHA-256 of the weights). Recorded
   by running this file (``python tests/test_losses_composition.py``) on that commit; its
   ``train/`` entries were re-recorded when training's random streams became
   ``SeedSequence([seed, purpose])`` ones (commit 1088015, docs/REPRODUCIBILITY.md), from
   :func:`train_results` on that commit, the losses' entries left as they were. The
   float reductions' order depends on the CPU's vector width, so the file is compared where
   torch's version and CPU capability are the recording's, and skipped (saying so) elsewhere.
2. A frozen copy of that commit's tabular losses (``_Frozen*`` below, the code verbatim),
   run beside today's composed losses in one process: values, gradients, the compiled
   fused training step and a short training run, on any machine.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from compiled_setup import BATCH, FEATURES, PURE_THREE, ROWS, compiled
from torch import nn

FIXTURE = Path(__file__).parent / "data" / "losses_composition.npz"
RECORDED_ON = "e4df0a8"


# --------------------------------------------------------------------------- the frozen copy
# sphr/losses/{base,triplet,mdr,pml}.py at e4df0a8, code verbatim (docstrings cut). Do not edit:
# it is what the composed losses must equal.
_D2_EPS = 1e-12


def _frozen_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.pairwise_distance(x, y)


def _frozen_pairwise_distances(e: torch.Tensor) -> torch.Tensor:
    sq = (e * e).sum(-1)
    d2 = sq[..., :, None] + sq[..., None, :] - 2.0 * (e @ e.transpose(-1, -2))
    return torch.sqrt(torch.clamp(d2, min=_D2_EPS))


def _frozen_hinge(d_ap: torch.Tensor, d_an: torch.Tensor, margin: float) -> torch.Tensor:
    return torch.relu(d_ap - d_an + margin)


def _frozen_nplb_per_triplet(d_ap: torch.Tensor, d_an: torch.Tensor, d_pn: torch.Tensor,
                             margin: float, p: int, distance: Any = None) -> torch.Tensor:
    diff = (lambda x, y: x - y) if distance is None else distance.margin
    return torch.relu(diff(d_ap, d_an) + margin) + diff(d_pn, d_an).pow(p)


class _FrozenObjective(nn.Module):
    name: ClassVar[str] = ""
    uses_labels: ClassVar[bool] = False
    pure: ClassVar[bool] = False


class _FrozenTriplet(_FrozenObjective):
    name = "triplet"
    pure = True

    def __init__(self, margin: float = 1.0) -> None:
        super().__init__()
        self.margin = float(margin)

    def forward(self, anchor, positive, negative, labels=None):
        return _frozen_hinge(_frozen_distance(anchor, positive), _frozen_distance(anchor, negative),
                             self.margin).mean()


class _FrozenDistanceSwap(_FrozenTriplet):
    name = "distance_swap"

    def forward(self, anchor, positive, negative, labels=None):
        d_neg = torch.minimum(_frozen_distance(anchor, negative),
                              _frozen_distance(positive, negative))
        return _frozen_hinge(_frozen_distance(anchor, positive), d_neg, self.margin).mean()


class _FrozenNPLB(_FrozenTriplet):
    name = "nplb"

    def __init__(self, margin: float = 1.0, p: int = 2) -> None:
        super().__init__(margin)
        self.p = int(p)

    def forward(self, anchor, positive, negative, labels=None):
        d_ap, d_an, d_pn = (_frozen_distance(anchor, positive), _frozen_distance(anchor, negative),
                            _frozen_distance(positive, negative))
        return _frozen_nplb_per_triplet(d_ap, d_an, d_pn, self.margin, self.p).mean()


class _FrozenMDR(_FrozenObjective):
    name = "mdr"

    def __init__(self, margin: float = 1.0, weight: float = 0.6, level_reg: float = 0.01,
                 momentum: float = 0.9, levels: Sequence[float] = (-3.0, 0.0, 3.0),
                 scale_embeddings: bool = False) -> None:
        super().__init__()
        self.margin, self.weight, self.level_reg = float(margin), float(weight), float(level_reg)
        self.momentum, self.scale_embeddings = float(momentum), bool(scale_embeddings)
        self.levels = nn.Parameter(torch.tensor([float(x) for x in levels]))
        self.register_buffer("running_mean", torch.zeros(()))
        self.register_buffer("running_std", torch.ones(()))
        self.register_buffer("seen", torch.zeros(()))

    def _statistics(self, d):
        mean, std = d.mean().detach(), d.std(correction=0).detach()
        if self.training:
            m = self.momentum
            first = self.seen == 0
            with torch.no_grad():
                self.running_mean.copy_(
                    torch.where(first, mean, m * self.running_mean + (1 - m) * mean)
                )
                self.running_std.copy_(
                    torch.where(first, std, m * self.running_std + (1 - m) * std)
                )
                self.seen.fill_(1.0)
        return self.running_mean, self.running_std

    def regularizer(self, embeddings):
        d = torch.pdist(embeddings)
        mu, sigma = self._statistics(d)
        z = (d - mu) / sigma.clamp_min(1e-12)
        nearest = (z[:, None] - self.levels[None, :]).abs().min(dim=1).values
        return nearest.mean(), d

    def forward(self, anchor, positive, negative, labels=None):
        mdr, d = self.regularizer(torch.cat([anchor, positive, negative]))
        if self.scale_embeddings:
            scale = d.mean()
            anchor, positive, negative = anchor / scale, positive / scale, negative / scale
        trip = _frozen_hinge(_frozen_distance(anchor, positive), _frozen_distance(anchor, negative),
                             self.margin).mean()
        return trip + self.weight * mdr + self.level_reg * self.levels.pow(2).sum()


class _FrozenPMLLoss(_FrozenObjective):
    uses_labels = True

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, anchor, positive, negative, labels=None):
        b = anchor.shape[0]
        idx = torch.arange(b, device=anchor.device)
        if labels is None:
            lab = torch.cat([idx, idx, idx + b])
        else:
            lab = torch.cat([torch.as_tensor(x, device=anchor.device) for x in labels])
        emb = torch.cat([anchor, positive, negative])
        return self.inner(emb, lab, (idx, idx + b, idx + 2 * b))


class _FrozenNPair(_FrozenPMLLoss):
    name = "npair"
    uses_labels = False

    def __init__(self, l2_reg: float = 0.002) -> None:
        from pytorch_metric_learning import distances, losses, regularizers

        super().__init__(losses.NPairsLoss(
            distance=distances.DotProductSimilarity(normalize_embeddings=False),
            embedding_regularizer=regularizers.LpRegularizer(p=2, power=2) if l2_reg else None,
            embedding_reg_weight=float(l2_reg) if l2_reg else 1.0))


class _FrozenLiftedStruct(_FrozenPMLLoss):
    name = "lifted_struct"

    def __init__(self, margin: float = 1.0, pos_margin: float = 0.0) -> None:
        from pytorch_metric_learning import distances, losses

        super().__init__(losses.LiftedStructureLoss(
            neg_margin=float(margin), pos_margin=float(pos_margin),
            distance=distances.LpDistance(normalize_embeddings=False, p=2, power=1)))


class _FrozenInfoNCE(_FrozenPMLLoss):
    name = "infonce"

    def __init__(self, temperature: float = 0.07) -> None:
        from pytorch_metric_learning import distances, losses

        super().__init__(losses.NTXentLoss(temperature=float(temperature),
                                           distance=distances.CosineSimilarity()))


FROZEN: dict[str, type[nn.Module]] = {
    "triplet": _FrozenTriplet, "npair": _FrozenNPair, "lifted_struct": _FrozenLiftedStruct,
    "mdr": _FrozenMDR, "infonce": _FrozenInfoNCE, "distance_swap": _FrozenDistanceSwap,
    "nplb": _FrozenNPLB,
}


# --------------------------------------------------------------------------- the cases
#: (loss name, parameters): every loss at its defaults, and the parameters that change a path
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("triplet", {}), ("triplet", {"margin": 0.5}), ("distance_swap", {}), ("nplb", {}),
    ("nplb", {"p": 4, "margin": 0.5}), ("mdr", {}), ("mdr", {"scale_embeddings": True}),
    ("npair", {}), ("npair", {"l2_reg": 0.0}), ("lifted_struct", {}), ("infonce", {}),
)
DTYPES = {"f32": torch.float32, "f64": torch.float64}
BATCHES = ("b1", "b1_same", "b64")


def _variant_key(name: str, params: dict[str, Any]) -> str:
    return name + "".join(f",{k}={v}" for k, v in sorted(params.items()))


def triplet_batch(which: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Seeded (anchor, positive, negative); coinciding rows where ``which`` asks for them:
    d = 0 is where F.pairwise_distance's 1e-6, the Gram clamp and pdist's zero rule act."""
    b = 64 if which == "b64" else 1
    g = torch.Generator().manual_seed({"b1": 1, "b1_same": 2, "b64": 3}[which])
    a, p, n = (torch.randn(b, 8, generator=g, dtype=torch.float64).to(dtype) for _ in range(3))
    if which == "b1_same":
        p = a.clone()
    if which == "b64":
        p[0], n[1], n[2] = a[0], a[1], p[2]
        p[3], n[3] = a[3], a[3]  # a whole triplet at one point
        p[4:8] = n[4:8] = a[4:8] * 1.5  # positive and negative coincide, away from the anchor
    return a, p, n


def triplet_labels(b: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    la = torch.arange(b) % 3
    return la, la, (la + 1) % 3


def _grads(loss: nn.Module, batch: Sequence[torch.Tensor], labels: Any) -> dict[str, torch.Tensor]:
    a, p, n = (x.clone().requires_grad_(True) for x in batch)
    value = loss(a, p, n, labels)
    extra = [loss.levels] if isinstance(getattr(loss, "levels", None), torch.Tensor) else []
    grads = torch.autograd.grad(value, [a, p, n, *extra])
    out = {"value": value.detach(), "grad_a": grads[0], "grad_p": grads[1], "grad_n": grads[2]}
    if extra:
        out["grad_levels"] = grads[3]
    return out


def loss_results(make: Callable[..., nn.Module]) -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) for every variant, dtype, batch and labelling; ``make(name, **params)``
    builds the loss. MDR runs three batches (its running statistics), then one in eval mode."""
    for dname, dtype in DTYPES.items():
        for which in BATCHES:
            batch = triplet_batch(which, dtype)
            for name, params in VARIANTS:
                for labelled in (False, True):
                    if labelled and name not in ("npair", "lifted_struct", "infonce"):
                        continue
                    labels = triplet_labels(len(batch[0])) if labelled else None
                    key = f"loss/{dname}/{which}/{_variant_key(name, params)}/labels={labelled}"
                    loss = make(name, **params).to(dtype)
                    steps = ([batch, tuple(2 * x for x in batch), tuple(x.flip(0) for x in batch)]
                             if name == "mdr" else [batch])
                    for s, bt in enumerate(steps):
                        for k, v in _grads(loss, bt, labels).items():
                            yield f"{key}/step{s}/{k}", v
                    if name == "mdr":
                        yield f"{key}/running", torch.stack([loss.running_mean, loss.running_std])
                        with torch.no_grad():  # not around the yield: that would leak no_grad
                            value = loss.eval()(*batch)
                        yield f"{key}/eval", value


def distance_results(distance: Callable[..., torch.Tensor],
                     pairwise: Callable[..., torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """The row-wise distance and the (N, N) Gram-matrix distances, with their gradients."""
    for dname, dtype in DTYPES.items():
        a, p, _ = triplet_batch("b64", dtype)
        x, y = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
        d = distance(x, y)
        yield f"dist/{dname}/rowwise", d.detach()
        yield from zip((f"dist/{dname}/rowwise/gx", f"dist/{dname}/rowwise/gy"),
                       torch.autograd.grad(d.sum(), [x, y]), strict=True)
        e = torch.cat([a[:16], p[:16]]).requires_grad_(True)  # rows 0-7 hold the coincidences
        m = pairwise(e)
        yield f"dist/{dname}/matrix", m.detach()
        yield f"dist/{dname}/matrix/g", torch.autograd.grad((m * m.detach().cos()).sum(), e)[0]


def retrieval_batch(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """24 embeddings of 6 subjects (4 each); rows 1 and 2 repeat row 0 (a collapsed subject)."""
    g = torch.Generator().manual_seed(4)
    e = torch.randn(24, 8, generator=g, dtype=torch.float64).to(dtype)
    e[1] = e[2] = e[0]
    return e, torch.arange(24) // 4


def retrieval_results() -> Iterator[tuple[str, torch.Tensor]]:
    from sphr.losses.registry import RETRIEVAL, build_loss
    from sphr.retrieval.losses import LOSSES, pairwise_euclidean

    for dname, dtype in DTYPES.items():
        e, labels = retrieval_batch(dtype)
        for name in LOSSES:
            x = e.clone().requires_grad_(True)
            value = build_loss(name, RETRIEVAL)(x, labels)
            yield f"retrieval/{dname}/{name}/value", value.detach()
            yield f"retrieval/{dname}/{name}/grad", torch.autograd.grad(value, x)[0]
        x = e.clone().requires_grad_(True)
        m = pairwise_euclidean(x)
        yield f"retrieval/{dname}/pairwise_euclidean", m.detach()
        yield f"retrieval/{dname}/pairwise_euclidean/g", torch.autograd.grad(m.sum(), x)[0]


def train_data(m: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """240 rows of three classes, ``m`` triplets (600: tests/test_train.py's data)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, ROWS)
    X = (rng.normal(size=(ROWS, FEATURES)) + y[:, None]).astype(np.float32)
    by = [np.flatnonzero(y == c) for c in range(3)]
    a = rng.integers(0, ROWS, m)
    p = np.array([rng.choice(by[y[i]]) for i in a])
    neg = np.array([rng.choice(np.flatnonzero(y != y[i])) for i in a])
    return X, np.stack([a, p, neg], 1), y


def weights_digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def train_results(compile: bool = False, losses: Sequence[str] | None = None, m: int = 600
                  ) -> Iterator[tuple[str, Any]]:
    """A 3-epoch stack of every loss (with model selection: MDR's eval path): per loss its
    loss curve, validation losses and a digest of its weights."""
    from sphr.losses import LOSSES
    from sphr.train import TrainConfig, train_many

    X, T, y = train_data(m)
    names = list(LOSSES) if losses is None else list(losses)
    configs = [TrainConfig(loss=name, epochs=3, batch_size=128, device="cpu", threads=1,
                           checkpoint_every=0, validation_size=0.2, compile=compile)
               for name in names]
    for c, r in zip(configs, train_many(X, T, configs, labels=y, retire=False), strict=True):
        yield f"train/{c.loss}/curve", torch.tensor(r.loss_curve, dtype=torch.float64)
        val_loss = torch.tensor(r.validation["val_loss"], dtype=torch.float64)
        yield f"train/{c.loss}/val_loss", val_loss
        yield f"train/{c.loss}/weights", weights_digest(r.model)


def fingerprint() -> str:
    return f"torch {torch.__version__}, CPU {torch.backends.cpu.get_cpu_capability()}"


# --------------------------------------------------------------------------- comparisons
def bits_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Same dtype, shape and bits (NaN payloads and -0.0 included)."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    as_int = {torch.float32: torch.int32, torch.float64: torch.int64}[x.dtype]
    return torch.equal(x.contiguous().view(as_int), y.contiguous().view(as_int))


def _current(name: str, **params: Any) -> nn.Module:
    from sphr.losses import build_loss

    return build_loss(name, **params)


def _frozen(name: str, **params: Any) -> nn.Module:
    return FROZEN[name](**params)


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    if not FIXTURE.exists():
        pytest.fail(f"{FIXTURE} is missing: it is recorded on commit {RECORDED_ON}")
    with np.load(FIXTURE, allow_pickle=False) as f:
        data = {k: f[k] for k in f.files}
    # on another CPU or torch, float reductions may sum in another order: the recorded
    # values are then compared within a tolerance (close_enough) instead of bit for bit, so
    # the tests below still fail when a loss changes
    data["__exact__"] = str(data["__fingerprint__"]) == fingerprint()
    return data


#: (rtol, atol) of a value recorded on another CPU or torch, by dtype; a training curve's
#: three epochs of float32 steps may drift further than one reduction
TOLERANCE: dict[torch.dtype, tuple[float, float]] = {torch.float32: (1e-4, 1e-6),
                                                     torch.float64: (1e-9, 1e-12)}
TRAIN_TOLERANCE = (1e-3, 1e-6)


def close_enough(key: str, value: torch.Tensor, want: torch.Tensor) -> bool:
    """Same dtype and shape, NaN where the recording has NaN, the rest within TOLERANCE."""
    if value.dtype != want.dtype or value.shape != want.shape:
        return False
    rtol, atol = TRAIN_TOLERANCE if key.startswith("train/") else TOLERANCE[value.dtype]
    return torch.allclose(value, want, rtol=rtol, atol=atol, equal_nan=True)


def _check_recorded(recorded: dict[str, Any], results: Iterator[tuple[str, Any]]) -> int:
    n = 0
    for key, value in results:
        want = recorded[key]
        if isinstance(value, str):
            # a digest of the weights' bits: comparable only where the bits are
            if recorded["__exact__"]:
                assert value == str(want), key
        elif recorded["__exact__"]:
            assert bits_equal(value, torch.from_numpy(want)), key
        else:
            assert close_enough(key, value, torch.from_numpy(want)), key
        n += 1
    return n


def test_the_tabular_losses_give_the_recorded_bits(recorded):
    n = _check_recorded(recorded, loss_results(_current))
    assert n == sum(1 for k in recorded if k.startswith("loss/"))


def test_the_distance_helpers_give_the_recorded_bits(recorded):
    from sphr.losses import distance, pairwise_distances

    assert _check_recorded(recorded, distance_results(distance, pairwise_distances)) == 10


def test_the_retrieval_losses_give_the_recorded_bits(recorded):
    n = _check_recorded(recorded, retrieval_results())
    assert n == sum(1 for k in recorded if k.startswith("retrieval/"))


def test_a_short_training_run_gives_the_recorded_curves_and_weights(recorded):
    assert _check_recorded(recorded, train_results()) == 21


def test_the_frozen_copy_is_the_recorded_code(recorded):
    """The frozen copy below reproduces the recording: it is the code the file was made with."""
    n = _check_recorded(recorded, loss_results(_frozen))
    assert n == sum(1 for k in recorded if k.startswith("loss/"))
    assert (
        _check_recorded(recorded, distance_results(_frozen_distance, _frozen_pairwise_distances))
        == 10
    )


def _same_results(ours: Iterator[tuple[str, Any]], theirs: Iterator[tuple[str, Any]]) -> int:
    n = 0
    for (k1, v1), (k2, v2) in zip(ours, theirs, strict=True):
        assert k1 == k2
        assert (v1 == v2) if isinstance(v1, str) else bits_equal(v1, v2), k1
        n += 1
    return n


def test_the_composed_losses_equal_the_frozen_copy():
    assert _same_results(loss_results(_current), loss_results(_frozen)) > 500


def test_the_distance_helpers_equal_the_frozen_copy():
    from sphr.losses import distance, pairwise_distances

    assert _same_results(distance_results(distance, pairwise_distances),
                         distance_results(_frozen_distance, _frozen_pairwise_distances)) == 10


def _frozen_make_loss(cfg: Any) -> nn.Module:
    """sphr.train.trainer.make_loss at e4df0a8, building the frozen copy."""
    import inspect

    cls = FROZEN[cfg.loss]
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    params = {k: v for k, v in (("margin", cfg.margin), ("p", cfg.p)) if k in accepted}
    return cls(**{**params, **dict(cfg.loss_params)})


def test_a_short_training_run_equals_the_frozen_copys(monkeypatch):
    """Eager steps, the validation losses (MDR in eval mode) and the kept weights."""
    ours = list(train_results())
    monkeypatch.setattr("sphr.train.trainer.make_loss", _frozen_make_loss)
    assert _same_results(iter(ours), train_results()) == 21


@compiled
def test_the_compiled_fused_training_equals_the_frozen_copys(monkeypatch):
    """The pure losses take the fused step (sphr.train.fused): one graph for forward, loss,
    gradients and Adam. Composed, they must trace to the same numbers."""
    pure = [name for name, _ in PURE_THREE]  # the step other tests compile (compiled_setup)
    assert all(_current(name).pure for name in pure)
    # 640 triplets (the validation split keeps their number): 5 whole batches of 128, so
    # each step is compiled for one batch shape (a short last batch doubled the compiles
    # from a cold cache; the compiled short batch is tests/test_train_graph.py's)
    ours = list(train_results(compile=True, losses=pure, m=5 * BATCH))
    monkeypatch.setattr("sphr.train.trainer.make_loss", _frozen_make_loss)
    assert _same_results(iter(ours), train_results(compile=True, losses=pure, m=5 * BATCH)) == 9


@compiled
def test_one_fused_step_equals_the_frozen_copys_bit_for_bit():
    """FusedStep itself, with coinciding rows in the batch (bf16 autocast ends before the
    losses, which always see float32: sphr.train.fused)."""
    from sphr.losses import BatchObjective
    from sphr.train.fused import FusedStep
    from sphr.train.stacked import init_model, stack_params

    torch.manual_seed(0)
    X = torch.randn(ROWS, FEATURES)
    X[1] = X[0]  # rows 0 and 1 coincide: below, every model has a triplet with d(a, p) = 0
    rows = torch.randint(0, ROWS, (3, 3 * BATCH), generator=torch.Generator().manual_seed(3))
    rows[:, 0], rows[:, BATCH] = 0, 1
    keys = torch.tensor([5, 6, 7], dtype=torch.int32)
    specs = PURE_THREE  # the step other tests compile (compiled_setup)
    out = []
    for make in (_current, _frozen):
        params = stack_params([init_model(FEATURES, s) for s in range(3)], torch.device("cpu"))
        opt = torch.optim.Adam(params, lr=1e-2)
        objective = BatchObjective([make(n, **kw) for n, kw in specs])
        step = FusedStep(params, opt, objective, dropout=0.1, bf16=False)
        values = [step(X, rows, keys) for _ in range(2)]
        out.append((values, [p.detach().clone() for p in params]))
    (v1, p1), (v2, p2) = out
    assert all(bits_equal(a, b) for a, b in zip(v1, v2, strict=True))
    assert all(bits_equal(a, b) for a, b in zip(p1, p2, strict=True))


# --------------------------------------------------------------------------- the composition
def _d(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(x - y, dim=1)


def _cos(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(x, y, eps=0.0)


def test_every_loss_takes_a_distance_and_a_reducer():
    from sphr.losses import LOSSES, Euclidean, Mean, build_loss, loss_parameters

    for name in LOSSES:
        assert {"distance", "reducer"} <= loss_parameters(name), name
        loss = build_loss(name)
        assert callable(loss.distance) and callable(loss.reducer), name
    triplet = build_loss("triplet")
    assert isinstance(triplet.distance, Euclidean) and isinstance(triplet.reducer, Mean)


def test_a_similarity_flips_the_differences_and_normalizes():
    """CosineSimilarity: the triplet hinge is [s(a,n) - s(a,p) + m]_+ on unit vectors, the swap
    takes the larger similarity, and NPLB's regularizer is (s(a,n) - s(p,n))^p."""
    from pytorch_metric_learning.distances import CosineSimilarity

    from sphr.losses import NPLB, DistanceSwap, Triplet

    a, p, n = (3 * x for x in triplet_batch("b64", torch.float64))
    a, p, n = a[8:], p[8:], n[8:]  # no coinciding rows: the cosine is defined everywhere
    s_ap, s_an, s_pn = _cos(a, p), _cos(a, n), _cos(p, n)
    cos = CosineSimilarity()
    want = torch.relu(s_an - s_ap + 0.3).mean()
    assert torch.allclose(Triplet(0.3, distance=cos)(a, p, n), want, rtol=1e-12)
    want = torch.relu(torch.maximum(s_an, s_pn) - s_ap + 0.3).mean()
    assert torch.allclose(DistanceSwap(0.3, distance=cos)(a, p, n), want, rtol=1e-12)
    want = (torch.relu(s_an - s_ap + 0.3) + (s_an - s_pn) ** 2).mean()
    assert torch.allclose(NPLB(0.3, distance=cos)(a, p, n), want, rtol=1e-12)


def test_pml_distances_and_powers_in_the_tabular_losses():
    from pytorch_metric_learning.distances import LpDistance

    from sphr.losses import MDR, NPLB, Triplet

    a, p, n = triplet_batch("b64", torch.float64)
    lp = LpDistance(normalize_embeddings=False)
    # PML's LpDistance row-wise is F.pairwise_distance too: the same bits as the default
    assert bits_equal(Triplet(distance=lp)(a, p, n), Triplet()(a, p, n))
    squared = LpDistance(normalize_embeddings=False, power=2)
    want = (
        torch.relu(_d(a, p) ** 2 - _d(a, n) ** 2 + 1.0) + (_d(p, n) ** 2 - _d(a, n) ** 2) ** 2
    ).mean()
    assert torch.allclose(NPLB(distance=squared)(a, p, n), want, rtol=1e-5)
    # MDR's pairs from a distance without `condensed`: its (N, N) matrix (torch.cdist), i < j
    ours, theirs = MDR(), MDR(distance=lp)
    assert torch.allclose(theirs.double()(a, p, n), ours.double()(a, p, n), rtol=1e-6)
    assert torch.allclose(theirs.running_mean, ours.running_mean, rtol=1e-9)


def test_a_pml_reducer_gets_the_loss_dict():
    """AvgNonZeroReducer (PML's TripletMarginLoss default): the mean over the triplets with a
    loss > 0; it is not a plain tensor function, so the loss leaves the fused path."""
    from pytorch_metric_learning.reducers import AvgNonZeroReducer, MeanReducer

    from sphr.losses import Mean, Triplet
    from sphr.train.fused import supports

    a, p, n = triplet_batch("b64", torch.float64)
    per = torch.relu(_d(a, p) - _d(a, n) + 0.2)
    assert 0 < int((per > 0).sum()) < len(per)  # some triplets are easy: the reducers differ
    nonzero = Triplet(0.2, reducer=AvgNonZeroReducer())
    assert torch.allclose(nonzero(a, p, n), per[per > 0].mean(), rtol=1e-6)
    assert bits_equal(Triplet(0.2, reducer=MeanReducer())(a, p, n), Triplet(0.2)(a, p, n))
    assert Triplet().pure and not nonzero.pure and not Triplet(reducer=MeanReducer()).pure
    assert supports([Triplet()]) and not supports([nonzero])
    losses = torch.tensor([1.0, 2.0, 6.0])
    assert (
        float(Mean()({"loss": {"losses": losses, "indices": None, "reduction_type": "triplet"}}))
        == 3.0
    )


def test_pml_backed_losses_pass_their_parts_to_the_library():
    from pytorch_metric_learning.distances import CosineSimilarity, DotProductSimilarity
    from pytorch_metric_learning.reducers import SumReducer

    from sphr.losses import build_loss

    a, p, n = triplet_batch("b64", torch.float32)
    npair = build_loss("npair")
    assert isinstance(npair.distance, DotProductSimilarity)
    assert npair.distance is npair.inner.distance
    summed = build_loss("lifted_struct", reducer=SumReducer())
    assert isinstance(summed.reducer, SumReducer)
    ratio = float(summed(a, p, n)) / float(build_loss("lifted_struct")(a, p, n))
    assert ratio > 1.5  # a sum over the per-anchor terms, not their mean
    cosine = build_loss("npair", distance=CosineSimilarity())
    assert cosine.hparams()["distance"] == "CosineSimilarity"
    assert not torch.isclose(cosine(a, p, n), npair(a, p, n))


@pytest.mark.parametrize("name", ["triplet", "mdr", "nplb", "infonce"])
def test_a_name_is_not_a_distance(name):
    from sphr.errors import ConfigError
    from sphr.losses import build_loss

    with pytest.raises(ConfigError, match="distance object"):
        build_loss(name, distance="cosine")
    with pytest.raises(ConfigError, match="reducer object"):
        build_loss(name, reducer="mean")


def test_the_euclidean_matrix_is_the_retrieval_stacks():
    """One Gram-matrix formula for both stacks: the same bits, coinciding rows included."""
    from sphr.losses import Euclidean
    from sphr.retrieval.losses import EuclideanDistance, pairwise_euclidean

    e, _ = retrieval_batch(torch.float64)
    ours = Euclidean()(e)
    assert bits_equal(ours, EuclideanDistance(normalize_embeddings=False)(e))
    assert bits_equal(ours, pairwise_euclidean(e))
    ref = e[:5].clone()  # another tensor: the query-to-reference branch
    assert bits_equal(Euclidean()(e, ref), EuclideanDistance(normalize_embeddings=False)(e, ref))
    iu = torch.triu_indices(24, 24, 1)
    assert torch.allclose(Euclidean().condensed(e), ours[iu[0], iu[1]], atol=1e-6)


def _module_imports(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module}


def test_retrieval_schedulers_and_losses_import_no_circle():
    """base imports the schedulers; the schedulers and the statistics they read (stats.py)
    import neither base nor each other back (TYPE_CHECKING imports count)."""
    pkg = Path(__file__).resolve().parents[1] / "sphr" / "retrieval" / "losses"
    assert "sphr.retrieval.losses.schedulers" in _module_imports(pkg / "base.py")
    assert not {m for m in _module_imports(pkg / "schedulers.py")
                if m.startswith("sphr.retrieval")} - {
        "sphr.retrieval.losses.stats"}
    assert not {m for m in _module_imports(pkg / "stats.py") if m.startswith("sphr")}


# --------------------------------------------------------------------------- record
def record(path: Path = FIXTURE) -> None:
    """Write the fixture from the code as it is now (run on commit e4df0a8)."""
    from sphr.losses import distance, pairwise_distances

    out: dict[str, np.ndarray] = {"__fingerprint__": np.array(fingerprint())}
    for key, value in [*loss_results(_current), *distance_results(distance, pairwise_distances),
                       *retrieval_results(), *train_results()]:
        assert key not in out, key
        out[key] = np.array(value) if isinstance(value, str) else value.detach().numpy()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **out)
    print(f"{path}: {len(out)} arrays, {path.stat().st_size} bytes, {fingerprint()}")


if __name__ == "__main__":
    sys.exit(record())
