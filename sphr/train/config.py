"""Training settings: one dataclass, the paper's values as defaults, named profiles."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sphr.errors import ConfigError, check_keys

PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "tf32")
#: ``cuda_graphs`` settings: ``auto`` captures the compiled step's epoch as CUDA graphs on a
#: CUDA device (a no-op on the CPU), ``on`` also runs that device-resident epoch uncaptured on
#: the CPU (the same numbers; for tests), ``off`` keeps the per-batch step
CUDA_GRAPHS: tuple[str, ...] = ("auto", "on", "off")
#: the losses of the loss comparison (Table 3 / A2), in the paper's column order
COMPARISON_LOSSES: tuple[str, ...] = ("triplet", "npair", "lifted_struct", "mdr", "infonce",
                                      "distance_swap", "nplb")


#: what a setting of :class:`TrainConfig` is, in its field's metadata (``role``); the trainer
#: (which settings may differ within a stack), checkpoints (which a resume may change), the
#: refit spreads (sphr.risk.refits) and the run's settings (sphr.settings) read it from there
IDENTITY = "identity"  # what a model learns; one value per stack
PER_MODEL = "per_model"  # what a model learns; may differ between the models of a stack
SEED = "seed"  # the seed: differs between the models of a stack and between refits
CANDIDATE = "candidate"  # what a model learns, one of the refit candidates (sphr.risk.refits)
RUNTIME = "runtime"  # where and how fast a model trains, not what it learns
ROLES: tuple[str, ...] = (IDENTITY, PER_MODEL, SEED, CANDIDATE, RUNTIME)


def role(name: str, *, resumable: bool = False, set_by_run: bool = False) -> dict[str, Any]:
    """A field's metadata: its role; ``resumable``: a resumed run may change it;
    ``set_by_run``: the run sets it (the device), it is no key of ``[train]``."""
    if name not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {name!r}")
    return {"role": name, "resumable": resumable, "set_by_run": set_by_run}


def setting(name: str, default: Any, **flags: bool) -> Any:
    """A field of :class:`TrainConfig` with an immutable default and its :func:`role`."""
    return field(default=default, metadata=role(name, **flags))


def settings_with(cls: type, *, role: str | None = None, **flags: bool) -> tuple[str, ...]:
    """The names of ``cls``'s fields (a dataclass built with :func:`setting`) whose metadata
    has ``role`` (any, when None) and each of ``flags``, in field order."""
    return tuple(f.name for f in dataclasses.fields(cls)
                 if (role is None or f.metadata.get("role") == role)
                 and all(f.metadata.get(k, False) == v for k, v in flags.items()))


@dataclass(frozen=True)
class TrainConfig:
    """SPHR training: Adam lr 1e-3, x0.95 every 50 epochs, margin 1, 1000 epochs
    (docs/METHODS.md, "The SPHR network and training"). Each field's ``#:`` comment is its
    help on the command line (``sphr train --help``) and in the Dagster launchpad.
    """

    #: the metric-learning loss: nplb, triplet, distance_swap, mdr, npair, lifted_struct or
    #: infonce
    loss: str = setting(PER_MODEL, "nplb")
    #: keyword arguments of the loss on top of margin (and p for NPLB), as a JSON object
    loss_params: dict[str, Any] = field(default_factory=dict, metadata=role(PER_MODEL))
    #: training epochs (at most, with model selection)
    epochs: int = setting(IDENTITY, 1000, resumable=True)
    #: triplets per batch
    batch_size: int = setting(IDENTITY, 256)
    #: Adam's learning rate
    lr: float = setting(IDENTITY, 1e-3)
    #: the learning rate's factor every lr_step epochs
    lr_gamma: float = setting(IDENTITY, 0.95)
    #: epochs between learning-rate steps
    lr_step: int = setting(IDENTITY, 50)
    #: the loss's margin
    margin: float = setting(PER_MODEL, 1.0)
    #: NPLB's power: the exponent of its regularizer (d(p,n) - d(a,n))^p, an even integer
    #: >= 2 (an odd one leaves the loss unbounded below; docs/METHODS.md, "Losses"); not a
    #: p-norm, the distances are the loss's own. Only NPLB reads it
    p: int = setting(PER_MODEL, 2)
    #: seed of the weights, the batches, the dropout masks and the validation split (each
    #: its own SeedSequence stream of it, sphr.train.seeds)
    seed: int = setting(SEED, 0)
    #: auto, cpu or cuda[:N] (auto: CUDA when present)
    device: str = setting(RUNTIME, "auto", resumable=True, set_by_run=True)
    #: fp32, bf16 (autocast) or tf32 (CUDA matmuls)
    precision: str = setting(RUNTIME, "fp32")
    #: torch.compile the forward pass (the whole step where the losses are pure)
    compile: bool = setting(RUNTIME, False, resumable=True)
    #: epochs between checkpoints (written to OUT/checkpoint; 0: only the final one)
    checkpoint_every: int = setting(RUNTIME, 50, resumable=True)
    #: torch's CPU threads (None: every core this process may use)
    threads: int | None = setting(RUNTIME, None, resumable=True, set_by_run=True)
    #: dropout of the hidden layers
    dropout: float = setting(IDENTITY, 0.1)
    #: the embedding's width
    out_dim: int = setting(IDENTITY, 32)
    #: share of the real training rows held out to pick the best epoch (0: none, the
    #: paper's way); see :mod:`sphr.train.selection`
    validation_size: float = setting(IDENTITY, 0.0)
    #: stop after this many epochs without a better validation loss (None: never)
    patience: int | None = setting(IDENTITY, None)
    #: what picks the kept epoch: ``loss`` (the lowest validation loss) or ``severity`` (the
    #: validation rows' severity concordance; docs/METHODS.md, "SPHR's stability from fit
    #: to fit")
    selection: str = setting(CANDIDATE, "loss")
    #: K > 1: K seeds trained as one stack and saved as one model whose embedding is the
    #: members' side by side (:class:`sphr.models.SPHREnsemble`; docs/METHODS.md, "SPHR's
    #: stability from fit to fit")
    ensemble: int = setting(CANDIDATE, 1)
    #: w > 0: add w times the normalized stress between the embedding's and the input
    #: markers' distances of each triplet to the loss (:mod:`sphr.losses.anchor`;
    #: docs/METHODS.md, "SPHR's stability from fit to fit", R3)
    anchor: float = setting(CANDIDATE, 0.0)
    #: the compiled step's epoch as CUDA graph replays (:mod:`sphr.train.graph`); applies with
    #: ``compile`` and losses that are all pure
    cuda_graphs: str = setting(RUNTIME, "auto", resumable=True)
    #: training steps captured in one CUDA graph (one replay launches them all)
    steps_per_graph: int = setting(RUNTIME, 1, resumable=True)

    def __post_init__(self) -> None:
        from sphr.losses import LOSSES

        if self.loss not in LOSSES:
            raise ConfigError(f"unknown loss {self.loss!r}: choose from {', '.join(LOSSES)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, "
                              f"got {self.precision!r}")
        if self.cuda_graphs not in CUDA_GRAPHS:
            raise ConfigError(f"cuda_graphs must be one of {', '.join(CUDA_GRAPHS)}, "
                              f"got {self.cuda_graphs!r}")
        for name in ("epochs", "batch_size", "lr_step", "out_dim", "steps_per_graph",
                     "ensemble"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0 or not 0 < self.lr_gamma <= 1:
            raise ConfigError(f"need lr > 0 and 0 < lr_gamma <= 1, "
                              f"got {self.lr}, {self.lr_gamma}")
        if (isinstance(self.anchor, bool) or not isinstance(self.anchor, (int, float))
                or not 0 <= self.anchor < float("inf")):
            raise ConfigError(f"anchor must be a number >= 0, got {self.anchor!r}")
        object.__setattr__(self, "anchor", float(self.anchor))  # 1 and 1.0: one setting
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.checkpoint_every < 0:
            raise ConfigError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if not 0 <= self.validation_size < 1:
            raise ConfigError(f"validation_size must be in [0, 1), got {self.validation_size}")
        if self.patience is not None and (self.patience < 1 or self.validation_size == 0):
            raise ConfigError("patience needs validation_size > 0 and must be >= 1")
        from sphr.train.tracking import SELECTIONS

        if self.selection not in SELECTIONS:
            raise ConfigError(f"selection must be one of {', '.join(SELECTIONS)}, "
                              f"got {self.selection!r}")
        if self.selection != "loss" and self.validation_size == 0:
            raise ConfigError(f"selection {self.selection!r} needs validation_size > 0")

    @classmethod
    def profile(cls, name: str, **overrides: Any) -> TrainConfig:
        """``paper``: the paper's settings (1000 epochs, batch 256). ``demo``: the quick
        default run."""
        if name not in PROFILES:
            raise ConfigError(f"unknown training profile {name!r}: "
                              f"choose from {', '.join(PROFILES)}")
        return cls(**{**PROFILES[name], **overrides})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """The config :meth:`to_dict` wrote (a model file's, a checkpoint's, a fit's); a key
        that is no field is a :class:`ConfigError` naming it, never dropped."""
        check_keys(d, (f.name for f in dataclasses.fields(cls)), "TrainConfig")
        return cls(**d)


PROFILES: dict[str, dict[str, Any]] = {
    # the paper's settings, 1000 epochs at most, with model selection: 1000 epochs on ~3,400
    # rows over-fit (training loss 0.001), so the best validation epoch is kept and training
    # stops after 50 epochs without improvement (one learning-rate step: a plateau that
    # outlasts a decay of the rate is not a plateau the schedule will leave)
    "paper": {"validation_size": 0.2, "patience": 50},
    # Demo: sized so one sex of the demo cohort (about 4,000 rows, 20,000 triplets)
    # trains in well under half a minute on a 2-core CPU (docs in sphr.train); the best of
    # its at most 8 epochs on the validation rows is kept. Patience 2: on the demo cohort
    # every loss's validation loss bottoms out at epoch 2-4 (measured, 7-loss stack, women),
    # so epochs past best + 2 only cost time.
    "demo": {"epochs": 8, "batch_size": 512, "checkpoint_every": 0, "validation_size": 0.2,
             "patience": 2,
             # the marker-geometry anchor at weight 3: the candidate SPHR's pre-registered rule
             # by dC chose (docs/METHODS.md, "Higher risk for your age"; measured in
             # docs/notes/SPHR_RISK.md): SPHR + markers adds +0.056 / +0.055 to age's C for
             # death on the development cross-fit, against +0.002 / +0.007 without it
             "anchor": 3.0},
}


@dataclass(frozen=True)
class ComparisonSettings:
    """Keys of ``[train]`` beyond ``TrainConfig``: the loss comparison's losses."""

    #: the loss comparison's losses (Table 3 / A2), trained as one stack with [train]'s
    #: settings; the evaluation's loss table shows them
    comparison_losses: tuple[str, ...] = COMPARISON_LOSSES
