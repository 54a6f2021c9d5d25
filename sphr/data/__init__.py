"""UK Biobank data layer: field catalog, header styles, the reader and ingest of exports
(real or from the synthetic generator, :mod:`sphr.synth`), outcomes, fingerprints."""
