"""The public GEMM measurements (NeuSight) as arrays, and where ``../shared/data`` is."""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..costs.gemm_features import GpuFigures, figures_from_neusight_config

__all__ = ["GemmMeasurements", "shared_data_dir", "microbench_dir", "neusight_dir", "load_neusight",
           "FLOOR_KERNEL_MS", "overhead_from_latencies"]

# The NeuSight latencies are op-level (launch, sync and event timing included): the
# smallest shapes take 46-89 us where the sgemm kernel itself runs a few us.  We take the
# 1st-percentile latency of a GPU as "overhead + FLOOR_KERNEL_MS", so that
# kernel time = latency - overhead.  4 us is the usual duration of a tiny cuBLAS sgemm.
FLOOR_KERNEL_MS = 0.004


def overhead_from_latencies(latency_ms) -> float:
    """A GPU's measurement overhead: its 1st-percentile latency less the floor kernel."""
    return float(np.percentile(np.asarray(latency_ms, dtype=np.float64), 1)) - FLOOR_KERNEL_MS


def shared_data_dir() -> Path | None:
    """``../shared/data`` next to the project root (or ``$ML_DSE_SHARED_DATA``), if present."""
    env = os.environ.get("ML_DSE_SHARED_DATA")
    candidates = [Path(env)] if env else []
    root = Path(__file__).resolve().parents[2]
    candidates += [root.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


def microbench_dir(name: str) -> Path | None:
    """``microbench/<name>`` of the shared data folder, when it is there."""
    base = shared_data_dir()
    path = base / "microbench" / name if base else None
    return path if path is not None and path.is_dir() else None


def neusight_dir() -> Path | None:
    return microbench_dir("neusight-gemm")


@dataclass
class GemmMeasurements:
    """Measured GEMMs of one GPU: shapes, latency (ms) and the GPU's figures."""

    figures: GpuFigures
    B: np.ndarray
    M: np.ndarray
    N: np.ndarray
    K: np.ndarray
    latency_ms: np.ndarray
    kernel: list[str]

    @property
    def name(self) -> str:
        return self.figures.name

    @property
    def overhead_ms(self) -> float:
        """Per-measurement overhead beside the kernel (see :data:`FLOOR_KERNEL_MS`)."""
        return overhead_from_latencies(self.latency_ms)

    def kernel_ms(self) -> np.ndarray:
        """Latency minus the measurement overhead, at least half the floor kernel."""
        return np.maximum(self.latency_ms - self.overhead_ms, FLOOR_KERNEL_MS / 2)

    def subset(self, idx: np.ndarray) -> "GemmMeasurements":
        return GemmMeasurements(self.figures, self.B[idx], self.M[idx], self.N[idx],
                                self.K[idx], self.latency_ms[idx],
                                [self.kernel[i] for i in np.asarray(idx)])


def load_neusight(folder: str | Path | None = None) -> list[GemmMeasurements]:
    """All GPUs of ``neusight-gemm`` (one CSV per GPU, figures from ``device_configs``)."""
    folder = Path(folder) if folder else neusight_dir()
    if folder is None or not folder.is_dir():
        raise FileNotFoundError("the NeuSight GEMM measurements are not there "
                                "(../shared/data/microbench/neusight-gemm)")
    out = []
    for path in sorted(folder.glob("*.csv")):
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("OPName") == "linear"]
        if not rows:
            continue
        name = rows[0]["Device"]
        config = folder / "device_configs" / (name.replace(" ", "_") + ".json")
        fig = figures_from_neusight_config(config)
        arr = np.array([[float(r["B"]), float(r["M"]), float(r["N"]), float(r["K"]),
                         float(r["Latency"])] for r in rows])
        out.append(GemmMeasurements(fig, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], arr[:, 4],
                                    [r["Kernel Name"] for r in rows]))
    return out
