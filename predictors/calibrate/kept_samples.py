"""A calibration's training samples, kept on request (``calibrate --keep-samples``).

The kernel models are refitted from these without measuring again, which is how feature
sets are compared on identical samples (``benchmarks/feature_ab.py``).  Gzipped JSON:
``{"format", "version", "provenance", "classes": {class: [[node, ms], ...]}}``.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from ..utils.fileio import atomic_write_bytes

__all__ = ["save_samples", "load_samples"]

FORMAT, VERSION = "ml-dse/calibration-samples", 1


def save_samples(classes: dict[str, list[tuple[dict, float]]], provenance: dict,
                 path: str | os.PathLike) -> Path:
    """Write ``classes`` (op class -> (captured node, milliseconds) pairs), atomically."""
    path = Path(path)
    doc = {"format": FORMAT, "version": VERSION, "provenance": provenance,
           "classes": {cls: [[node, float(ms)] for node, ms in rows]
                       for cls, rows in classes.items()}}
    # shapes are tuples: lists in JSON
    atomic_write_bytes(path, gzip.compress(json.dumps(doc, default=str).encode()))
    return path


def load_samples(path: str | os.PathLike) -> tuple[dict[str, list[tuple[dict, float]]], dict]:
    """``(classes, provenance)`` from :func:`save_samples`; ValueError names what is wrong."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a calibration-samples file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: format: expected {FORMAT!r}")
    classes = {cls: [(node, float(ms)) for node, ms in rows]
               for cls, rows in doc.get("classes", {}).items()}
    return classes, doc.get("provenance", {})
