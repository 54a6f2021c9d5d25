"""UK Biobank data layer: field catalog, synthetic cohort, ingest of real exports."""
