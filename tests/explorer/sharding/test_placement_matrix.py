"""The heat map's numbers: each table's cost or bytes on the ranks that hold it."""
import numpy as np

from explorer.sharding.heatmap import placement_matrix


def test_every_kind_lands_on_its_ranks():
    tables = [{"key": f"t/{i}", "lookup_ms": 8.0 - i, "bytes": 100.0} for i in range(5)]
    assignment = {"t/0": 1, "t/1": "rw", "t/2": "dp", "t/3": {"kind": "cw", "ranks": [0, 1]},
                  "t/4": {"kind": "twrw", "ranks": [2, 3]}}
    order, ms = placement_matrix(tables, assignment, 4)
    assert [t["key"] for t in order] == [f"t/{i}" for i in range(5)]   # costliest first
    assert ms.tolist() == [[0, 8, 0, 0], [7 / 4] * 4, [6 / 4] * 4, [2.5, 2.5, 0, 0],
                           [0, 0, 2, 2]]
    _, nbytes = placement_matrix(tables, assignment, 4, field="bytes")
    assert np.allclose(nbytes[2], 100.0)   # a data-parallel table: all of it everywhere
    assert np.allclose(nbytes.sum(axis=1)[[0, 1, 3, 4]], 100.0)
