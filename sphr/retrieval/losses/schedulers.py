"""Margin schedulers: small objects a loss consults for its margin(s) each epoch.

One protocol for all of them (constant, Linear and DAMS from the DAMS paper,
AutoMargin from the AdaTriplet paper):

* ``observe(stats)`` once per batch, before the loss is computed, with the
  detached effective margins of *all* in-batch triplets and the similarities
  of the de-duplicated negative pairs (:class:`~sphr.retrieval.losses.stats.BatchStats`);
* ``current()`` the margins in force (``{"margin": ...}``, AutoMargin also
  ``"beta"``);
* ``step_epoch()`` once at the end of each epoch: records the epoch in
  ``history`` and updates the margin for the next epoch;
* ``set_budget(epochs, batches_per_epoch, scale)`` once before training: the
  training budget. With ``scale=True`` the Linear and DAMS steps are stretched
  so the margin can reach the paper's range (``mu0 + step * paper_epochs``)
  within the run; with ``scale=False`` (the ``paper`` profile) the per-epoch
  values of the papers stay as they are.

Every scheduler counts the epoch's easy share online (delta > margin over all
in-batch triplets), so margin curves and easy shares are logged the same way
for all losses.
"""

from __future__ import annotations

import math

from sphr.errors import ConfigError
from sphr.retrieval.losses.stats import BatchStats


class MarginScheduler:
    """Base: accumulates the epoch's statistics; subclasses decide the next margin."""

    name = "scheduler"

    def __init__(self, margin: float) -> None:
        self.margin = float(margin)
        self.epoch = 0
        self.history: list[dict[str, float]] = []
        self.budget_epochs = 0
        self.budget_batches = 0
        self._reset_epoch()

    def _reset_epoch(self) -> None:
        self._n = 0
        self._n_easy = 0
        self._sum_delta = 0.0
        self._n_neg = 0
        self._sum_neg = 0.0

    def current(self) -> dict[str, float]:
        return {"margin": self.margin}

    def set_budget(self, epochs: int, batches_per_epoch: int = 1, *, scale: bool = False) -> None:
        """The training budget, before the first epoch (base: remembered only)."""
        self.budget_epochs = int(epochs)
        self.budget_batches = int(batches_per_epoch)

    def observe(self, stats: BatchStats) -> None:
        delta = stats.effective_margins.detach()
        neg = stats.negative_similarities.detach()
        # Easy means "zero loss at the margin in force" (DAMS paper, Sec. III).
        self._n += int(delta.numel())
        self._n_easy += int((delta > self.margin).sum())
        self._sum_delta += float(delta.double().sum())
        self._n_neg += int(neg.numel())
        self._sum_neg += float(neg.double().sum())

    @property
    def easy_share(self) -> float:
        return self._n_easy / self._n if self._n else math.nan

    @property
    def mean_delta(self) -> float:
        return self._sum_delta / self._n if self._n else math.nan

    @property
    def mean_negative_similarity(self) -> float:
        return self._sum_neg / self._n_neg if self._n_neg else math.nan

    def _record_extra(self) -> dict[str, float]:
        """Extra per-epoch fields for ``history`` (subclasses)."""
        return {}

    def _update(self) -> None:
        """Set the next epoch's margin from this epoch's statistics (subclasses)."""

    def step_epoch(self) -> None:
        self.history.append({
            "epoch": float(self.epoch),
            **self.current(),
            **self._record_extra(),
            "easy_share": self.easy_share,
            "mean_delta": self.mean_delta,
            "mean_negative_similarity": self.mean_negative_similarity,
        })
        self._update()
        self.epoch += 1
        self._reset_epoch()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v:g}" for k, v in self.current().items())
        return f"{type(self).__name__}({fields})"


class ConstantMargin(MarginScheduler):
    """A fixed margin (the DAMS paper's baseline uses mu = 0.3)."""

    name = "constant"


def scaled_step(mu0: float, step: float, paper_epochs: int, epochs: int) -> float:
    """The per-epoch step that takes mu0 to the paper's final margin mu0 + step * paper_epochs
    in ``epochs`` epochs: the last epoch trains at that margin (one epoch: the step is unused)."""
    if paper_epochs <= 0:
        raise ConfigError(f"paper_epochs must be > 0, got {paper_epochs}")
    return step * paper_epochs / max(int(epochs) - 1, 1)


class _SteppedMargin(MarginScheduler):
    """A margin raised by ``step`` per update from ``mu0``; the paper's range is
    mu0 + step * paper_epochs, which ``set_budget(..., scale=True)`` reaches in any budget."""

    def __init__(self, mu0: float, step: float, paper_epochs: int) -> None:
        super().__init__(mu0)
        self.mu0 = float(mu0)
        self.step = self.paper_step = float(step)
        self.paper_epochs = int(paper_epochs)

    @property
    def target(self) -> float:
        """The paper's final margin, mu0 + step * paper_epochs (the range a scaled run reaches)."""
        return self.mu0 + self.paper_step * self.paper_epochs

    def set_budget(self, epochs: int, batches_per_epoch: int = 1, *, scale: bool = False) -> None:
        super().set_budget(epochs, batches_per_epoch, scale=scale)
        self.step = (scaled_step(self.mu0, self.paper_step, self.paper_epochs, epochs) if scale
                     else self.paper_step)


class LinearMargin(_SteppedMargin):
    """mu(t) = mu0 + step * t: the DAMS paper's Linear scheduler (mu0 0, step 0.01, 100 epochs).

    ``set_budget(..., scale=True)`` replaces ``step`` by :func:`scaled_step`, so
    the run ends at the paper's final margin (mu0 + 0.01 * 100 = 1.0) whatever
    its number of epochs.
    """

    name = "linear"

    def __init__(self, mu0: float = 0.0, step: float = 0.01, max_margin: float | None = None, *,
                 paper_epochs: int = 100) -> None:
        super().__init__(mu0, step, paper_epochs)
        self.max_margin = max_margin

    def _update(self) -> None:
        self.margin += self.step
        if self.max_margin is not None:
            self.margin = min(self.margin, float(self.max_margin))


class DAMSMargin(_SteppedMargin):
    """Difficulty Adaptive Margin Scheduler: mu += step after an epoch whose easy share exceeds t.

    Paper values (Sec. IV-D): mu0 0, step 0.01, t 0.95, 100 epochs; ``mu0``
    is the paper's ablation knob (a non-zero start). The easy share is counted
    online over all in-batch triplets of the epoch, at the margin in force
    during that epoch. ``set_budget(..., scale=True)`` stretches the step like
    :class:`LinearMargin`'s, so an always-easy run reaches the same range.

    At mu0 = 0 the hinge [d_ap - d_an]_+ on the unit sphere is also minimized
    by collapsing the embedding (every delta -> 0), which keeps the easy share
    (delta > 0) low and the margin at 0: a state the scheduler cannot leave by
    itself. A non-zero mu0 or the collapse monitor (``sphr.retrieval.monitor``)
    is the way out / the way to see it.
    """

    name = "dams"

    def __init__(self, mu0: float = 0.0, step: float = 0.01, threshold: float = 0.95, *,
                 paper_epochs: int = 100) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"DAMS threshold must be in [0, 1], got {threshold}")
        super().__init__(mu0, step, paper_epochs)
        self.threshold = float(threshold)

    def _update(self) -> None:
        if self._n and self.easy_share > self.threshold:
            self.margin += self.step


class AutoMargin(MarginScheduler):
    """AutoMargin (AdaTriplet paper, Eq. 7-8), as the authors' code runs it.

    eps(t) = mean(delta) / K_delta over all in-batch triplets of the previous
    epoch, clipped at >= 0; beta(t) = 1 + (mean(phi_an) - 1) / K_an over the
    de-duplicated negative pairs, not clipped. Starts from eps0 = 0.25,
    beta0 = 0. ``per_batch=True`` recomputes both from each batch before its
    loss (the authors' "adaptive" mode) instead of once per epoch.
    (K_delta, K_an) = (2, 2) for knees (OAI), (2, 4) for chest X-rays.

    Warm-up (not in the paper, whose networks start from ImageNet weights):
    ``warmup_epochs`` k > 0 holds eps0 / beta0 for the first k epochs;
    ``warmup_until_delta`` holds them until an epoch's mean delta exceeds eps0
    (at most k epochs when k > 0, else without limit), then the update runs
    from that epoch's statistics. A random network has mean delta 0.01-0.03,
    so without it eps drops to about 0.01 after the first epoch.
    """

    name = "automargin"

    def __init__(self, k_delta: float = 2.0, k_an: float = 2.0, eps0: float = 0.25,
                 beta0: float = 0.0, per_batch: bool = False, *, warmup_epochs: int = 0,
                 warmup_until_delta: bool = False) -> None:
        if k_delta <= 0 or k_an <= 0:
            raise ConfigError(f"AutoMargin K values must be > 0, got K_delta={k_delta}, "
                              f"K_an={k_an}")
        if warmup_epochs < 0:
            raise ConfigError(f"AutoMargin warmup_epochs must be >= 0, got {warmup_epochs}")
        super().__init__(eps0)
        self.eps0 = float(eps0)
        self.beta = float(beta0)
        self.k_delta = float(k_delta)
        self.k_an = float(k_an)
        self.per_batch = per_batch
        self.warmup_epochs = int(warmup_epochs)
        self.warmup_until_delta = bool(warmup_until_delta)
        #: True while eps0 / beta0 are held
        self.warming_up = self.warmup_epochs > 0 or self.warmup_until_delta

    def current(self) -> dict[str, float]:
        return {"margin": self.margin, "beta": self.beta}

    def _record_extra(self) -> dict[str, float]:
        return {"warmup": float(self.warming_up)}

    def _set_from(self, mean_delta: float, mean_an: float) -> None:
        if not math.isnan(mean_delta):
            self.margin = max(0.0, mean_delta / self.k_delta)
        if not math.isnan(mean_an):
            self.beta = 1.0 + (mean_an - 1.0) / self.k_an

    def observe(self, stats: BatchStats) -> None:
        if self.per_batch and not self.warming_up:
            delta = stats.effective_margins.detach()
            neg = stats.negative_similarities.detach()
            self._set_from(float(delta.double().mean()) if delta.numel() else math.nan,
                           float(neg.double().mean()) if neg.numel() else math.nan)
        super().observe(stats)

    def _warmup_over(self) -> bool:
        """After this epoch (``self.epoch``, 0-based): does the warm-up end?"""
        done = self.epoch + 1
        if self.warmup_until_delta:
            if self.mean_delta > self.eps0:
                return True
            return self.warmup_epochs > 0 and done >= self.warmup_epochs
        return done >= self.warmup_epochs

    def _update(self) -> None:
        if self.warming_up:
            if not self._warmup_over():
                return
            self.warming_up = False
            # the first update after the warm-up uses the last warm-up epoch (per-batch mode too)
            self._set_from(self.mean_delta, self.mean_negative_similarity)
            return
        if not self.per_batch:
            self._set_from(self.mean_delta, self.mean_negative_similarity)


def margin_history(scheduler: MarginScheduler | None) -> list[dict[str, float]]:
    """The per-epoch records of a scheduler (empty for a loss without one)."""
    return [] if scheduler is None else list(scheduler.history)
