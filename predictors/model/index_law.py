"""Which rows an embedding table's lookups hit: the law the workload draws its indices
from (uniform, or a Zipf law), and the share of lookups that land in a block of rows."""
from __future__ import annotations

import math

__all__ = ["index_cdf", "row_block"]


def index_cdf(rows: int, distribution: dict, k: int) -> float:
    """The probability that a lookup of a table has an index below ``k``, for the indices
    the workload draws (uniform, or the floored continuous Zipf law on [1, rows + 1))."""
    if k <= 0:
        return 0.0
    if k >= rows:
        return 1.0
    if distribution["kind"] == "uniform":
        return k / rows
    a, top = float(distribution["alpha"]), float(rows + 1)
    if abs(a - 1.0) < 1e-9:
        return math.log(k + 1) / math.log(top)
    return ((k + 1) ** (1 - a) - 1) / (top ** (1 - a) - 1)


def row_block(rows: int, distribution: dict, rank: int, ranks: int) -> tuple[int, float]:
    """Rank ``rank``'s rows of a row-wise table (a contiguous block, as torchrec's
    row-wise sharding cuts them) and the share of the lookups that land in it: a Zipf
    table's hot rows are all in rank 0's."""
    block = -(-int(rows) // ranks)
    start = min(rows, rank * block)
    end = min(rows, start + block)
    return end - start, index_cdf(rows, distribution, end) - index_cdf(rows, distribution,
                                                                          start)
