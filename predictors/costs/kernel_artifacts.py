"""The bundled kernel models trained on public measurements (``resources/kernel_models``):
``NAME.json`` (what the model is, how it was trained and validated) and ``NAME.npz`` (the
regressor's arrays, no pickle).

Each model is bound to a GPU's datasheet figures at use (``with_figures``), so one file
serves every GPU.  ``python benchmarks/gpu_kernels.py --write`` rebuilds them.
"""
from __future__ import annotations

import io
import json
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..utils.fileio import atomic_write_bytes
from .batched_gemm import BatchedGemmModel
from .conv_kernels import ConvKernelModel

__all__ = ["KERNEL_MODEL_DIR", "bundled_kernel_model", "load_kernel_model", "save_kernel_model"]

KERNEL_MODEL_DIR = Path(__file__).resolve().parents[2] / "resources" / "kernel_models"
_TYPES = {cls.type_name: cls for cls in (BatchedGemmModel, ConvKernelModel)}


def save_kernel_model(model, path: str | Path) -> Path:
    """Write ``path`` (.json) and its ``.npz``; the same model gives the same bytes (fixed
    zip timestamps, sorted keys)."""
    path = Path(path)
    meta, arrays = model.to_json()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            one = io.BytesIO()
            np.lib.format.write_array(one, np.asarray(arrays[key]), allow_pickle=False)
            zf.writestr(info, one.getvalue())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path.with_suffix(".npz"), buf.getvalue())
    meta = dict(meta, arrays=path.with_suffix(".npz").name)
    atomic_write_bytes(path, (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
    return path


def load_kernel_model(path: str | Path):
    """Read a model written by :func:`save_kernel_model` (ValueError names the file)."""
    path = Path(path)
    try:
        meta = json.loads(path.read_text())
        cls = _TYPES.get(meta.get("type"))
        if cls is None:
            raise ValueError(f"unknown kernel model type {meta.get('type')!r}")
        with np.load(path.with_suffix(".npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        return cls.from_json(meta, arrays)
    except (OSError, KeyError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


@lru_cache(maxsize=8)
def bundled_kernel_model(name: str):
    """The bundled model ``name`` (``gpu-bmm``, ``gpu-conv``), or None when the file is
    absent."""
    path = KERNEL_MODEL_DIR / f"{name}.json"
    return load_kernel_model(path) if path.is_file() else None
