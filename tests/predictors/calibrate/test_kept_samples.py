"""Kept calibration samples: round trip, bad files, and the feature A/B benchmark on them."""
import gzip
import runpy
import sys

import numpy as np
import pytest

from predictors.calibrate.kept_samples import load_samples, save_samples


def _mm(m, n, k):
    return {"name": "aten::mm", "input_shapes": ((m, k), (k, n)),
            "input_dtypes": ["float32"] * 2, "input_nnz": [None, None],
            "output_shapes": ((m, n),), "output_dtypes": ["float32"], "output_nnz": [None],
            "isolated": True}


def test_samples_round_trip_and_bad_files_are_named(tmp_path):
    rows = [(_mm(m, n, 64), 1e-6 * m * n) for m in (8, 64, 512) for n in (16, 100, 1024)]
    path = save_samples({"gemm": rows}, {"threads": 1, "date": "d"}, tmp_path / "s.json.gz")
    classes, prov = load_samples(path)
    assert prov["threads"] == 1 and len(classes["gemm"]) == 9
    node, ms = classes["gemm"][4]
    assert ms == pytest.approx(rows[4][1]) and node["input_shapes"][0] == [64, 64]
    with gzip.open(tmp_path / "bad.json.gz", "wt") as f:
        f.write('{"format": "something else"}')
    for bad in (tmp_path / "bad.json.gz", tmp_path / "missing.json.gz"):
        with pytest.raises(ValueError, match=bad.name):
            load_samples(bad)


@pytest.mark.slow   # refits every feature version; `make test-full`
def test_feature_ab_benchmark_refits_each_version(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(400):
        m, n, k = (int(x) for x in rng.integers(8, 512, 3))
        rows.append((_mm(m, n, k), 2e-8 * m * n * k * (1.5 if n % 8 else 1.0)))
    path = save_samples({"gemm": rows}, {"threads": 1}, tmp_path / "s.json.gz")
    monkeypatch.setattr(sys, "argv", ["feature_ab.py", str(path), "--versions", "1,2",
                                      "--splits", "2"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path("benchmarks/feature_ab.py", run_name="__main__")
    assert done.value.code == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "gemm" in x)
    v1, v2 = (float(c.rstrip("%")) for c in line.split()[2:4])
    assert v2 < v1  # the alignment feature explains the 1.5x of unaligned rows
