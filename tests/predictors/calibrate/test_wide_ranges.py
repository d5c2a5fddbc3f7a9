"""The wide ranges real models use: vocabularies to 64k, tables to 10M rows."""
import numpy as np
import pytest

from predictors.calibrate.samples import (
    lm_step_gflop,
    random_dlrm,
    random_scenarios,
    random_transformer,
)


def _lm(doc):
    nodes = {n["id"]: n["params"] for n in doc["model"]["nodes"]}
    return nodes["tokens"], nodes["encoder"], doc["training"]["batch_size"]


def test_wide_lms_span_the_ranges_within_the_step_cap():
    docs = random_scenarios(80, 11, kinds=("transformer",), ranges="wide")
    vocab, seq, batch, layers = [], [], [], []
    for doc in docs:
        tokens, enc, b = _lm(doc)
        assert 1000 <= tokens["vocab"] <= 64000 and 32 <= tokens["seq_len"] <= 512
        assert 1 <= b <= 16 and 1 <= enc["count"] <= 6
        assert 128 - enc["heads"] < enc["hidden"] <= 1024 and enc["hidden"] % enc["heads"] == 0
        assert lm_step_gflop(tokens["vocab"], enc["hidden"], enc["ffn"], enc["count"],
                             tokens["seq_len"], b) <= 150
        vocab.append(tokens["vocab"]), seq.append(tokens["seq_len"]), batch.append(b)
        layers.append(enc["count"])
    assert max(vocab) >= 30000 and min(vocab) < 4000     # log-uniform: both ends
    assert max(seq) > 128 and max(batch) > 8 and max(layers) > 4


def test_a_tighter_cap_draws_smaller_steps():
    rng = np.random.default_rng(3)
    for _ in range(20):
        tokens, enc, b = _lm(random_transformer(rng, ranges="wide", max_gflop=10))
        assert lm_step_gflop(tokens["vocab"], enc["hidden"], enc["ffn"], enc["count"],
                             tokens["seq_len"], b) <= 10


def test_wide_dlrms_reach_millions_of_rows_and_large_batches_within_memory():
    rng = np.random.default_rng(5)
    rows, batches = [], []
    for _ in range(40):
        doc = random_dlrm(rng, ranges="wide", max_table_bytes=1e9)
        tables = doc["model"]["nodes"][2]["params"]["tables"]
        assert sum(t["rows"] * t["dim"] * 4 for t in tables) <= 1e9
        rows += [t["rows"] for t in tables]
        batches.append(doc["training"]["batch_size"])
    assert max(rows) > 2_000_000 and max(rows) <= 10_000_000 and min(rows) >= 10_000
    assert max(batches) > 1024 and max(batches) <= 4096 and min(batches) >= 128


def test_the_default_draws_stay_the_narrow_ones():
    assert random_scenarios(6, 7) == random_scenarios(6, 7, ranges="narrow")
    with pytest.raises(ValueError):
        random_transformer(np.random.default_rng(0), ranges="huge")
