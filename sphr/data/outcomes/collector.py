"""The reader's side hook (:class:`LinkedCollector`): blocks of linked columns in, each
participant's first records out, so memory follows participants, not records."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from sphr.data.outcomes.cells import LinkedCells
from sphr.data.outcomes.config import OutcomeConfig
from sphr.data.outcomes.followup import centre_countries, lost_to_follow_up
from sphr.data.outcomes.plan import LinkedPlan
from sphr.data.outcomes.sources import (
    algorithmic_records,
    cancer_registry_records,
    death_registry,
    first_occurrence_records,
    hospital_records,
)

if TYPE_CHECKING:  # the CLI parser imports this package; polars and pyarrow load on use
    import polars as pl
    import pyarrow as pa

    from sphr.data.export_layout import ExportLayout

#: blocks are gathered up to this many cells (rows x columns) before they are processed: a
#: real export's blocks are a few hundred rows wide with hundreds of linked columns, and each
#: pass has a fixed cost. A pass unpivots every cell before dropping the empty ones (~40 bytes
#: a cell), so 2 million cells (~80 MB) bound it: 10 million raised the peak of a 500,000-row
#: ingest by ~350 MB
_BUFFER_CELLS = 2_000_000


class LinkedCollector:
    """The reader's side hook: turns blocks of linked columns into first records.

    Per block it keeps only, per participant, outcome and source, the first dated record (and
    per source the first record of any code, and the date of death), so memory stays small
    however many array columns the export has. Call :meth:`flush` after the last block.
    """

    def __init__(self, layout: ExportLayout, plan: LinkedPlan, config: OutcomeConfig) -> None:
        self.layout, self.plan, self.config = layout, plan, config
        self._buffer: list[pa.Table] = []
        self._buffer_first_row = 1
        self.events: list[pl.DataFrame] = []
        self.any_records: list[pl.DataFrame] = []
        self.deaths: list[pl.DataFrame] = []
        self.codes_read: Counter[str] = Counter()
        self.codes_outside: Counter[str] = Counter()
        self.outside_categories: Counter[str] = Counter()
        self.undated: Counter[str] = Counter()
        self.reported_by: dict[str, Counter[str]] = {}
        self.countries: list[pl.DataFrame] = []
        self.lost: list[pl.DataFrame] = []
        self._membership: dict[tuple[str, str], tuple[str, ...]] = {}
        self.cells = LinkedCells(layout)

    @property
    def special_dates(self) -> dict[str, Counter[str]]:
        """UK Biobank's placeholder dates met so far, per field: date -> count."""
        return self.cells.special_dates

    def _outcomes_of(self, pairs: list[tuple[str, str]]
                     ) -> dict[tuple[str, str], tuple[str, ...]]:
        """(coding, code) -> the outcomes whose sets hold it."""
        for pair in pairs:
            if pair not in self._membership:
                coding, code = pair
                self._membership[pair] = tuple(o.name for o in self.config.outcomes
                                               if o.has_codes and o.matches(code, coding))
        return {p: self._membership[p] for p in pairs}

    # ---- blocks
    def __call__(self, table: pa.Table, first_row: int) -> None:
        if not self._buffer:
            self._buffer_first_row = first_row
        self._buffer.append(table)
        if sum(t.num_rows for t in self._buffer) * table.num_columns >= _BUFFER_CELLS:
            self.flush()

    def flush(self) -> None:
        """Process the gathered blocks."""
        import pyarrow as pa

        if self._buffer:
            table = pa.concat_tables(self._buffer)
            self._buffer = []
            self._process(table, self._buffer_first_row)

    def _process(self, table: pa.Table, first_row: int) -> None:
        import polars as pl

        df = pl.from_arrow(table)
        assert isinstance(df, pl.DataFrame)
        eid = df[self.layout.eid_column].cast(pl.Int64, strict=False)
        rows = pl.DataFrame({"row": pl.int_range(0, df.height, dtype=pl.UInt32, eager=True),
                             "eid": eid})
        self._follow_up_fields(df, rows, first_row)
        self._count_reported_by(df)
        records = self._records(df, rows, first_row)  # row, source, coding, code, date
        if not records:
            return
        record_schema = {"row": pl.UInt32, "source": pl.String, "coding": pl.String,
                         "code": pl.String, "date": pl.Date}
        rec = pl.concat([r.select(list(record_schema)).cast(record_schema) for r in records])
        pairs = rec.select("coding", "code").unique().rows()
        member = self._outcomes_of([(c, k) for c, k in pairs])
        self._keep(self._tally(rec, member), rows, member)

    def _follow_up_fields(self, df: pl.DataFrame, rows: pl.DataFrame, first_row: int) -> None:
        """Each participant's date lost to follow-up (191) and country (from the assessment
        centre, 54-0.0), kept for :func:`~sphr.data.outcomes.build.build_outcomes`."""
        lost = lost_to_follow_up(self.cells, df, rows, first_row, self.plan)
        if lost is not None:
            self.lost.append(lost)
        countries = centre_countries(self.cells, df, rows, first_row, self.plan)
        if countries is not None:
            self.countries.append(countries)

    def _count_reported_by(self, df: pl.DataFrame) -> None:
        """Tally the values of the "source of report" fields (First Occurrences, category 42)."""
        for col, (tag, _) in self.plan.reported_by.items():
            counts = df[col].str.strip_chars().drop_nulls().value_counts()
            tally = self.reported_by.setdefault(tag, Counter())
            for value, n in counts.iter_rows():
                tally[value] += n if value else 0

    def _records(self, df: pl.DataFrame, rows: pl.DataFrame, first_row: int
                 ) -> list[pl.DataFrame]:
        """Every source's records of the block, in :mod:`~sphr.data.outcomes.sources`' order;
        the death registry's dates of death are kept as they are read."""
        cells, plan = self.cells, self.plan
        records = [*hospital_records(cells, df, first_row, plan),
                   *cancer_registry_records(cells, df, first_row, plan),
                   *first_occurrence_records(cells, df, first_row, plan),
                   *algorithmic_records(cells, df, first_row, plan)]
        if "death" in plan.sources:
            death = death_registry(cells, df, rows, first_row, plan)
            self.deaths.append(death.deaths)
            self.any_records.append(death.any_record)
            records.extend(death.causes)
        return records

    def _tally(self, rec: pl.DataFrame,
               member: dict[tuple[str, str], tuple[str, ...]]) -> pl.DataFrame:
        """Count the codes read, outside every outcome and undated (the ingest report's
        check that the outcome table matches the export's coding); ``rec`` with the flags."""
        import polars as pl

        flags = pl.DataFrame([(c, k, not m) for (c, k), m in member.items()],
                             schema={"coding": pl.String, "code": pl.String,
                                     "outside": pl.Boolean}, orient="row")
        rec = (rec.join(flags, on=["coding", "code"], how="left")
               .with_columns(undated=pl.col("date").is_null()))
        for source, is_outside, undated, count in (
                rec.group_by("source", "outside", "undated").len().iter_rows()):
            self.codes_read[source] += count
            self.codes_outside[source] += count if is_outside else 0
            self.undated[source] += count if undated else 0
        outside = rec.filter(pl.col("outside") & (pl.col("coding") != "algorithm"))
        for category, count in outside["code"].str.slice(0, 3).value_counts().iter_rows():
            self.outside_categories[category] += count
        return rec

    def _keep(self, rec: pl.DataFrame, rows: pl.DataFrame,
              member: dict[tuple[str, str], tuple[str, ...]]) -> None:
        """Keep only each participant's first dated record per source and per outcome: the
        blocks' records are not held, so memory follows participants, not records."""
        import polars as pl

        dated = rec.filter(~pl.col("undated")).join(rows, on="row")
        # first record of any code per source (death's is its date, kept above)
        first = (dated.filter(pl.col("source") != "death").group_by("eid", "source")
                 .agg(pl.col("date").min()))
        if not first.is_empty():
            self.any_records.append(first)
        rows_ = [(c, k, o.name, s) for o in self.config.outcomes for s in o.sources
                 for (c, k), m in member.items() if o.name in m]
        if not rows_:
            return
        mapping = pl.DataFrame(rows_, schema={"coding": pl.String, "code": pl.String,
                                              "outcome": pl.String, "source": pl.String},
                               orient="row")
        self.events.append(dated.join(mapping, on=["coding", "code", "source"])
                           .group_by("eid", "outcome", "source").agg(pl.col("date").min()))

