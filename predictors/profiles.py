"""Device profiles: versioned data (JSON plus ``.npz`` arrays, never pickle).

A profile holds what the predictor knows about one device: its figures (``DeviceSpec``),
per-op CPU overheads T1-T5, the op -> kernels launch map, learned kernel models per op
class, a measured device's step-footprint curve (``devices.footprint``), where it all
came from (provenance) and how well it validates.
"""
from __future__ import annotations

import dataclasses
import importlib
import io
import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from .hardware.specs import DeviceSpec, cpu_signature
from .model.footprint import FootprintScale
from .utils.fileio import atomic_write_bytes

__all__ = ["PROFILE_FORMAT", "PROFILE_VERSION", "OpOverheads", "OverheadTable", "KernelModel",
           "DeviceProfile", "save_profile", "load_profile", "ProfileError",
           "KERNEL_MODEL_TYPES", "record_validation", "profile_file", "other_cpu_note",
           "cache_dir", "host_check_path", "read_host_check", "write_host_check",
           "host_ratios", "scaled_to_host", "from_another_cpu", "on_this_host",
           "unsteady_note", "UNSTEADY_SPREAD"]

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
    # T1 grows with the data the op and the compute op before it touch (frees, page
    # faults): seconds per byte of their roofline bytes, added to ``t1`` by the costing.
    t1_per_byte: float = 0.0
    # ... up to this many bytes (0: no limit): the gap grows while the ops around it
    # evict more of the caches that Python and the dispatcher run from, and stops
    # growing once they have evicted them all
    t1_bytes_cap: float = 0.0

    def t1_at(self, nbytes: float) -> float:
        """T1 beside ``nbytes`` of data (the op's and the op's before it)."""
        if self.t1_bytes_cap:
            nbytes = min(nbytes, self.t1_bytes_cap)
        return self.t1 + self.t1_per_byte * nbytes

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in ("t1", "t2", "t3", "t4", "t5", "n")}
        if self.t1_per_byte:
            out["t1_per_byte"] = self.t1_per_byte
        if self.t1_bytes_cap:
            out["t1_bytes_cap"] = self.t1_bytes_cap
        return out

    @classmethod
    def from_json(cls, d: dict) -> "OpOverheads":
        return cls(float(d["t1"]), float(d["t2"]), float(d["t3"]), float(d["t4"]),
                   float(d["t5"]), int(d.get("n", 0)), float(d.get("t1_per_byte", 0.0)),
                   float(d.get("t1_bytes_cap", 0.0)))


@dataclass
class OverheadTable:
    """Overheads per op name with a pooled default; ``autograd_t1`` is the extra gap the
    autograd engine adds between backward ops."""

    default: OpOverheads
    per_op: dict[str, OpOverheads] = field(default_factory=dict)
    autograd_t1: float = 0.0
    source: str = ""
    step_s: float = 0.0  # per-iteration CPU time outside any op (Python loop, zero_grad)
    # the bytes a gap's ``t1_per_byte`` counts: "op" (the op's and the op's before it),
    # or "op+step" (those plus the bytes the whole step writes: the step's data evict the
    # caches Python and the dispatcher run from, whatever the op beside the gap touches)
    gap_bytes: str = "op"
    # the training loop's time grows with the parameters it walks (``zero_grad``, the
    # optimizer's loop): seconds per optimizer update op of the step, added to ``step_s``
    step_s_per_update: float = 0.0

    def step_tail_s(self, updates: int) -> float:
        """The training loop's own time in a step with ``updates`` optimizer ops."""
        return self.step_s + self.step_s_per_update * updates

    def for_op(self, name: str, phase: str | None = None,
               previous: str | None = None) -> OpOverheads:
        """Overheads of ``name``, most specific entry first: ``phase:name<previous`` (the
        compute op before it on the thread), ``phase:name`` (e.g.
        ``optimizer:aten::add_``), ``name``, then the default."""
        if phase is not None:
            keys = ([f"{phase}:{name}<{previous}"] if previous else []) + [f"{phase}:{name}"]
            for key in keys:
                hit = self.per_op.get(key)
                if hit is not None:
                    return hit
        return self.per_op.get(name, self.default)

    def to_json(self) -> dict:
        out = {"default": self.default.to_json(), "autograd_t1": self.autograd_t1,
               "source": self.source, "step_s": self.step_s,
               "per_op": {k: v.to_json() for k, v in sorted(self.per_op.items())}}
        if self.gap_bytes != "op":
            out["gap_bytes"] = self.gap_bytes
        if self.step_s_per_update:
            out["step_s_per_update"] = self.step_s_per_update
        return out

    @classmethod
    def from_json(cls, d: dict) -> "OverheadTable":
        return cls(OpOverheads.from_json(d["default"]),
                   {k: OpOverheads.from_json(v) for k, v in d.get("per_op", {}).items()},
                   float(d.get("autograd_t1", 0.0)), d.get("source", ""),
                   float(d.get("step_s", 0.0)), str(d.get("gap_bytes", "op")),
                   float(d.get("step_s_per_update", 0.0)))


class KernelModel(Protocol):
    """A fitted model of kernel time for one op class.

    ``predict_ms(nodes)`` takes captured op records (dicts as in ``capture``) and returns one
    duration per node in milliseconds, NaN where the model does not apply.
    ``to_json()`` returns ``(meta, arrays)``; ``from_json(meta, arrays)`` rebuilds it.
    """

    op_class: str

    def predict_ms(self, nodes: list[dict]) -> np.ndarray: ...

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]: ...


# type name -> class with a ``from_json(meta, arrays)`` classmethod; model modules register
# themselves on import, and :func:`load_profile` imports the modules listed here first.
KERNEL_MODEL_TYPES: dict[str, type] = {}
KERNEL_MODEL_MODULES = ["predictors.costs.learned_models", "predictors.costs.gpu_gemm",
                        "predictors.costs.gpu_embedding", "predictors.costs.gpu_roofline",
                        "predictors.costs.tensor_core_gemm"]


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
    footprint_scale: FootprintScale | None = None  # CPU steps whose data stay cached
    # measured collectives among processes of this host (CPU ranks): {"gloo": {ranks:
    # {kind: [[bytes, us], ...]}}}
    collectives: dict = field(default_factory=dict)


def _spec_to_json(spec: DeviceSpec) -> dict:
    return dataclasses.asdict(spec)


def _spec_from_json(d: dict) -> DeviceSpec:
    names = {f.name for f in dataclasses.fields(DeviceSpec)}
    return DeviceSpec(**{k: v for k, v in d.items() if k in names})


def save_profile(profile: DeviceProfile, path: str | os.PathLike) -> Path:
    """Write ``PATH`` (JSON) and, when models carry arrays, ``PATH`` with ``.npz`` beside."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
           "footprint_scale": (profile.footprint_scale.to_json()
                               if profile.footprint_scale else None),
           "collectives": profile.collectives or None,
           "arrays": path.with_suffix(".npz").name if arrays else None}
    if arrays:
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        atomic_write_bytes(path.with_suffix(".npz"), buf.getvalue())
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())
    return path


def record_validation(path: str | os.PathLike, key: str, figures: dict) -> Path:
    """Store ``figures`` as ``validation[key]`` of the profile file at ``path`` (atomic;
    the models and their arrays are left as they are)."""
    path = Path(path)
    doc = _read_doc(path)
    validation = doc.get("validation") if isinstance(doc.get("validation"), dict) else {}
    validation[key] = figures
    doc["validation"] = validation
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())
    return path


def profile_file(profile: "DeviceProfile") -> Path | None:
    """The bundled file a profile was loaded from, or None."""
    return next((p for p in bundled_profiles() if _cached(p) is profile), None)


def load_profile(path: str | os.PathLike) -> DeviceProfile:
    """Read a profile written by :func:`save_profile` (no pickle is ever loaded).

    Any problem raises :class:`ProfileError` naming the file.
    """
    path = Path(path)
    try:
        return _load_profile(path)
    except ProfileError as exc:
        if str(path) in str(exc):
            raise
        raise ProfileError(f"{path}: {exc}") from None  # a model's own complaint
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read {exc.filename or 'a file'}: "
                           f"{exc.strerror or exc}") from None
    except (AttributeError, TypeError, KeyError, ValueError, IndexError, OverflowError,
            EOFError, RecursionError, zipfile.BadZipFile) as exc:
        raise ProfileError(f"{path}: malformed profile ({type(exc).__name__}: {exc})") from None


def _read_doc(path: Path) -> dict:
    """A profile file's JSON, its format and version checked."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the profile: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT:
        raise ProfileError(f"{path}: format: expected {PROFILE_FORMAT!r}")
    if doc.get("version") != PROFILE_VERSION:
        raise ProfileError(f"{path}: version: expected {PROFILE_VERSION}, "
                           f"got {doc.get('version')!r}")
    return doc


def _load_profile(path: Path) -> DeviceProfile:
    doc = _read_doc(path)
    arrays: dict[str, dict[str, np.ndarray]] = {}
    if doc.get("arrays"):
        with np.load(path.parent / doc["arrays"], allow_pickle=False) as npz:
            for key in npz.files:
                op_class, name = key.split("/", 1)
                arrays.setdefault(op_class, {})[name] = npz[key]
    for module in KERNEL_MODEL_MODULES:
        importlib.import_module(module)
    models = {}
    for op_class, meta in doc.get("kernel_models", {}).items():
        cls = KERNEL_MODEL_TYPES.get(meta.get("type"))
        if cls is None:
            raise ProfileError(f"{path}: kernel_models.{op_class}.type: unknown model type "
                               f"{meta.get('type')!r}")
        models[op_class] = cls.from_json(meta, arrays.get(op_class, {}))
    spec = _spec_from_json(doc["device"])
    for model in models.values():  # models that featurize with the device's figures
        if getattr(model, "device", spec) is None:
            model.device = spec
    overheads = doc.get("overheads")
    profile = DeviceProfile(doc["name"], doc["kind"], spec,
                            OverheadTable.from_json(overheads) if overheads else None,
                            doc.get("launch_map", {}), models, doc.get("provenance", {}),
                            doc.get("validation", {}))
    if isinstance(doc.get("collectives"), dict):
        profile.collectives = doc["collectives"]
    if doc.get("footprint_scale"):
        try:
            profile.footprint_scale = FootprintScale.from_json(doc["footprint_scale"])
        except ValueError as exc:
            raise ProfileError(f"{path}: {exc}") from None
    _check_loaded(path, profile, doc, arrays)
    return profile


# Names of figures that are rates (must be > 0) or times and clocks (>= 0; 0: unknown).
_POSITIVE_KEYS = ("peak_flops", "vector_flops", "mem_bw", "bw", "flops")
_TIME_KEYS = ("_ms", "_s", "_us", "floor", "t1", "t2", "t3", "t4", "t5", "latency",
              "clock_mhz")


def _check_numbers(where: str, value, key: str = "") -> None:
    """Every number under ``value`` finite; rates positive and times non-negative, by
    their key's name (a NaN or negative figure would predict NaN or negative times)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_numbers(f"{where}.{k}", v, str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_numbers(f"{where}[{i}]", v, key)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ProfileError(f"{where}: not a finite number ({value!r})")
        low = key.lower()
        if value <= 0 and any(p in low for p in _POSITIVE_KEYS):
            raise ProfileError(f"{where}: must be positive, got {value!r}")
        if value < 0 and any(low.endswith(t) or low == t for t in _TIME_KEYS):
            raise ProfileError(f"{where}: must not be negative, got {value!r}")


def _check_loaded(path: Path, profile: DeviceProfile, doc: dict, arrays: dict) -> None:
    """What makes a profile unusable, named before it predicts anything: device figures
    that are not positive numbers, non-finite or negative overheads and model constants,
    arrays holding NaN, provenance that is not an object."""
    dev = profile.device
    if dev.kind not in ("cpu", "gpu"):
        raise ProfileError(f"{path}: device.kind: expected 'cpu' or 'gpu', got {dev.kind!r}")
    for f in dataclasses.fields(DeviceSpec):
        value = getattr(dev, f.name)
        if isinstance(f.default, (int, float)) and (
                isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ProfileError(f"{path}: device.{f.name}: expected a number, got {value!r}")
    if not isinstance(dev.peak_flops, dict) or "float32" not in dev.peak_flops:
        raise ProfileError(f"{path}: device.peak_flops: needs a float32 figure")
    for name, value in [("mem_bw", dev.mem_bw), ("vector_flops", dev.vector_flops)] + [
            (f"peak_flops.{k}", v) for k, v in dev.peak_flops.items()]:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 < value < math.inf:
            raise ProfileError(f"{path}: device.{name}: must be a positive number, "
                               f"got {value!r}")
    _check_numbers(f"{path}: device", doc["device"])
    if doc.get("overheads"):
        _check_numbers(f"{path}: overheads", doc["overheads"])
    for op_class, meta in doc.get("kernel_models", {}).items():
        _check_numbers(f"{path}: kernel_models.{op_class}", meta)
    for op_class, arrs in arrays.items():
        for key, arr in arrs.items():
            # a threshold may be +inf (a split that sends only missing values one way)
            if arr.dtype.kind != "f":
                continue
            bad = np.isnan(arr) if "threshold" in key else ~np.isfinite(arr)
            if bad.any():
                raise ProfileError(f"{path}: arrays {op_class}/{key}: holds "
                                   f"{int(bad.sum())} non-finite value(s)")
    if not isinstance(profile.provenance, dict):
        raise ProfileError(f"{path}: provenance: expected an object")
    threads = profile.provenance.get("threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ProfileError(f"{path}: provenance.threads: expected a positive integer, "
                           f"got {threads!r}")
    if not isinstance(profile.validation, dict):
        raise ProfileError(f"{path}: validation: expected an object")


# --- finding profiles -------------------------------------------------------------------

BUNDLED_PROFILES = Path(__file__).resolve().parent.parent / "resources" / "profiles"
_CACHE: dict[tuple, DeviceProfile] = {}


def _cached(path: Path) -> DeviceProfile:
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _CACHE:
        _CACHE[key] = load_profile(path)
    return _CACHE[key]


def bundled_profiles() -> list[Path]:
    """Profile files shipped in ``resources/profiles`` (JSON files with the profile format)."""
    if not BUNDLED_PROFILES.is_dir():
        return []
    out = []
    for path in sorted(BUNDLED_PROFILES.rglob("*.json")):
        try:
            with open(path) as f:
                head = f.read(200)
        except OSError:
            continue
        if PROFILE_FORMAT in head:
            out.append(path)
    return out


def resolve_profile(name_or_path: str) -> DeviceProfile:
    """A profile by file path, or by the name of a bundled profile."""
    path = Path(name_or_path)
    if path.suffix == ".json" and path.exists():
        return _cached(path)
    for candidate in bundled_profiles():
        if candidate.stem == name_or_path or _cached(candidate).name == name_or_path:
            return _cached(candidate)
    known = ", ".join(p.stem for p in bundled_profiles()) or "none"
    raise ProfileError(f"no profile {name_or_path!r} (a path, or one of: {known})")


def default_profile(device_name: str, kind: str, threads: int = 1) -> DeviceProfile | None:
    """The bundled profile for a GPU by the name it reports (a measured one before one
    fitted from public data), or for the local CPU with ``threads`` threads; None where
    none is bundled (the roofline then applies)."""
    fallback, cpus = None, []
    for path in bundled_profiles():
        try:
            prof = _cached(path)
        except (ProfileError, OSError, KeyError, ValueError):
            continue
        if kind == "cpu" and prof.device.kind == "cpu":
            if int(prof.provenance.get("threads", 1)) == threads:
                cpus.append(prof)
        elif kind != "cpu" and prof.device.name == device_name:
            if prof.kind == "measured":
                return prof
            fallback = fallback or prof
    if cpus:
        # this CPU's own calibration first, then one with its vector ISA, then its vendor's

        host = cpu_signature()
        isa, vendor = host.rsplit(", ", 1)[-1], host.split(" ", 1)[0]

        def distance(p):
            sig = str(p.provenance.get("cpu_signature") or "")
            return (sig != host, not sig.endswith(isa), not sig.startswith(vendor), not sig)

        return min(cpus, key=distance)
    return fallback


def other_cpu_note(profile: DeviceProfile | None,
                   how: str = "`python -m predictors calibrate --device cpu`") -> str | None:
    """A note when a CPU ``profile`` was calibrated on another kind of CPU than this one
    (its figures then describe that CPU, not the one a local prediction runs on);
    ``how`` names the way to calibrate this one."""
    if not from_another_cpu(profile):
        return None
    theirs, host = profile.provenance["cpu_signature"], cpu_signature()
    return (f"the profile was calibrated on another CPU ({theirs}) than this one ({host}): "
            f"{how} measures this one")


# The GEMM probe's 90th over its 10th percentile through a calibration beyond which the
# machine's speed changed enough to shift the fitted models (a shared VM's neighbours).
UNSTEADY_SPREAD = 1.15


def unsteady_note(profile: DeviceProfile | None) -> str | None:
    """A note when ``profile`` was calibrated while the machine's speed changed: the
    speed probe taken through the calibration spread by more than
    :data:`UNSTEADY_SPREAD`, so its models mix fast and slow spells."""
    ref = (profile.provenance.get("speed_reference") or {}) if profile is not None else {}
    low, high = ref.get("gemm_gflops_p10"), ref.get("gemm_gflops_p90")
    if not low or not high or high <= UNSTEADY_SPREAD * low:
        return None
    return (f"the machine's speed changed while this profile was calibrated (a GEMM probe "
            f"ran at {low:.0f}-{high:.0f} GFLOP/s, 10th-90th percentile): its figures mix "
            f"fast and slow spells; calibrate again on an idle machine")


# --- a bundled CPU profile scaled to this host -------------------------------------------

HOST_CHECK_FORMAT = "ml-dse/host-check"
HOST_CHECK_VERSION = 1
# The kernel classes that a GEMM's rate sets; every other CPU class is memory-bound
# (embeddings gather rows, elementwise ops, reductions and copies stream their bytes).
GEMM_CLASSES = ("gemm",)


def cache_dir() -> Path:
    """Where the core caches what it measured on this machine: ``$ML_DSE_CACHE``, else
    ``$XDG_CACHE_HOME/ml-dse``, else ``~/.cache/ml-dse``."""
    if os.environ.get("ML_DSE_CACHE"):
        return Path(os.environ["ML_DSE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ml-dse"


def host_check_path(threads: int = 1) -> Path:
    """The cached host check for ``threads`` intra-op threads."""
    return cache_dir() / f"host-check-{int(threads)}t.json"


def host_key(threads: int = 1) -> dict:
    """What a cached host check is valid for: this CPU's signature, the torch version and
    the thread count (another of any of them and the check is taken again)."""
    import torch  # deferred: only a host check needs it

    return {"cpu_signature": cpu_signature(), "torch": torch.__version__.split("+")[0],
            "threads": int(threads)}


def read_host_check(threads: int = 1) -> dict | None:
    """The cached host check of this host for ``threads`` threads, or None when there is
    none, it is unreadable, or it was taken on another host, torch or thread count."""
    try:
        doc = json.loads(host_check_path(threads).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != HOST_CHECK_FORMAT \
            or doc.get("version") != HOST_CHECK_VERSION or doc.get("host") != host_key(threads):
        return None
    figures = doc.get("figures")
    if not isinstance(figures, dict) or not all(
            isinstance(figures.get(k), (int, float)) and 0 < figures[k] < math.inf
            for k in ("gemm_gflops", "stream_gbps")):
        return None
    return doc


def write_host_check(figures: dict, threads: int = 1, date: str = "") -> dict:
    """Cache ``figures`` (``gemm_gflops``, ``stream_gbps``, ``dispatch_us``) as this
    host's check for ``threads`` threads."""
    doc = {"format": HOST_CHECK_FORMAT, "version": HOST_CHECK_VERSION,
           "host": host_key(threads), "date": date, "figures": figures}
    path = host_check_path(threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())
    return doc


def _ratio(here, there) -> float | None:
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf
             for v in (here, there))
    return float(here) / float(there) if ok else None


def host_ratios(profile: DeviceProfile, figures: dict) -> dict:
    """How fast this host (``figures`` of its host check) runs against the host
    ``profile`` was calibrated on: ``gemm``, ``memory`` and ``dispatch`` speed ratios
    (above 1: this host is faster; None: the profile records no figure to compare).

    The profile's GEMM and streaming rates are its ``speed_reference`` (the same probe),
    or its own ``host_check``; its dispatch cost only ``host_check.dispatch_us``.  The
    profiler's cost per event, which older profiles record, does not stand in for it:
    on the Xeon VM it runs 0.73x as fast as on the Zen 4 VM, while the constant parts of
    the gaps between ops that each VM's calibration measured are 11 % shorter on the Xeon
    (median over the 207 op keys both profiles hold)."""
    prov = profile.provenance
    theirs = prov.get("host_check") if isinstance(prov.get("host_check"), dict) else {}
    ref = prov.get("speed_reference") if isinstance(prov.get("speed_reference"), dict) else {}
    return {"gemm": _ratio(figures.get("gemm_gflops"),
                           theirs.get("gemm_gflops", ref.get("gemm_gflops"))),
            "memory": _ratio(figures.get("stream_gbps"),
                             theirs.get("stream_gbps", ref.get("stream_gbps"))),
            "dispatch": _ratio(theirs.get("dispatch_us"), figures.get("dispatch_us"))}


class HostScaledModel:
    """A kernel model whose times are divided by ``speed`` (this host's speed over the
    profile's host for the model's class); not saved (:meth:`to_json` refuses)."""

    def __init__(self, model: KernelModel, speed: float):
        self.model, self.speed = model, float(speed)
        self.op_class = model.op_class
        metrics = dict(getattr(model, "metrics", None) or {})
        if metrics.get("top_flops_per_s"):  # a rate: this host's
            metrics["top_flops_per_s"] = metrics["top_flops_per_s"] * self.speed
        self.metrics = metrics

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        return np.asarray(self.model.predict_ms(nodes), dtype=float) / self.speed

    def to_json(self):
        raise ProfileError("a profile scaled to this host is not saved: save the bundled "
                           "one, or calibrate this host")

    def __getattr__(self, name):
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)


def scaled_to_host(profile: DeviceProfile, figures: dict, date: str = "") -> DeviceProfile:
    """``profile`` (a CPU profile calibrated on another host) scaled to this host by its
    host check ``figures``: GEMM kernel times and the roofline's FLOP rates by the GEMM
    ratio, the other kernel classes and the roofline's bandwidths by the streaming ratio,
    and the CPU overheads (T1-T5, per-byte gap terms, the training loop's time) by the dispatch
    ratio.  A ratio the profile cannot compare leaves its part as it is.  The copy
    records the ratios and a note in ``provenance.host_scaling``; the original is not
    changed."""
    r = host_ratios(profile, figures)
    gemm, memory, dispatch = (r[k] or 1.0 for k in ("gemm", "memory", "dispatch"))
    dev = profile.device
    device = dataclasses.replace(
        dev, peak_flops={k: v * gemm for k, v in dev.peak_flops.items()},
        vector_flops=dev.vector_flops * memory, mem_bw=dev.mem_bw * memory,
        **({"stream_bytes_per_s": dev.stream_bytes_per_s * memory}
           if getattr(dev, "stream_bytes_per_s", 0) else {}))
    models = {c: HostScaledModel(m, gemm if c in GEMM_CLASSES else memory)
              for c, m in profile.kernel_models.items()}
    overheads = None
    if profile.overheads is not None:
        o = profile.overheads

        def slower(e: OpOverheads) -> OpOverheads:
            return dataclasses.replace(e, **{k: getattr(e, k) / dispatch for k in
                                             ("t1", "t2", "t3", "t4", "t5", "t1_per_byte")})

        overheads = dataclasses.replace(
            o, default=slower(o.default), per_op={k: slower(v) for k, v in o.per_op.items()},
            autograd_t1=o.autograd_t1 / dispatch, step_s=o.step_s / dispatch,
            step_s_per_update=o.step_s_per_update / dispatch,
            source=f"{o.source} (scaled to this host)" if o.source else o.source)
    provenance = dict(profile.provenance)
    provenance["host_scaling"] = {**r, "date": date,
                                  "note": host_scaling_note(profile.name, r, date)}
    return dataclasses.replace(profile, device=device, overheads=overheads,
                               kernel_models=models, provenance=provenance)


def host_scaling_note(name: str, ratios: dict, date: str = "") -> str:
    """``bundled profile 'X' scaled to this host: GEMM x1.31, memory x0.92, dispatch
    x1.12 (host check DATE)``: how much faster this host runs each part."""
    def fig(key):
        return f"x{ratios[key]:.2f}" if ratios.get(key) else \
            "not scaled (the profile records no figure for it)"
    when = f" (host check {date[:10]})" if date else ""
    return (f"bundled profile {name!r} scaled to this host: GEMM {fig('gemm')}, memory "
            f"{fig('memory')}, dispatch {fig('dispatch')}{when}")


def from_another_cpu(profile: DeviceProfile | None) -> bool:
    """Whether ``profile`` is a CPU profile calibrated on a CPU other than this one."""
    if profile is None or profile.device.kind != "cpu":
        return False
    theirs = profile.provenance.get("cpu_signature")
    return bool(theirs) and theirs != cpu_signature()


def on_this_host(profile: DeviceProfile | None, threads: int = 1) -> DeviceProfile | None:
    """The bundled CPU ``profile`` that :func:`default_profile` chose, scaled to this host
    when a host check of this host is cached (``python -m predictors host-check`` takes
    it); otherwise ``profile`` itself.  A profile of this very CPU model is scaled too:
    two VMs of one CPU model can stream memory at half each other's rate (a neighbour's
    load, another memory configuration), and the check measures this one."""
    if profile is None or profile.device.kind != "cpu" or profile_file(profile) is None:
        return profile
    check = read_host_check(threads)
    if check is None:
        return profile
    key = (id(profile), json.dumps(check, sort_keys=True))
    if key not in _SCALED:
        _SCALED.clear()  # one host check at a time
        _SCALED[key] = (profile, scaled_to_host(profile, check["figures"], check.get("date", "")))
    return _SCALED[key][1]


_SCALED: dict[tuple, tuple[DeviceProfile, DeviceProfile]] = {}
