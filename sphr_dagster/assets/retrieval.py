"""Image-retrieval loss comparison assets, one per embedded dataset (or a user manifest)."""

import os

import dagster as dg

from sphr import layout
from sphr.settings import RunSettings
from sphr_dagster import metadata as md
from sphr_dagster.config import from_settings, library_config, stage_config
from sphr_dagster.resources import Compute, RunStorage

#: embedded datasets; SPHR_RETRIEVAL_MANIFEST adds the user's own image manifest
DATASETS = ("digits", "forensic")

RetrievalSettings = stage_config(
    "retrieval", "RetrievalSettings", "Losses, seeds and run profile (`quick` for the default "
    "pipeline; `demo`, `paper`): the fields of the library's "
    "``sphr.retrieval.profiles.ComparisonConfig``, defaults ``PIPELINE_COMPARISON``'s. `quick` "
    "and `demo` scale the Linear / DAMS margin steps to their epochs, warm AutoMargin up, pick "
    "the best epoch on held-out training subjects and train OCAM's S-bit heads (see "
    "docs/notes/RETRIEVAL.md); `paper` keeps the papers' per-epoch values.", module=__name__)


def _comparison_asset(dataset: str, source: str) -> dg.AssetsDefinition:
    @dg.asset(key=["retrieval", dataset], group_name="retrieval",
              description=f"Loss x metric comparison on {dataset} (mean ± SE over seeds): "
              "mAP, mAP@R, CMC, Recall@k, pair AUC, P@Z, Hamming (trained S-bit heads and "
              "projected codes); last- and best-epoch mAP, final margins, collapse flags; "
              "margin curves; query strips.")
    def comparison(context: dg.AssetExecutionContext, config: RetrievalSettings,
                   storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
        from sphr.retrieval import run_comparison

        out = layout.retrieval_dir(storage.run, dataset)
        settings = library_config("retrieval", config, device=compute.device)
        result = run_comparison(source, list(settings.losses), seeds=list(settings.seeds),
                                out_dir=out, device=settings.device, profile=settings.profile)
        meta = {"path": md.path(out / "comparison.md"),
                "comparison": dg.MetadataValue.md(result.markdown),
                "seeds": len(settings.seeds), "profile": settings.profile}
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


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    config = from_settings(RetrievalSettings, settings.stages["retrieval"])
    return dict.fromkeys(retrieval_assets, config)
