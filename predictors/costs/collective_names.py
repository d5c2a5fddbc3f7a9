"""Collective names as traces and tools spell them (and, re-exported, GPU generations from
device names: :func:`predictors.hardware.generations.arch_of`).

Split from :mod:`predictors.costs.collectives`, which re-exports everything here.
"""
from __future__ import annotations

import re

from ..hardware.generations import arch_of

__all__ = ["CANONICAL", "arch_of", "collective_kind"]

CANONICAL = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
             "send_recv")


# ------------------------------------------------------------------------------- kind names
_KERNEL = re.compile(r"^(?:nccl|rccl)(?:dev)?kernel_?([a-z]+?)(?:_|$)")
_FUNC_OF_KERNEL = {
    "allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv",
    "alltoall": "all_to_all", "alltoallpivot": "all_to_all", "alltoallgather": "all_to_all",
    "send": "send_recv", "recv": "send_recv",
}
# Op / API spellings, compared with underscores removed and lower-cased.
_ALIASES = {
    "allreduce": "all_reduce", "allreducecoalesced": "all_reduce",
    "allreducebase": "all_reduce",
    "allgather": "all_gather", "allgatherbase": "all_gather",
    "allgatherintotensor": "all_gather", "allgathercoalesced": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "reducescatter": "reduce_scatter", "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter", "reducescattertensorcoalesced": "reduce_scatter",
    "alltoall": "all_to_all", "alltoallv": "all_to_all", "alltoallsingle": "all_to_all",
    "alltoallbase": "all_to_all",
    "broadcast": "broadcast", "bcast": "broadcast", "broadcastcoalesced": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv", "send": "send_recv", "recv": "send_recv", "isend": "send_recv",
    "irecv": "send_recv", "p2p": "send_recv", "batchisendirecv": "send_recv",
}
_PREFIX = re.compile(r"^(?:nccl|rccl|gloo|c10d|commtype|torch\.distributed|dist|"
                     r"torch\.ops\.c10d|c10d_functional|_c10d_functional)\s*(?:::|:|\.)\s*")


def collective_kind(name: str) -> str | None:
    """The canonical collective (one of :data:`CANONICAL`) a name stands for, else ``None``.

    Understands op and API names (``allreduce``, ``nccl:all_to_all``, ``_allgather_base``,
    ``reduce_scatter_tensor``, ``CommType.all_gather``, ``c10d::allreduce_``) and NCCL/RCCL
    kernel names (``ncclKernel_AllReduce_RING_LL_Sum_float(...)``,
    ``ncclDevKernel_AllGather_RING_LL(...)``).  NCCL runs all-to-all as grouped send/recv, so
    its ``SendRecv`` kernel is ``"send_recv"``.  Names of non-collective kernels (an ATen
    ``reduce_kernel``), generic kernels (``ncclDevKernel_Generic``) and barriers give ``None``.
    """
    if not isinstance(name, str):
        return None
    s = name.strip().split("(", 1)[0].strip().lower()
    if not s:
        return None
    m = _KERNEL.match(s)
    if m:
        return _FUNC_OF_KERNEL.get(m.group(1))
    while True:
        stripped = _PREFIX.sub("", s, count=1)
        if stripped == s:
            break
        s = stripped
    return _ALIASES.get(s.replace("_", "").replace(" ", ""))
