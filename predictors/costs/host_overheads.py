"""The CPU side of a GPU step: the host's dispatch overheads, shared by every GPU of it.

A GPU training step spends its CPU time in Python, the dispatcher, autograd and the
allocator: that belongs to the *host* (its CPU, torch version and Python), not to the GPU.
The GPU contributes its launch path only (T4, the kernel-launch call).  So a prediction
takes its per-op overheads T1-T5 from one host table, the same for every GPU model on
that host, and swaps in the launch cost of the GPU's generation where one is measured.

Host tables live in ``resources/hosts/<name>.json`` (format ``ml-dse/host``): a named host
with its CPU, torch version, where the figures come from, and its
:class:`~predictors.profiles.OverheadTable`.  ``benchmarks/host_overheads.py build``
writes them from the public traces in ``../shared/data/traces`` and from a measured
profile.  Every GPU prediction names the host it assumes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..hardware.generations import arch_of
from ..profiles import DeviceProfile, OpOverheads, OverheadTable, ProfileError

__all__ = ["HOST_FORMAT", "HOSTS_DIR", "DEFAULT_HOST", "Host", "host_names", "load_host",
           "gpu_generation", "LAUNCH_US", "launch_us", "overheads_on", "profile_on_host"]

HOST_FORMAT = "ml-dse/host"
HOSTS_DIR = Path(__file__).resolve().parents[2] / "resources" / "hosts"
# Every public recording pooled: no host is preferred before the user names theirs
# (docs/models/gpu_profiles.md gives each host's figures).
DEFAULT_HOST = "public-pool"

# The kernel-launch call (cudaLaunchKernel, us) per GPU generation, measured in public
# traces of server hosts recorded with shapes only: Volta on the DGX-1 of the PARAM DLRM
# traces, Hopper on the H100 host of the TraceLens BERT traces.  A generation without such
# a measurement keeps the host's own launch cost.
LAUNCH_US = {"volta": 5.71, "hopper": 5.41}


@dataclass(frozen=True)
class Host:
    """A host of the catalogue: its dispatch overheads and what they were measured on."""

    name: str
    description: str
    cpu: str
    torch: str
    gpu: str          # the GPU the host's figures were recorded with
    source: str
    overheads: OverheadTable

    def label(self) -> str:
        return f"{self.name} ({self.description})"

    def to_json(self) -> dict:
        return {"format": HOST_FORMAT, "version": 1, "name": self.name,
                "description": self.description, "cpu": self.cpu, "torch": self.torch,
                "gpu": self.gpu, "source": self.source, "overheads": self.overheads.to_json()}


def gpu_generation(device_name: str) -> str | None:
    """The architecture generation of a GPU by its name (None: unknown)."""
    arch = arch_of(device_name)
    return None if arch == "unknown" else arch


# oldest first: a generation without its own launch measurement takes the latest earlier
# one's (a newer GPU's driver path is no slower), so a faster GPU never launches slower
ORDER = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")


def launch_us(generation: str | None) -> float | None:
    """The kernel-launch cost of a GPU generation (None: no earlier generation measured,
    the host's own applies)."""
    if generation not in ORDER:
        return None
    measured = [LAUNCH_US[g] for g in ORDER[:ORDER.index(generation) + 1] if g in LAUNCH_US]
    return measured[-1] if measured else None


def host_names() -> list[str]:
    """The hosts of the catalogue."""
    if not HOSTS_DIR.is_dir():
        return []
    return sorted(p.stem for p in HOSTS_DIR.glob("*.json"))


@cache
def _read(path: Path, mtime: int) -> Host:
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != HOST_FORMAT:
            raise ProfileError(f"{path}: format: expected {HOST_FORMAT!r}")
        return Host(doc["name"], doc.get("description", ""), doc.get("cpu", ""),
                    doc.get("torch", ""), doc.get("gpu", ""), doc.get("source", ""),
                    OverheadTable.from_json(doc["overheads"]))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ProfileError):
            raise
        raise ProfileError(f"{path}: cannot read the host ({type(exc).__name__}: {exc})") \
            from None


def load_host(name: str | None = None) -> Host:
    """A host of the catalogue by name (default :data:`DEFAULT_HOST`), or a host file."""
    name = name or DEFAULT_HOST
    path = Path(name)
    if not (path.suffix == ".json" and path.is_file()):
        path = HOSTS_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(host_names()) or "none"
        raise ProfileError(f"no host {name!r} (one of: {known})")
    return _read(path, path.stat().st_mtime_ns)


def overheads_on(host: Host, device_name: str) -> OverheadTable:
    """``host``'s overheads with the launch cost of ``device_name``'s generation
    (:func:`launch_us`): every op's T4 scaled by it over the host's own."""
    table = host.overheads
    launch = launch_us(gpu_generation(device_name))
    own = table.default.t4
    if launch is None or own <= 0:
        return table
    factor = launch * 1e-6 / own

    def swap(o: OpOverheads) -> OpOverheads:
        return replace(o, t4=o.t4 * factor)

    return replace(table, default=swap(table.default),
                   per_op={k: swap(v) for k, v in table.per_op.items()},
                   source=f"host {host.name}: {table.source}; launch of a "
                          f"{gpu_generation(device_name)} GPU {launch:.2f} us")


_ON_HOST: dict[tuple, DeviceProfile] = {}


def profile_on_host(profile: DeviceProfile, host: Host) -> DeviceProfile:
    """``profile`` (a GPU's) with ``host``'s overheads and its generation's launch cost:
    the same object for the same pair (callers may key caches on it)."""
    key = (id(profile), host.name, id(host.overheads))
    hit = _ON_HOST.get(key)
    if hit is None or hit.name != profile.name:
        hit = replace(profile, overheads=overheads_on(host, profile.device.name),
                      provenance=dict(profile.provenance, host_overheads=host.label()))
        _ON_HOST[key] = hit
        _ON_HOST[("keep", id(profile))] = profile   # keeps id(profile) unique while cached
    return hit
