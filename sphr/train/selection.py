"""Model selection for SPHR: a validation share of the real training rows, the best epoch,
early stopping (docs/METHODS.md, "Model selection").

:func:`split_validation` takes ``validation_size`` of the *real* training rows
(stratified by class, seeded) out of training: triplets that touch them are
replaced by triplets mined among the fitting rows (training keeps its number of
triplets), and validation triplets are mined among the held-out rows. After every epoch the
trainer embeds the validation rows (no dropout) and records

* the validation loss: the training objective on the validation triplets, the
  selection criterion (it is what the network optimizes, and on a few hundred
  rows it is far less noisy than a classifier's F1);
* a cheap downstream check: weighted F1 of a k-nearest-neighbour vote
  (k = 15) from the real fitting rows' embeddings, multi-class. On a large cohort
  both sides are a fixed seeded sample of at most ``KNN_ROWS`` rows: the check
  is a trend line, and on all rows it grew with the cohort (at 500,000
  participants it took a third of every epoch) while the selection criterion
  does not depend on it.

The weights of the epoch with the lowest validation loss are kept; training
stops once ``patience`` epochs pass without improvement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sphr.errors import ConfigError
from sphr.losses.objective import BatchObjective
from sphr.train.seeds import derived_seed
from sphr.train.tracking import SELECTIONS, RowFacts, track_epoch

#: neighbours of the validation kNN vote
KNN_K = 15
#: at most this many reference and query rows in the kNN check (the demo and paper-size
#: cohorts, a few thousand real rows per sex, use all of theirs)
KNN_ROWS = 5_000


@dataclass
class ValidationSplit:
    """Row indices into the training matrix and the triplets of each side."""

    fit_rows: np.ndarray
    validation_rows: np.ndarray
    fit_triplets: np.ndarray
    validation_triplets: np.ndarray  # indices into the training matrix
    #: the seed the split was drawn from (its kNN sample is a stream of it too)
    seed: int = 0


def split_validation(labels: np.ndarray, augmented: np.ndarray, triplets: np.ndarray,
                     size: float, seed: int, n_validation_triplets: int = 2_048
                     ) -> ValidationSplit:
    """Hold out ``size`` of the real rows of each class; augmented rows always stay in fitting
    (they are synthetic copies of training BFH, so validating on them would say nothing).
    Each draw is its own stream of ``seed`` (:mod:`sphr.train.seeds`)."""
    from sphr.cohorts.triplets import mine_triplets

    if not 0 < size < 1:
        raise ConfigError(f"validation_size must be in (0, 1), got {size}")
    labels = np.asarray(labels)
    real = np.flatnonzero(~np.asarray(augmented, bool))
    rng = np.random.default_rng(derived_seed(seed, "validation_split"))
    held = []
    for c in np.unique(labels[real]):
        members = real[labels[real] == c]
        k = round(size * members.size)
        if members.size - k >= 2 and k >= 2:
            held.append(rng.choice(members, size=k, replace=False))
    if not held:
        raise ConfigError("too few real training rows for a validation split")
    val = np.sort(np.concatenate(held))
    in_val = np.zeros(labels.size, bool)
    in_val[val] = True
    keep = ~in_val[triplets].any(axis=1)
    fit_rows = np.flatnonzero(~in_val)
    # a triplet touching a validation row is dropped (about 1 - 0.8^3 = 49% of them): top up
    # with triplets mined among the fitting rows, so training keeps the configured number
    fit_triplets = triplets[keep]
    missing = len(triplets) - len(fit_triplets)
    if missing:
        mined = mine_triplets(labels[fit_rows], missing, seed=derived_seed(seed, "fit_triplets"))
        extra = fit_rows[mined]
        fit_triplets = np.concatenate([fit_triplets, extra])
    local = mine_triplets(labels[val], n_validation_triplets,
                          seed=derived_seed(seed, "validation_triplets"))
    return ValidationSplit(fit_rows, val, fit_triplets, val[local], seed)


def _at_most(rows: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` itself when there are at most ``n``, else a sorted seeded sample of ``n``."""
    return rows if len(rows) <= n else np.sort(rng.choice(rows, size=n, replace=False))


class Validator:
    """Validation loss and kNN F1 of each model of a training stack, after each epoch.

    :meth:`compute` leaves everything on the device and :meth:`finish` reads it on the host,
    so the trainer moves an epoch's loss and validation in one copy. On a CUDA device the
    kNN vote runs there too (:meth:`_knn`: only the predicted classes travel); on the CPU
    it is scikit-learn's. The two agree but for exact distance ties at the k-th neighbour.
    """

    def __init__(self, X: torch.Tensor, labels: np.ndarray, augmented: np.ndarray,
                 split: ValidationSplit, patience: int | None, batch_size: int = 512,
                 knn_on_device: bool | None = None, selection: str = "loss",
                 facts: RowFacts | None = None) -> None:
        if selection not in SELECTIONS:
            raise ConfigError(f"selection must be one of {', '.join(SELECTIONS)}, "
                              f"got {selection!r}")
        self.split, self.patience, self.batch_size = split, patience, batch_size
        self.selection = selection
        dev = X.device
        self.xv = X[torch.as_tensor(split.validation_rows, device=dev)]
        fit_real = np.setdiff1d(split.fit_rows, np.flatnonzero(np.asarray(augmented, bool)))
        rng = np.random.default_rng(derived_seed(split.seed, "knn_sample"))
        fit_real = _at_most(fit_real, KNN_ROWS, rng)
        # kNN queries: positions into the validation rows
        self.queries = _at_most(np.arange(len(split.validation_rows)), KNN_ROWS, rng)
        self.xf = X[torch.as_tensor(fit_real, device=dev)]
        self.yf = np.asarray(labels)[fit_real]
        # every validation row's class: the per-epoch tracking (sphr.train.tracking) reads
        # all of them, the kNN check its queries, the loss its triplets (on the device)
        self.yv_all = np.asarray(labels)[split.validation_rows]
        self.yv = self.yv_all[self.queries]
        self.facts_fit = facts.take(fit_real) if facts is not None else None
        self.facts_val = facts.take(split.validation_rows) if facts is not None else None
        pos = np.searchsorted(split.validation_rows, split.validation_triplets)
        self.tv = torch.as_tensor(pos, device=dev)
        self.labels_v = torch.as_tensor(self.yv_all, device=dev)
        # index tensors made once: a host list turned into a device index each epoch would
        # be a copy and a sync per epoch
        self._batches = [self.tv[i:i + batch_size] for i in range(0, len(self.tv), batch_size)]
        self._queries = torch.as_tensor(self.queries, device=dev)
        self.classes = np.unique(self.yf)
        self._yf_codes = torch.as_tensor(np.searchsorted(self.classes, self.yf), device=dev)
        self.knn_on_device = dev.type == "cuda" if knn_on_device is None else knn_on_device
        self.history: list[list[tuple[float, float]]] = []
        self.best: list[tuple[float, int]] = []  # (validation loss, epoch) per model
        self.best_params: list[list[torch.Tensor]] = []

    @torch.no_grad()
    def compute(self, params: list[torch.Tensor], objective: BatchObjective, forward
                ) -> list[torch.Tensor]:
        """The validation pass on the device: each model's training objective (its loss and
        terms, :class:`~sphr.losses.objective.BatchObjective`) per validation batch (K, B),
        then the kNN check's predicted classes (K, queries) on the device, else the fitting
        and query embeddings for scikit-learn; last the validation and fitting embeddings,
        which the tracking reads."""
        k = params[0].shape[0]
        zv = forward(params, self.xv.unsqueeze(0).expand(k, -1, -1), None).float()
        zf = forward(params, self.xf.unsqueeze(0).expand(k, -1, -1), None).float()
        values = torch.stack([self._batch_losses(objective.subset([j]), zv[j])
                              for j in range(len(objective.losses))])
        zq = zv[:, self._queries]
        knn = [self._knn(zf, zq)] if self.knn_on_device else [zf, zq]
        return [values, *knn, zv, zf]

    def _batch_losses(self, objective: BatchObjective, z: torch.Tensor) -> torch.Tensor:
        """One model's objective per validation batch, the batch laid out as in training."""
        loss = objective.losses[0]
        was_training = loss.training
        loss.eval()  # running statistics (MDR) must not learn from validation rows
        # in training-sized batches: the batch-wise losses (N-Pair, LiftedStruct, InfoNCE)
        # compare every row of a batch with every other, so one 5,000-triplet batch would
        # be both slow and a different objective
        out = []
        for t in self._batches:
            rows = t.t().reshape(-1)  # a..., p..., n...
            value = objective(z[rows].unsqueeze(0), self.xv[rows].unsqueeze(0),
                              self.labels_v[rows].unsqueeze(0))
            out.append(value.reshape(()).detach())
        loss.train(was_training)
        return torch.stack(out)

    def _knn(self, zf: torch.Tensor, zq: torch.Tensor) -> torch.Tensor:
        """Class codes (K, queries) of a uniform k-nearest-neighbour vote, as scikit-learn's
        KNeighborsClassifier votes: ties go to the smallest class."""
        k = min(KNN_K, zf.shape[1])
        out = []
        for j in range(zf.shape[0]):  # one model at a time: queries x fitting rows distances
            # exact differences, not the |x|^2 + |y|^2 - 2xy shortcut, whose rounding reorders
            # near neighbours
            d = torch.cdist(zq[j], zf[j], compute_mode="donot_use_mm_for_euclid_dist")
            near = self._yf_codes[d.topk(k, dim=1, largest=False).indices]
            votes = torch.zeros(len(zq[j]), len(self.classes), device=zq.device)
            votes.scatter_add_(1, near, torch.ones_like(near, dtype=votes.dtype))
            out.append(votes.argmax(dim=1))  # the first of equal maxima: the smallest class
        return torch.stack(out)

    def finish(self, parts: Sequence[torch.Tensor]) -> list[tuple[float, ...]]:
        """(validation loss, kNN F1, *tracking) per model from :meth:`compute`'s tensors on
        the host (:data:`sphr.train.tracking.TRACK_COLUMNS`)."""
        from sklearn.metrics import f1_score
        from sklearn.neighbors import KNeighborsClassifier

        sizes = [len(t) for t in self._batches]
        out = []
        for j, row in enumerate(parts[0].tolist()):
            total, count = 0.0, 0
            for value, size in zip(row, sizes, strict=True):
                total += value * size
                count += size
            if self.knn_on_device:
                predicted = self.classes[parts[1][j].numpy()]
            else:
                knn = KNeighborsClassifier(n_neighbors=min(KNN_K, len(self.yf)))
                knn.fit(parts[1][j].numpy(), self.yf)
                predicted = knn.predict(parts[2][j].numpy())
            track = track_epoch(parts[-1][j].numpy(), self.yf, self.facts_fit,
                                parts[-2][j].numpy(), self.yv_all, self.facts_val)
            out.append((total / count, float(f1_score(self.yv, predicted, average="weighted")),
                        *track))
        return out

    def criterion(self, values: Sequence[float]) -> float:
        """What selection minimizes: the validation loss, or (``severity``) minus the
        validation rows' severity concordance."""
        return float(values[0]) if self.selection == "loss" else -float(values[2])

    def __call__(self, params: list[torch.Tensor], objective: BatchObjective, forward
                 ) -> list[tuple[float, ...]]:
        return self.finish([t.cpu() for t in self.compute(params, objective, forward)])

    def update(self, epoch: int, params: list[torch.Tensor], values: list[tuple[float, ...]]
               ) -> bool:
        """Record an epoch; keep the best weights per model; True when every model is done."""
        self.history.append(values)
        k = len(values)
        if not self.best:
            self.best = [(np.inf, 0)] * k
            self.best_params = [[] for _ in range(k)]
        for j, row in enumerate(values):
            v = self.criterion(row)
            # a model whose patience ran out is done, as it would be trained alone: a later
            # epoch of its stack (trained for the others) is not a candidate
            if self.patience is not None and epoch - 1 - self.best[j][1] >= self.patience:
                continue
            if np.isfinite(v) and v < self.best[j][0]:
                self.best[j] = (v, epoch)
                self.best_params[j] = [p[j].detach().clone() for p in params]
        if self.patience is None:
            return False
        return all(epoch - e >= self.patience for _, e in self.best)

    def restore(self, params: list[torch.Tensor]) -> None:
        """Put each model's best weights back into the stack."""
        with torch.no_grad():
            for j, best in enumerate(self.best_params):
                for p, b in zip(params, best, strict=False):
                    p[j].copy_(b)

    def state(self) -> dict:
        return {"history": self.history, "best": self.best,
                "best_params": [[p.cpu() for p in ps] for ps in self.best_params]}

    def load(self, state: dict, device: torch.device) -> None:
        self.history = [[tuple(x) for x in row] for row in state["history"]]
        self.best = [tuple(b) for b in state["best"]]
        self.best_params = [[p.to(device) for p in ps] for ps in state["best_params"]]
