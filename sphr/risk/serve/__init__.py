"""Serving new people with a fitted risk model, nothing refitted: ``sphr score``
(:mod:`~sphr.risk.serve.apply`), the scheduled re-scoring of an export
(:mod:`~sphr.risk.serve.refresh`), the drift check of a new export against the training
population (:mod:`~sphr.risk.serve.drift`) and re-anchoring the population's parts on a new
export's healthy people (:mod:`~sphr.risk.serve.reanchor`; docs/notes/TRANSPORT.md).

The room above the model (:mod:`sphr.risk.model`) and the report pages it renders
(:mod:`sphr.risk.report`); nothing of the fit of a run or of its validation imports it
(tests/test_architecture.py)."""
