"""Validating a run's risk groups on people no fit saw: Table 4's group validation and
Appendix C (:mod:`~sphr.risk.validation.groups`), discrimination (AUROC, C-index, risk
ratios; :mod:`~sphr.risk.validation.discrimination`), the linked records' outcomes
(:mod:`~sphr.risk.validation.linked`), what a score adds to age
(:mod:`~sphr.risk.validation.beyond`), the absolute risk's calibration and decision curves
(:mod:`~sphr.risk.validation.absolute`) and the groups' curves over the repeat visits
(:mod:`~sphr.risk.validation.curves`).

It reads the groups the fit assigned and never imports serving (:mod:`sphr.risk.serve`) or
the report (tests/test_architecture.py)."""
