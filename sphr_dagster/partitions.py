"""Per-sex partitions: every cohort-level stage runs for women and men separately."""

import dagster as dg

from sphr.labels import SEXES

sex_partitions = dg.StaticPartitionsDefinition(list(SEXES))
