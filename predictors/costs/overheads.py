"""Default CPU overheads per op, the five kinds of the DLRM performance-model papers.

T1: gap between consecutive ops on a thread; T2: op start to its kernel launch;
T3: launch end to op end; T4: the launch call itself; T5: the whole CPU time of an op
that launches no kernel.  Values are seconds.  Profiles made from recorded traces or by
``calibrate`` replace these order-of-magnitude defaults with per-op-name tables.
"""
from __future__ import annotations

from ..profiles import OpOverheads, OverheadTable

__all__ = ["default_overheads"]

# GPU: eager PyTorch on a server CPU spends a few microseconds per aten op before the
# launch and ~4 us in cudaLaunchKernel (Lin et al., HiPC 2022, Fig. 4 ranges).
_GPU = OverheadTable(OpOverheads(t1=3e-6, t2=5e-6, t3=2e-6, t4=4e-6, t5=2e-6),
                     autograd_t1=3e-6, source="default GPU overheads (HiPC 2022 ranges)")
# CPU: the kernel runs inline on the calling thread; only dispatch remains.
_CPU = OverheadTable(OpOverheads(t1=1e-6, t2=3e-6, t3=1e-6, t4=0.0, t5=1.5e-6),
                     autograd_t1=2e-6, source="default CPU dispatch overheads")


def default_overheads(device_kind: str) -> OverheadTable:
    """The default overheads of a ``cpu`` or ``gpu`` device."""
    return _CPU if device_kind == "cpu" else _GPU
