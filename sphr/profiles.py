"""The named run profiles, and the one default every entry point uses.

``demo`` sizes the cohort's triplets and the training so the whole pipeline runs in minutes
on a laptop CPU; ``paper`` uses the paper's settings (docs/METHODS.md). The stages' config
classes hold what each profile means (``CohortConfig.profile``, ``TrainConfig.profile``);
the CLI, the Dagster configs and ``python -m sphr_dagster run`` take their default from here.
"""

PROFILES: tuple[str, ...] = ("demo", "paper")
DEFAULT_PROFILE = "demo"
