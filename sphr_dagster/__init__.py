"""The Dagster code location: Definitions, resources, IO manager, jobs, schedules, sensors."""
