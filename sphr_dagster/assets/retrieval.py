"""Image-retrieval loss comparison assets, one per embedded dataset (or a user manifest)."""

import os

import dagster as dg

from sphr import layout
from sphr.retrieval.profiles import PIPELINE_COMPARISON as _DEFAULTS
from sphr_dagster import metadata as md
from sphr_dagster.resources import Compute, RunStorage

#: embedded datasets; SPHR_RETRIEVAL_MANIFEST adds the user's own image manifest
DATASETS = ("digits", "forensic")


class RetrievalSettings(dg.Config):
    """Losses, seeds and run profile (`quick` for the default pipeline; `demo`, `paper`).
    Defaults are the library's (``sphr.retrieval.profiles.PIPELINE_COMPARISON``).

    `quick` and `demo` scale the Linear / DAMS margin steps to their epochs, warm AutoMargin up,
    pick the best epoch on held-out training subjects and train OCAM's S-bit heads (see
    docs/RETRIEVAL.md); `paper` keeps the papers' per-epoch values.
    """

    #: empty: the library's default losses too
    losses: list[str] = list(_DEFAULTS.losses)
    seeds: list[int] = list(_DEFAULTS.seeds)
    profile: str = _DEFAULTS.profile


def _comparison_asset(dataset: str, source: str) -> dg.AssetsDefinition:
    @dg.asset(key=["retrieval", dataset], group_name="retrieval",
              description=f"Loss x metric comparison on {dataset} (mean ± SE over seeds): "
              "mAP, mAP@R, CMC, Recall@k, pair AUC, P@Z, Hamming (trained S-bit heads and projected codes); "
              "last- and best-epoch mAP, final margins, collapse flags; margin curves; query strips.")
    def comparison(context: dg.AssetExecutionContext, config: RetrievalSettings,
                   storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
        from sphr.retrieval import run_comparison

        out = layout.retrieval_dir(storage.run, dataset)
        result = run_comparison(source, list(config.losses or _DEFAULTS.losses),
                                seeds=list(config.seeds), out_dir=out, device=compute.device,
                                profile=config.profile)
        meta = {"path": md.path(out / "comparison.md"),
                "comparison": dg.MetadataValue.md(result.markdown),
                "seeds": len(config.seeds), "profile": config.profile}
        ps = result.per_seed
        flagged = sorted(set(ps[(ps["metric"] == "collapse") & (ps["value"] > 0)]["loss"]))
        meta["collapsed_losses"] = ", ".join(flagged) if flagged else "none"
        if "margin_curves.png" in result.pngs:
            meta["margin_curves"] = md.image(result.pngs["margin_curves.png"], "margins")
        strip = next((k for k in sorted(result.pngs) if k.startswith("strips/")), None)
        if strip:
            meta["example_queries"] = md.image(result.pngs[strip], strip)
        return dg.MaterializeResult(metadata=meta)

    return comparison


retrieval_assets = [_comparison_asset(d, d) for d in DATASETS]
if os.environ.get("SPHR_RETRIEVAL_MANIFEST"):
    retrieval_assets.append(_comparison_asset("manifest", os.environ["SPHR_RETRIEVAL_MANIFEST"]))
