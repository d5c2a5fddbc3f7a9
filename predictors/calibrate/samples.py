"""Random scenarios in the ranges the accuracy targets name (issue 3).

DLRM: 3-12 tables of 1e4-1e6 rows, dim 16-64, pooling 1-40, batch 128-1024.
Transformer LM: hidden 128-512, 1-4 layers, seq 32-128, batch 2-8.

Sizes are round numbers half of the time and any integer in the range otherwise: a GEMM
whose rows are not a multiple of 8 floats takes ~1.5x the time here, and users' models
are not all round.
"""
from __future__ import annotations

import numpy as np

from ..scenario.format import FORMAT, VERSION, validate_scenario

__all__ = ["random_dlrm", "random_transformer", "random_scenarios", "tiny_transformer"]


def _doc(name, nodes, edges, batch, platform) -> dict:
    return validate_scenario({
        "format": FORMAT, "version": VERSION, "name": name,
        "model": {"nodes": nodes, "edges": [{"source": s, "target": t} for s, t in edges]},
        "platform": platform, "training": {"batch_size": int(batch), "optimizer": "sgd",
                                           "dtype": "float32", "lr": 0.01}})


def _size(rng: np.random.Generator, round_values, lo: int, hi: int) -> int:
    """One of ``round_values``, or (half of the time) any integer in [lo, hi]."""
    return int(rng.choice(round_values) if rng.random() < 0.5 else rng.integers(lo, hi + 1))


def random_dlrm(rng: np.random.Generator, threads: int = 1) -> dict:
    dim = _size(rng, [16, 32, 64], 16, 64)
    tables = []
    for _ in range(int(rng.integers(3, 13))):
        dist = ({"kind": "uniform"} if rng.random() < 0.5
                else {"kind": "zipf", "alpha": float(np.round(rng.uniform(0.8, 1.4), 2))})
        tables.append({"rows": int(10 ** rng.uniform(4, 6)), "dim": dim,
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
    batch = _size(rng, [128, 256, 384, 512, 768, 1024], 128, 1024)
    return _doc(f"random DLRM ({len(tables)} tables, dim {dim}, batch {batch})", nodes,
                edges, batch, {"preset": "local-cpu", "threads": threads})


def random_transformer(rng: np.random.Generator, threads: int = 1) -> dict:
    heads = int(rng.choice([2, 4, 8]))
    hidden = _size(rng, [128, 192, 256, 384, 512], 128, 512)
    hidden -= hidden % heads
    layers = int(rng.integers(1, 5))
    seq = _size(rng, [32, 48, 64, 96, 128], 32, 128)
    batch = int(rng.integers(2, 9))
    nodes = [
        {"id": "tokens", "kind": "token_input",
         "params": {"vocab": _size(rng, [1000, 4000, 8000], 1000, 8000), "seq_len": seq}},
        {"id": "encoder", "kind": "transformer_layer",
         "params": {"hidden": hidden, "heads": heads, "ffn": 4 * hidden, "count": layers,
                    "dropout": 0.1}},
        {"id": "head", "kind": "lm_head", "params": {}},
        {"id": "loss", "kind": "loss", "params": {"kind": "cross_entropy"}},
    ]
    edges = [("tokens", "encoder"), ("encoder", "head"), ("head", "loss")]
    return _doc(f"random LM ({layers}x{hidden}, seq {seq}, batch {batch})", nodes, edges,
                batch, {"preset": "local-cpu", "threads": threads})


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
                     threads: int = 1) -> list[dict]:
    """``n`` scenarios alternating over ``kinds``, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    makers = {"dlrm": random_dlrm, "transformer": random_transformer}
    return [makers[kinds[i % len(kinds)]](rng, threads) for i in range(n)]
