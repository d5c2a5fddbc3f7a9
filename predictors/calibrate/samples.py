"""Random scenarios, in two sets of ranges.

``narrow`` (the default; issue 3's targets):
DLRM: 3-12 tables of 1e4-1e6 rows, dim 16-64, pooling 1-40, batch 128-1024.
Transformer LM: vocab 1k-8k, hidden 128-512, 1-4 layers, seq 32-128, batch 2-8.

``wide`` (the ranges real models use; ``calibrate`` and ``validate`` draw from them):
DLRM: 3-12 tables of 1e4-1e7 rows, batch 128-4096.
Transformer LM: vocab 1k-64k (BERT 30,522, GPT-2 50,257), hidden 128-1024, 1-6 layers,
seq 32-512, batch 1-16.  Sizes that span decades (rows, vocab, seq, batch) are
log-uniform.  A draw whose step would cost more than ``max_gflop`` (forward and backward
FLOPs, ~1.5 s a step on one core at that size) or whose tables would hold more than
``max_table_bytes`` is drawn again: the calibration's budget and this host's memory bound
what it can measure, and the kernel models extrapolate beyond (costs/large_ops.py).

Sizes are round numbers half of the time and any integer in the range otherwise: a GEMM
whose rows are not a multiple of 8 floats takes ~1.5x the time here, and users' models
are not all round.
"""
from __future__ import annotations

import numpy as np

from ..scenario.format import FORMAT, VERSION, validate_scenario

__all__ = ["random_dlrm", "random_transformer", "random_scenarios", "tiny_transformer",
           "RANGES", "lm_step_gflop"]

RANGES = ("narrow", "wide")
MAX_GFLOP = 150.0          # a wide draw's step: forward + backward FLOPs
MAX_TABLE_BYTES = 2e9      # a wide DLRM's tables, all together


def _doc(name, nodes, edges, batch, platform) -> dict:
    return validate_scenario({
        "format": FORMAT, "version": VERSION, "name": name,
        "model": {"nodes": nodes, "edges": [{"source": s, "target": t} for s, t in edges]},
        "platform": platform, "training": {"batch_size": int(batch), "optimizer": "sgd",
                                           "dtype": "float32", "lr": 0.01}})


def _size(rng: np.random.Generator, round_values, lo: int, hi: int) -> int:
    """One of ``round_values``, or (half of the time) any integer in [lo, hi]."""
    return int(rng.choice(round_values) if rng.random() < 0.5 else rng.integers(lo, hi + 1))


def _log_size(rng: np.random.Generator, round_values, lo: int, hi: int) -> int:
    """One of ``round_values``, or (half of the time) log-uniform in [lo, hi]."""
    if rng.random() < 0.5:
        return int(rng.choice(round_values))
    return int(round(float(np.exp(rng.uniform(np.log(lo), np.log(hi))))))


def random_dlrm(rng: np.random.Generator, threads: int = 1, ranges: str = "narrow",
                max_table_bytes: float = MAX_TABLE_BYTES) -> dict:
    if ranges == "wide":
        while True:
            doc = _dlrm(rng, threads, 7, [128, 256, 512, 1024, 2048, 4096], 128, 4096)
            tables = doc["model"]["nodes"][2]["params"]["tables"]
            if sum(t["rows"] * t["dim"] * 4 for t in tables) <= max_table_bytes:
                return doc
    if ranges != "narrow":
        raise ValueError(f"ranges: one of {RANGES}, got {ranges!r}")
    return _dlrm(rng, threads, 6, [128, 256, 384, 512, 768, 1024], 128, 1024)


def _dlrm(rng, threads, rows_exp, batches, batch_lo, batch_hi) -> dict:
    dim = _size(rng, [16, 32, 64], 16, 64)
    tables = []
    for _ in range(int(rng.integers(3, 13))):
        dist = ({"kind": "uniform"} if rng.random() < 0.5
                else {"kind": "zipf", "alpha": float(np.round(rng.uniform(0.8, 1.4), 2))})
        tables.append({"rows": int(10 ** rng.uniform(4, rows_exp)), "dim": dim,
                       "pooling": int(rng.integers(1, 41)), "distribution": dist})
    widths = [64, 128, 256, 512]
    bottom = [_size(rng, widths, 64, 512) for _ in range(int(rng.integers(1, 3)))]
    top = [_size(rng, widths, 64, 512) for _ in range(int(rng.integers(1, 3)))]
    nodes = [
        {"id": "dense", "kind": "dense_input", "params": {"features": int(rng.integers(8, 64))}},
        {"id": "bottom", "kind": "mlp", "params": {"layers": bottom + [dim], "final": "relu"}},
        {"id": "tables", "kind": "embedding_tables", "params": {"tables": tables}},
        {"id": "interaction", "kind": "interaction", "params": {"op": "dot"}},
        {"id": "top", "kind": "mlp", "params": {"layers": top + [1], "final": "sigmoid"}},
        {"id": "loss", "kind": "loss", "params": {"kind": "bce"}},
    ]
    edges = [("dense", "bottom"), ("bottom", "interaction"), ("tables", "interaction"),
             ("interaction", "top"), ("top", "loss")]
    batch = (_size(rng, batches, batch_lo, batch_hi) if batch_hi <= 1024
             else _log_size(rng, batches, batch_lo, batch_hi))
    return _doc(f"random DLRM ({len(tables)} tables, dim {dim}, batch {batch})", nodes,
                edges, batch, {"preset": "local-cpu", "threads": threads})


def lm_step_gflop(vocab: int, hidden: int, ffn: int, layers: int, seq: int,
                  batch: int) -> float:
    """Forward + backward GFLOP of a transformer LM's step (3x the forward's GEMMs):
    per layer the four projections, the FFN and attention's two batched GEMMs; the head."""
    tokens = batch * seq
    layer = 2.0 * tokens * (4 * hidden * hidden + 2 * hidden * ffn) + 4.0 * batch * seq * \
        seq * hidden
    return 3.0 * (layers * layer + 2.0 * tokens * hidden * vocab) / 1e9


def _wide_transformer(rng: np.random.Generator, threads: int, max_gflop: float) -> dict:
    while True:
        heads = int(rng.choice([2, 4, 8, 16]))
        hidden = _size(rng, [128, 256, 384, 512, 768, 1024], 128, 1024)
        hidden -= hidden % heads
        layers = int(rng.integers(1, 7))
        seq = _log_size(rng, [32, 64, 128, 256, 512], 32, 512)
        batch = _log_size(rng, [1, 2, 4, 8, 16], 1, 16)
        vocab = _log_size(rng, [1000, 8000, 30522, 32000, 50257], 1000, 64000)
        if lm_step_gflop(vocab, hidden, 4 * hidden, layers, seq, batch) <= max_gflop:
            return _lm(vocab, hidden, heads, layers, seq, batch, threads)


def _lm(vocab, hidden, heads, layers, seq, batch, threads, name: str = "") -> dict:
    nodes = [
        {"id": "tokens", "kind": "token_input", "params": {"vocab": vocab, "seq_len": seq}},
        {"id": "encoder", "kind": "transformer_layer",
         "params": {"hidden": hidden, "heads": heads, "ffn": 4 * hidden, "count": layers,
                    "dropout": 0.1}},
        {"id": "head", "kind": "lm_head", "params": {}},
        {"id": "loss", "kind": "loss", "params": {"kind": "cross_entropy"}},
    ]
    edges = [("tokens", "encoder"), ("encoder", "head"), ("head", "loss")]
    return _doc(name or f"random LM ({layers}x{hidden}, vocab {vocab}, seq {seq}, "
                        f"batch {batch})",
                nodes, edges, batch, {"preset": "local-cpu", "threads": threads})


def random_transformer(rng: np.random.Generator, threads: int = 1, ranges: str = "narrow",
                       max_gflop: float = MAX_GFLOP) -> dict:
    if ranges == "wide":
        return _wide_transformer(rng, threads, max_gflop)
    if ranges != "narrow":
        raise ValueError(f"ranges: one of {RANGES}, got {ranges!r}")
    heads = int(rng.choice([2, 4, 8]))
    hidden = _size(rng, [128, 192, 256, 384, 512], 128, 512)
    hidden -= hidden % heads
    layers = int(rng.integers(1, 5))
    seq = _size(rng, [32, 48, 64, 96, 128], 32, 128)
    batch = int(rng.integers(2, 9))
    vocab = _size(rng, [1000, 4000, 8000], 1000, 8000)
    return _lm(vocab, hidden, heads, layers, seq, batch, threads,
               name=f"random LM ({layers}x{hidden}, seq {seq}, batch {batch})")


def tiny_transformer(threads: int = 1) -> dict:
    """A transformer LM small enough that dispatch, not arithmetic, sets its step time."""
    nodes = [
        {"id": "tokens", "kind": "token_input", "params": {"vocab": 50, "seq_len": 4}},
        {"id": "encoder", "kind": "transformer_layer",
         "params": {"hidden": 16, "heads": 2, "ffn": 32, "count": 2, "dropout": 0.1}},
        {"id": "head", "kind": "lm_head", "params": {}},
        {"id": "loss", "kind": "loss", "params": {"kind": "cross_entropy"}},
    ]
    edges = [("tokens", "encoder"), ("encoder", "head"), ("head", "loss")]
    return _doc("tiny LM (2x16, seq 4, batch 1)", nodes, edges, 1,
                {"preset": "local-cpu", "threads": threads})


def random_scenarios(n: int, seed: int, kinds=("dlrm", "transformer"),
                     threads: int = 1, ranges: str = "narrow") -> list[dict]:
    """``n`` scenarios alternating over ``kinds``, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    makers = {"dlrm": random_dlrm, "transformer": random_transformer}
    return [makers[kinds[i % len(kinds)]](rng, threads, ranges) for i in range(n)]
