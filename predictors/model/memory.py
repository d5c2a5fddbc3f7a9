"""Device memory of one training step, from the storages its captured ops allocate.

While a step is captured, :class:`StorageLedger` sees every tensor an op reads or
returns.  A storage that an op reads but no op of the step made existed before the step
(parameters, the batch, DDP's buckets); a storage an op returns is allocated there, and a
weak reference to it says when the last tensor using it went away.  On the meta device
that happens where a real run frees it: autograd releases saved tensors, Python drops
temporaries, and views keep their base alive, just as they would with real memory.

:func:`step_memory` turns the ledger into the figures a capacity planner asks for: the
peak (what ``torch.cuda.max_memory_allocated`` reports for a steady-state step), the op
where it happens, and what it is made of.  A GPU step rounds every allocation up to the
caching allocator's 512-byte blocks, as ``memory_allocated`` counts them.  Not included:
the CUDA context, cuBLAS workspaces, NCCL's buffers, and the allocator's cached but
unused blocks (``memory_reserved``).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from ..utils.formatting import format_bytes

__all__ = ["StorageLedger", "StepMemory", "step_memory", "tensor_bytes", "rank_memory",
           "memory_note"]

GPU_BLOCK = 512   # CUDACachingAllocator rounds every request up to a multiple of this


def _round(nbytes: int, block: int) -> int:
    if block <= 1 or nbytes <= 0:
        return nbytes
    return -(-nbytes // block) * block


def _sparse_bytes(t: torch.Tensor, nnz: int, indices: bool = True) -> int:
    """Values of ``nnz`` entries, and their indices (int64, one per sparse dim)."""
    row = 1
    for s in t.shape[t.sparse_dim():]:
        row *= s
    return nnz * ((8 * t.sparse_dim() if indices else 0) + row * t.element_size())


class StorageLedger:
    """Allocations and frees of the storages one captured step touches."""

    def __init__(self, block: int = 1, device: str | None = None):
        self.block = block
        self.device = device   # tensors elsewhere (an optimizer's CPU step count) are not
                               # the device's memory
        self.clock = 0                    # the op being recorded (its node index)
        self.resident: dict[int, int] = {}     # storage key -> bytes, made before the step
        self._resident_refs: dict[int, weakref.ref] = {}   # a dead one's key may be reused
        self._live: dict[int, tuple] = {}      # storage key -> (weak ref, allocation id)
        self.allocs: list[tuple[int, int]] = []   # (node, bytes)
        self.keys: list[list[int]] = []           # allocation id -> its storages' keys
        self.freed_at: dict[int, int] = {}    # allocation id -> node it was freed before
        self._anchors: list[int] = []         # allocation id -> live storages using it

    @staticmethod
    def _storages(t: torch.Tensor):
        if t.is_sparse:
            return [t._indices().untyped_storage(), t._values().untyped_storage()]
        if t.layout != torch.strided:
            return []
        return [t.untyped_storage()]

    def _known(self, key: int) -> bool:
        ref = self._resident_refs.get(key)
        if ref is not None and ref() is not None:
            return True
        entry = self._live.get(key)
        return entry is not None and entry[0]() is not None

    def _reside(self, storage, nbytes: int) -> None:
        key = storage._cdata
        self.resident[key] = self.resident.get(key, 0) + nbytes
        self._resident_refs[key] = weakref.ref(storage)

    def _here(self, t: torch.Tensor) -> bool:
        return self.device is None or t.device.type == self.device

    def read(self, tensors) -> None:
        """Storages read by an op that no op of the step made: resident."""
        for t in tensors:
            if not self._here(t):
                continue
            for s in self._storages(t):
                if not self._known(s._cdata):
                    self._reside(s, _round(s.nbytes(), self.block))

    def wrote(self, node: int, tensors, sparse_nnz, *, same_as=None,
              indices_shared: bool = False) -> None:
        """The tensors op ``node`` returned; new storages among them are allocated.

        ``same_as``: the input each output is in a real run, where recording makes a copy
        (the real run adds in place, or AccumulateGrad wraps a sparse gradient; under a
        dispatch mode autograd takes out-of-place paths): the copy extends the input's
        life and costs nothing.
        ``indices_shared``: the sparse outputs' indices are views of an input's (an
        embedding backward reshapes its indices), so only their values are new."""
        self.clock = node + 1
        for i, (t, nnz) in enumerate(zip(tensors, sparse_nnz)):
            if not self._here(t):
                continue
            storages = [s for s in self._storages(t) if not self._known(s._cdata)]
            if not storages:
                continue   # in place, a view, or a sparse wrapper of known tensors
            if same_as is not None and i < len(same_as):
                self._alias(storages, same_as[i])
                continue
            if t.is_sparse:
                # meta sparse tensors keep no entries; the recorder tracks nnz instead
                nbytes = _sparse_bytes(t, nnz or 0, indices=not indices_shared)
            else:
                nbytes = storages[0].nbytes()
            alloc = len(self.allocs)
            self.allocs.append((node, _round(nbytes, self.block)))
            self._anchors.append(0)
            self.keys.append([])
            for s in storages:
                self._watch(s, alloc)

    def _watch(self, storage, alloc: int) -> None:
        self._anchors[alloc] += 1
        self.keys[alloc].append(storage._cdata)
        self._live[storage._cdata] = (weakref.ref(storage, self._on_free(alloc)), alloc)

    def _alias(self, storages, original: torch.Tensor) -> None:
        allocs = {self._live[s._cdata][1] for s in self._storages(original)
                  if s._cdata in self._live and self._live[s._cdata][0]() is not None}
        if not allocs:   # a copy of a resident tensor: resident too, at no cost
            for s in storages:
                self._reside(s, 0)
            return
        alloc = min(allocs)
        for s in storages:
            self._watch(s, alloc)

    def _on_free(self, alloc: int):
        def freed(_ref):
            self._anchors[alloc] -= 1
            if self._anchors[alloc] == 0:
                self.freed_at.setdefault(alloc, self.clock)
        return freed

    def close(self) -> None:
        """Stop watching: later frees (the graph's tensors dropped) are not the step's."""
        self._live.clear()
        self._resident_refs.clear()

    def storage_keys(self, tensors) -> set[int]:
        return {s._cdata for t in tensors if isinstance(t, torch.Tensor) and self._here(t)
                for s in self._storages(t)}


@dataclass
class StepMemory:
    """Device memory of one step, bytes.  ``peak`` is the absolute high-water mark."""

    peak: int
    peak_node: int
    resident: dict[str, int]          # before the step: parameters, inputs, ...
    at_peak: dict[str, int]           # allocated by the step and live at the peak
    gradients: int                    # live after the step (freed by the next zero_grad)
    curve: np.ndarray = field(repr=False)   # live bytes after each op, absolute
    peak_op: str = ""                 # e.g. "aten::mm (backward, top)"

    @property
    def resident_total(self) -> int:
        return sum(self.resident.values())

    def to_json(self) -> dict:
        return {"peak_bytes": int(self.peak), "peak_op": self.peak_op,
                "resident_bytes": {k: int(v) for k, v in self.resident.items()},
                "at_peak_bytes": {k: int(v) for k, v in self.at_peak.items()},
                "gradient_bytes": int(self.gradients)}


def step_memory(ledger: StorageLedger, num_ops: int, groups: dict[str, set[int]],
                gradients: set[int]) -> StepMemory:
    """The step's memory from its ledger.

    ``groups`` names the storage keys of resident tensors (``parameters``, ``inputs``,
    ...); other residents are ``other``.  ``gradients`` are the storage keys of the
    parameters' gradients after the step.  An allocation still live after the step that
    is not a gradient (optimizer state made by the first step) is resident in a steady
    state, and counts as such from the step's start."""
    resident: dict[str, int] = {name: 0 for name in groups}
    resident["other"] = 0
    for key, nbytes in ledger.resident.items():
        name = next((g for g, keys in groups.items() if key in keys), "other")
        resident[name] += nbytes
    delta = np.zeros(num_ops + 1, dtype=np.int64)
    kinds: list[str] = []
    for alloc, (node, nbytes) in enumerate(ledger.allocs):
        end = ledger.freed_at.get(alloc)
        if end is None and not gradients.intersection(ledger.keys[alloc]):
            resident["optimizer state"] = resident.get("optimizer state", 0) + nbytes
            kinds.append("")
            continue
        kinds.append("gradients" if end is None else "activations")
        delta[node] += nbytes
        if end is not None:
            delta[min(end, num_ops)] -= nbytes
    base = sum(resident.values())
    curve = base + np.cumsum(delta[:num_ops]) if num_ops else np.zeros(0, np.int64)
    peak_node = int(np.argmax(curve)) if num_ops else 0
    peak = int(curve[peak_node]) if num_ops else base
    at_peak = {"gradients": 0, "activations": 0}
    for alloc, (node, nbytes) in enumerate(ledger.allocs):
        end = ledger.freed_at.get(alloc)
        if kinds[alloc] and node <= peak_node and (end is None or end > peak_node):
            at_peak[kinds[alloc]] += nbytes
    grads = sum(n for (_node, n), kind in zip(ledger.allocs, kinds) if kind == "gradients")
    return StepMemory(peak, peak_node, resident, at_peak, grads, curve)


def tensor_bytes(tensors, block: int = 1) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a real run's resident set)."""
    seen, total = set(), 0
    for t in tensors:
        for s in StorageLedger._storages(t):
            if s._cdata not in seen:
                seen.add(s._cdata)
                total += _round(s.nbytes(), block)
    return total


def rank_memory(memory: StepMemory | None, device_bytes: float) -> dict:
    """A rank's memory figures for ``per_rank``: the peak, its breakdown, and whether it
    fits the device (``device_bytes`` 0: unknown, not judged)."""
    if memory is None:
        return {}
    out = {"peak_memory_bytes": int(memory.peak), "memory": memory.to_json()}
    if device_bytes > 0:
        out["memory"]["device_bytes"] = int(device_bytes)
        out["memory"]["fits"] = bool(memory.peak <= device_bytes)
    return out


def memory_note(per_rank: list[dict], device: str) -> str | None:
    """One line on the rank with the highest peak when it does not fit its device."""
    over = [r for r in per_rank if r.get("memory", {}).get("fits") is False]
    if not over:
        return None

    worst = max(over, key=lambda r: r["peak_memory_bytes"])
    which = "the step" if len(per_rank) == 1 else (
        f"rank {worst['rank']}" + (f" (and {len(over) - 1} more)" if len(over) > 1 else ""))
    where = "of this host's memory" if device == "cpu" else f"of a {device}"
    return (f"does not fit: {which} needs {format_bytes(worst['peak_memory_bytes'])} at its "
            f"peak ({worst['memory']['peak_op']}), more than the "
            f"{format_bytes(worst['memory']['device_bytes'])} {where}")
