"""Device profiles: versioned data (JSON plus ``.npz`` arrays, never pickle).

A profile holds what the predictor knows about one device: its figures (``DeviceSpec``),
per-op CPU overheads T1-T5, the op -> kernels launch map, learned kernel models per op
class, where it all came from (provenance) and how well it validates.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from .devices.specs import DeviceSpec
from .fileio import atomic_write_bytes

__all__ = ["PROFILE_FORMAT", "PROFILE_VERSION", "OpOverheads", "OverheadTable", "KernelModel",
           "DeviceProfile", "save_profile", "load_profile", "ProfileError",
           "KERNEL_MODEL_TYPES"]

PROFILE_FORMAT = "ml-dse/device-profile"
PROFILE_VERSION = 1


class ProfileError(ValueError):
    """A profile file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class OpOverheads:
    """CPU overheads of one op name, seconds (the papers' T1-T5), and the sample count."""

    t1: float
    t2: float
    t3: float
    t4: float
    t5: float
    n: int = 0

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("t1", "t2", "t3", "t4", "t5", "n")}

    @classmethod
    def from_json(cls, d: dict) -> "OpOverheads":
        return cls(float(d["t1"]), float(d["t2"]), float(d["t3"]), float(d["t4"]),
                   float(d["t5"]), int(d.get("n", 0)))


@dataclass
class OverheadTable:
    """Overheads per op name with a pooled default; ``autograd_t1`` is the extra gap the
    autograd engine adds between backward ops."""

    default: OpOverheads
    per_op: dict[str, OpOverheads] = field(default_factory=dict)
    autograd_t1: float = 0.0
    source: str = ""

    def for_op(self, name: str) -> OpOverheads:
        return self.per_op.get(name, self.default)

    def to_json(self) -> dict:
        return {"default": self.default.to_json(), "autograd_t1": self.autograd_t1,
                "source": self.source,
                "per_op": {k: v.to_json() for k, v in sorted(self.per_op.items())}}

    @classmethod
    def from_json(cls, d: dict) -> "OverheadTable":
        return cls(OpOverheads.from_json(d["default"]),
                   {k: OpOverheads.from_json(v) for k, v in d.get("per_op", {}).items()},
                   float(d.get("autograd_t1", 0.0)), d.get("source", ""))


class KernelModel(Protocol):
    """A fitted model of kernel time for one op class.

    ``predict_ms(nodes)`` takes captured op records (dicts as in ``capture``) and returns one
    duration per node in milliseconds, NaN where the model does not apply.
    ``to_json()`` returns ``(meta, arrays)``; ``from_json(meta, arrays)`` rebuilds it.
    """

    op_class: str

    def predict_ms(self, nodes: list[dict]) -> np.ndarray: ...

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]: ...


# type name -> class with a ``from_json(meta, arrays)`` classmethod; model modules register.
KERNEL_MODEL_TYPES: dict[str, type] = {}


@dataclass
class DeviceProfile:
    """Everything the predictor knows about one device."""

    name: str
    kind: str  # "measured" (calibrated here), "fitted" (public data), "datasheet"
    device: DeviceSpec
    overheads: OverheadTable | None = None
    launch_map: dict[str, list[str]] = field(default_factory=dict)
    kernel_models: dict[str, KernelModel] = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    validation: dict = field(default_factory=dict)


def _spec_to_json(spec: DeviceSpec) -> dict:
    return dataclasses.asdict(spec)


def _spec_from_json(d: dict) -> DeviceSpec:
    names = {f.name for f in dataclasses.fields(DeviceSpec)}
    return DeviceSpec(**{k: v for k, v in d.items() if k in names})


def save_profile(profile: DeviceProfile, path: str | os.PathLike) -> Path:
    """Write ``PATH`` (JSON) and, when models carry arrays, ``PATH`` with ``.npz`` beside."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    models = {}
    for op_class, model in profile.kernel_models.items():
        meta, arr = model.to_json()
        models[op_class] = meta
        for key, value in arr.items():
            arrays[f"{op_class}/{key}"] = np.asarray(value)
    doc = {"format": PROFILE_FORMAT, "version": PROFILE_VERSION, "name": profile.name,
           "kind": profile.kind, "device": _spec_to_json(profile.device),
           "overheads": profile.overheads.to_json() if profile.overheads else None,
           "launch_map": profile.launch_map, "kernel_models": models,
           "provenance": profile.provenance, "validation": profile.validation,
           "arrays": path.with_suffix(".npz").name if arrays else None}
    if arrays:
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        atomic_write_bytes(path.with_suffix(".npz"), buf.getvalue())
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())
    return path


def load_profile(path: str | os.PathLike) -> DeviceProfile:
    """Read a profile written by :func:`save_profile` (no pickle is ever loaded)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the profile: {exc}") from None
    if doc.get("format") != PROFILE_FORMAT:
        raise ProfileError(f"{path}: format: expected {PROFILE_FORMAT!r}")
    if doc.get("version") != PROFILE_VERSION:
        raise ProfileError(f"{path}: version: expected {PROFILE_VERSION}, "
                           f"got {doc.get('version')!r}")
    arrays: dict[str, dict[str, np.ndarray]] = {}
    if doc.get("arrays"):
        with np.load(path.parent / doc["arrays"], allow_pickle=False) as npz:
            for key in npz.files:
                op_class, name = key.split("/", 1)
                arrays.setdefault(op_class, {})[name] = npz[key]
    models = {}
    for op_class, meta in doc.get("kernel_models", {}).items():
        cls = KERNEL_MODEL_TYPES.get(meta.get("type"))
        if cls is None:
            raise ProfileError(f"{path}: kernel_models.{op_class}.type: unknown model type "
                               f"{meta.get('type')!r}")
        models[op_class] = cls.from_json(meta, arrays.get(op_class, {}))
    overheads = doc.get("overheads")
    return DeviceProfile(doc["name"], doc["kind"], _spec_from_json(doc["device"]),
                         OverheadTable.from_json(overheads) if overheads else None,
                         doc.get("launch_map", {}), models, doc.get("provenance", {}),
                         doc.get("validation", {}))
