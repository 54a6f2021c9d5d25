"""Run profiles: ``quick`` (pipeline default: well under a minute per dataset for the default losses
x 1 seed on 2 CPU cores), ``demo`` (small CNN, CPU-minutes per loss), ``paper`` (the AdaTriplet
protocol), ``smoke`` (tests)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sphr.errors import ConfigError
from sphr.retrieval.catalog import DEFAULT_LOSSES


@dataclass(frozen=True)
class Profile:
    name: str
    backbone: str = "small_cnn"
    width: int = 32
    dim: int = 128
    dropout: float = 0.0
    #: local ResNet-18 state-dict file (ImageNet weights in the paper); None trains from scratch
    weights: str | None = None
    epochs: int = 20
    batch_size: int = 128
    m_per_class: int = 4
    lr: float = 1e-3
    weight_decay: float = 1e-4
    augment: bool = True
    #: model input size per dataset kind; manifests use ``manifest``
    image_size: dict[str, int] = field(
        default_factory=lambda: {"digits": 32, "forensic": 64, "manifest": 256}
    )
    #: loader options per dataset kind (see ``sphr.retrieval.data.load_retrieval_data``)
    data: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Hamming code lengths S: the seeded projection of the D-d embedding gives every loss
    #: ``mAP_H<S>_proj``; the losses in ``code_heads`` also get a trained S-output head per S
    #: (OCAM's S-bit codes, sign-binarized) -> ``mAP_H<S>``
    hamming_bits: tuple[int, ...] = (16, 64)
    #: losses (base names, comma-separated) whose S-output code heads are trained, "all" or ""
    #: (none). Each head costs one more loss evaluation per batch, so ``quick`` trains OCAM's only.
    code_heads: str = "ocam"
    #: heads learn on detached backbone features, so the D-d embedding is the one a single-objective
    #: run gives; False trains backbone and heads together (the S-bit network end to end)
    code_heads_detach: bool = True
    #: stretch the Linear / DAMS margin steps to reach the paper's range within ``epochs``
    #: (False: the papers' per-epoch values)
    scale_schedules: bool = True
    #: loss options by scheduler family where a loss spec does not set them (budget settings)
    loss_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: share of the training subjects (classes: images) held out to pick the best epoch by
    #: mAP; 0: none
    val_fraction: float = 0.2
    #: P@Z cut-offs by retrieval level (subjects have ~5 images, digit classes ~90)
    p_at_z: dict[str, tuple[int, ...]] = field(
        default_factory=lambda: {"class": (10,), "subject": (4,)}
    )
    batches_per_epoch: int | None = None
    eval_batch_size: int = 512
    #: DataLoader workers for manifests that do not fit in memory
    workers: int = 2

    def with_overrides(self, **overrides: Any) -> Profile:
        unknown = set(overrides) - set(self.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"profile has no setting(s) {', '.join(sorted(unknown))}")
        return replace(self, **overrides)

    def trains_code_heads(self, spec: str) -> bool:
        """Does the loss ``spec`` (``name[:options]``) get trained S-output code heads?"""
        names = {n.strip() for n in self.code_heads.split(",") if n.strip()}
        return "all" in names or spec.partition(":")[0].strip() in names

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: AutoMargin below the paper budget: hold eps0 / beta0 until the mean delta passes eps0,
#: at most a quarter of the epochs (see ``AutoMargin``)
def _warmup(epochs: int) -> dict[str, dict[str, Any]]:
    return {"automargin": {"warmup_until_delta": True, "warmup_epochs": max(1, epochs // 4)}}


PROFILES: dict[str, Profile] = {
    # Seconds per (loss, seed) on 2 CPU cores: a narrow small CNN, 8 epochs, digits at 16 px and
    # forensic at 32 px. The default losses x 1 seed took 15-30 s per dataset on 2 shared CPU cores.
    # Schedules scaled to the 8 epochs, AutoMargin warm-up, best epoch on 20% of the
    # training subjects.
    "quick": Profile("quick", width=16, epochs=8,
                     image_size={"digits": 16, "forensic": 32, "manifest": 128},
                     loss_options=_warmup(8)),
    # Up to a minute on 2 CPU cores per (loss, seed): small CNN, 20 epochs, Adam 1e-3.
    "demo": Profile("demo", loss_options=_warmup(20), code_heads="all"),
    # The AdaTriplet protocol (Sec. 3.2): ResNet-18, D 128, Adam lr 1e-4 / wd 1e-4, batch 128 =
    # 32 subjects x 4 images, 100 epochs, 256x256 inputs (manifests). ImageNet weights: pass
    # weights=PATH (a local torchvision resnet18 state dict). The papers' per-epoch schedules,
    # no warm-up.
    "paper": Profile("paper", backbone="resnet18", epochs=100, lr=1e-4, weight_decay=1e-4,
                     image_size={"digits": 64, "forensic": 128, "manifest": 256},
                     scale_schedules=False, code_heads="all"),
    # For tests: one tiny epoch.
    "smoke": Profile("smoke", width=8, dim=32, epochs=1, batch_size=40, m_per_class=4,
                     data={"digits": {"limit": 200}, "forensic": {"n_subjects": 24}},
                     hamming_bits=(16,), eval_batch_size=256, scale_schedules=False),
}


@dataclass(frozen=True)
class ComparisonConfig:
    """What a loss comparison runs when nothing else is asked for:
    :func:`sphr.retrieval.run_comparison` and ``sphr retrieval`` take these defaults, the Dagster
    assets :data:`PIPELINE_COMPARISON`."""

    #: the losses to compare, each a name or NAME:key=value,... (e.g.
    #: ``triplet_dams:threshold=0.9``; :data:`sphr.retrieval.losses.LOSSES`)
    losses: tuple[str, ...] = DEFAULT_LOSSES
    #: the seeds of model initialization, sampling and augmentation (one run per loss and
    #: seed; the data split stays fixed)
    seeds: tuple[int, ...] = (0, 1, 2)
    #: a name in :data:`PROFILES`: quick (about a minute per dataset), demo (CPU-minutes),
    #: paper (AdaTriplet protocol) or smoke
    profile: str = "demo"
    #: torch device: auto, cpu or cuda[:N]
    device: str = "auto"


#: the Dagster pipeline's comparison (sphr_dagster/assets/retrieval.py): the ``quick`` budget and
#: one seed, so the default pipeline spends well under a minute per dataset on it
PIPELINE_COMPARISON = ComparisonConfig(seeds=(0,), profile="quick")


def get_profile(profile: str | Profile, **overrides: Any) -> Profile:
    if isinstance(profile, Profile):
        return profile.with_overrides(**overrides) if overrides else profile
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    return PROFILES[profile].with_overrides(**overrides) if overrides else PROFILES[profile]
