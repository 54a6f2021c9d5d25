"""Dagster assets by stage; each a thin call into ``sphr``.

These modules do not use ``from __future__ import annotations``: Dagster reads
the ``Config`` annotations of asset functions at decoration time.
"""
