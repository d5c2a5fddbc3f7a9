"""Collective-communication time model (NCCL-style), for the simulator and the trace tools.

The model follows NCCL's own tuning model (``src/graph/tuning.cc`` of NVIDIA/nccl): for each
algorithm a collective can run with (ring; tree as well for all-reduce) and each protocol
(LL, LL128, Simple) it predicts

    time = base latency + steps x per-hop latency + bytes on the wire / protocol bandwidth

and takes the fastest, as NCCL's ``getAlgoInfo`` does.  All-to-all and grouped send/recv are
point-to-point: every peer transfer runs at once (one p2p step of latency), with LL or Simple,
whichever is faster (NCCL switches at 16 KiB per peer; the difference is at most the two
protocols' latency gap, and the faster-of-two keeps the time monotone in size and ranks).

The per-GPU link bandwidth comes from the caller (``predictors.hardware.platforms.LINK_KINDS``)
and is turned into NCCL's *bus bandwidth* with the efficiencies below.  Every constant is in
:data:`CONSTANTS`, with its source.  No Qt, no numpy: plain Python, cheap enough to call once
per collective of a simulated iteration.

See ``docs/models/collectives.md`` for the validation against recorded V100 and A100 runs.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..hardware.platforms import LINK_KINDS

__all__ = ["CANONICAL", "PROTOCOLS", "CONSTANTS", "CollectiveEstimate", "collective_kind",
           "collective_time", "collective_options", "arch_of", "bus_factor",
           "platform_collective"]

CANONICAL = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
             "send_recv")
PROTOCOLS = ("LL", "LL128", "Simple")

# ---------------------------------------------------------------------------------------------
# Constants.  Sources (read, not copied; numbers are NCCL's published tuning constants):
#   [T] NVIDIA/nccl v2.28 src/graph/tuning.cc: ncclTunerConstantsDefaults (baseLatencies,
#       hwLatencies, llMaxBws, perCh* caps), ncclTopoTuneModel (the protocol factors,
#       latency composition), ncclTopoGetAlgoTime (tree correction, ring plateau).
#   [H] NVIDIA/nccl src/graph/topo.h: SM70/SM80_NVLINK_BW 20.0 GB/s, SM90 20.6 GB/s per
#       NVLink (nominal 25 GB/s), PCI_BW 12.0 GB/s for a PCIe Gen3 x16 (nominal 16 GB/s).
#   [E] NVIDIA/nccl src/enqueue.cc: NCCL_P2P_LL_THRESHOLD default 16384 bytes per peer.
#   [O] NVIDIA/nccl v2.7 src/graph/tuning.cc: busBw capped at 235 GB/s on sm80 (the measured
#       A100 NVSwitch plateau, also what nccl-tests reports on DGX A100).
#   [S] aliyun/SimAI calbusbw (CX6_BW 23.5, CX7_BW 48.5 GB/s for 200/400 Gb/s NICs).
# Latencies are microseconds, bandwidths GB/s (1e9 bytes/s), as in NCCL.
# ---------------------------------------------------------------------------------------------
CONSTANTS = {
    # [T] baseLatencies[algorithm][protocol]: fixed cost of one collective call.
    "base_lat_us": {"tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
                    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}},
    # [T] hwLatencies[fabric][algorithm][protocol]: latency of one step (hop) of the pipeline.
    "hop_lat_us": {
        "nvlink": {"tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
                   "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}},
        "pci": {"tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0},
                "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7}},
        "net": {"tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
                "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0}},
    },
    # [T] llMaxBws: the most an LL ring reaches per GPU; index 1 node / 2 nodes / >2 nodes.
    # One node: by GPU generation.  Several nodes: by CPU (the Intel row, NCCL's default).
    "ll_max_bw": {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0),
                  "hopper": (141.0, 45.0, 35.0), "multi_node": (39.0, 39.0, 20.4)},
    # [H]/[O] Simple-protocol bus bandwidth as a fraction of the nominal per-GPU NVLink
    # bandwidth: NCCL's per-link figure over the nominal 25 GB/s (20/25, 20.6/25); Ampere at
    # NCCL's own 235 GB/s plateau over 300 GB/s.
    "nvlink_eff": {"volta": 0.80, "ampere": 0.78, "hopper": 0.824},
    "pci_eff": 0.75,        # [H] PCI_BW 12 GB/s of a nominal 16 GB/s Gen3 x16 link
    "net_eff": 0.94,        # [S] achieved NIC figures: 23.5 of 25 GB/s (CX6), 48.5 of 50 (CX7)
    "ll_frac": 0.5,         # [T] ring LL: half of Simple (8-byte lines carry 4 bytes of data)
    "ll128_frac": 0.92,     # [T] ring LL128: 120 of 128 bytes carry data
    "tree_frac": 0.92,      # [T] tree all-reduce bandwidth vs the ring graph's
    "tree_ll_frac": 1 / 3.8,   # [T]
    "tree_ll128_frac": (7 / 9, 120 / 128),   # [T] one node / several nodes
    # [T] treeCorrectionFactor[protocol][log2(bytes/64)], 64 B .. 256 MiB (1.0 beyond).
    "tree_correction": {
        "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
               1.0, 1.0, 1.0, 1.0),
        "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9,
                  .9, .9, .9, 1.0, 1.0),
        "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
                   .7, .8, .9, .9),
    },
    # [T] multi-node ring/Simple all-reduce: latency multiplied by this ("plateau effect")
    "ring_plateau": {"volta": 1.9, "other": 1.4},
    "net_overhead_us": 1.0,     # [T] getNetOverhead on x86 Intel (x3 for Simple)
    "p2p_ll_threshold": 16384,  # [E] bytes per peer at or below which NCCL's p2p uses LL
                                # (documentation only: the model takes the faster protocol)
    "nvlink_min_bw": 64e9,      # below this a link given without ``fabric`` is taken as PCIe
}

_ARCHS = ("volta", "ampere", "hopper")


@dataclass(frozen=True)
class CollectiveEstimate:
    """One predicted collective: its duration, how NCCL would run it, what it achieves."""

    us: float
    algorithm: str  # "ring" | "tree" | "p2p" | "none"
    protocol: str   # "LL" | "LL128" | "Simple" | ""
    bus_bw: float   # bytes/s, nccl-tests convention: bytes on the wire per rank / time
    detail: str


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


# ------------------------------------------------------------------------------- device names
_ARCH_PATTERNS = (
    ("volta", re.compile(r"v100|gv100|titan v\b|volta")),
    ("hopper", re.compile(r"\bh(?:100|200|800|20)\b|h100|h200|h800|gh200|hopper")),
    ("blackwell", re.compile(r"\bb(?:100|200)\b|gb200|b200|blackwell")),
    ("ampere", re.compile(r"a100|a800|\ba(?:10|10g|16|30|40)\b|pg509|pg506|rtx a\d|"
                          r"\ba[2-6]000\b|rtx 30\d0|geforce rtx 30|ampere")),
    ("ada", re.compile(r"\bl4\b|\bl40|rtx 40\d0|rtx [56]000 ada|\bada\b")),
    ("turing", re.compile(r"rtx 20\d0|\bt4\b|titan rtx|quadro rtx|gtx 16\d0|turing")),
    ("pascal", re.compile(r"p100|\bp40\b|\bp4\b|gtx 10\d0|titan xp|pascal")),
)


def arch_of(device_name: str) -> str:
    """GPU generation of a device name as CUDA reports it: ``"volta"``, ``"ampere"``,
    ``"hopper"``, ``"turing"``, ... or ``"unknown"``.

    ``"Tesla V100-SXM2-32GB"`` -> volta; ``"NVIDIA A100-SXM4-40GB"`` and Meta's
    ``"NVIDIA PG509-200"`` (an A100) -> ampere; H100/H200 -> hopper; RTX 2080 Ti -> turing.
    """
    s = (device_name or "").lower()
    for arch, pat in _ARCH_PATTERNS:
        if pat.search(s):
            return arch
    return "unknown"


# ------------------------------------------------------------------------------- the model
def bus_factor(kind: str, ranks: int) -> float:
    """nccl-tests' bus-bandwidth factor: bytes on the wire per rank = factor x message size."""
    k = _canonical(kind)
    n = int(ranks)
    if n <= 1:
        return 0.0
    if k == "all_reduce":
        return 2.0 * (n - 1) / n
    if k in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0  # broadcast, reduce, send/recv (one peer)


def collective_time(kind: str, nbytes: float, ranks: int, link_bw: float, arch: str = "ampere",
                    *, nodes: int = 1, inter_bw: float | None = None,
                    fabric: str | None = None) -> CollectiveEstimate:
    """Predicted duration of one collective on ``ranks`` GPUs, as NCCL would run it.

    ``nbytes`` is the message as NCCL counts it: all-reduce, broadcast, reduce: the buffer;
    all-gather: the *output* buffer; reduce-scatter: the *input* buffer; all-to-all and
    send/recv: the bytes each rank sends in total (its own share included; for uneven
    all-to-allv pass the largest of any rank's sent and received totals).
    ``link_bw``: per-GPU, one-direction bandwidth of the intra-node fabric in bytes/s
    (``LINK_KINDS``).  ``arch``: ``"volta"``, ``"ampere"``, ``"hopper"``; anything else is
    taken as Hopper-like.  ``nodes`` > 1 needs ``inter_bw``, the per-GPU NIC bandwidth in
    bytes/s (one NIC per GPU, as on DGX/HGX nodes).  ``fabric`` (``"nvlink"`` | ``"pcie"``)
    defaults to NVLink for links faster than 64 GB/s.  One rank (or an empty message) -> 0 us.
    """
    return collective_options(kind, nbytes, ranks, link_bw, arch, nodes=nodes,
                              inter_bw=inter_bw, fabric=fabric)[0]


def collective_options(kind: str, nbytes: float, ranks: int, link_bw: float,
                       arch: str = "ampere", *, nodes: int = 1, inter_bw: float | None = None,
                       fabric: str | None = None) -> list[CollectiveEstimate]:
    """Every (algorithm, protocol) NCCL would consider, fastest first (arguments as
    :func:`collective_time`); point-to-point kinds: LL and Simple."""
    k = _canonical(kind)
    n = int(ranks)
    nodes = int(nodes)
    if n < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    if not (nbytes >= 0) or math.isinf(nbytes):
        raise ValueError(f"nbytes must be a finite number >= 0, got {nbytes}")
    if n == 1 or nbytes == 0:
        why = "one rank" if n == 1 else "empty message"
        return [CollectiveEstimate(0.0, "none", "", 0.0, f"{k}: {why}, nothing to move")]
    if not (link_bw > 0) or math.isinf(link_bw):
        raise ValueError(f"link_bw must be a positive number of bytes/s, got {link_bw}")
    if nodes < 1 or nodes > n:
        raise ValueError(f"nodes must be between 1 and ranks ({n}), got {nodes}")
    if nodes > 1 and not (inter_bw is not None and inter_bw > 0):
        raise ValueError("inter_bw (per-GPU NIC bytes/s) is required when nodes > 1")
    net = _Net(n, nodes, link_bw, arch, inter_bw, fabric)
    if k in ("all_to_all", "send_recv"):
        # NCCL itself switches p2p to Simple above 16 KiB per peer ([E]); the model takes the
        # faster of the two, which keeps the time monotone in size and in ranks.
        return sorted((_p2p(k, p, float(nbytes), net) for p in ("LL", "Simple")),
                      key=lambda e: e.us)
    out = []
    algos = ("ring", "tree") if k == "all_reduce" else ("ring",)
    for algo in algos:
        for proto in PROTOCOLS:
            est = _coll(k, algo, proto, float(nbytes), net)
            if est is not None:
                out.append(est)
    out.sort(key=lambda e: e.us)
    return out


def _canonical(kind: str) -> str:
    k = kind if kind in CANONICAL else collective_kind(kind)
    if k is None:
        raise ValueError(f"not a collective: {kind!r} (expected one of {', '.join(CANONICAL)})")
    return k


class _Net:
    """The communicator as the model sees it: sizes, fabric, bus bandwidths in GB/s."""

    def __init__(self, n, nodes, link_bw, arch, inter_bw, fabric):
        self.n, self.nodes = n, nodes
        self.ppn = max(1, n // nodes)
        a = (arch or "").lower()
        self.arch = a if a in _ARCHS else "hopper"
        self.arch_given = a or "?"
        if fabric is None:
            fabric = "nvlink" if link_bw > CONSTANTS["nvlink_min_bw"] else "pcie"
        fabric = fabric.lower()
        if fabric not in ("nvlink", "pcie", "pci"):
            raise ValueError(f"fabric must be 'nvlink' or 'pcie', got {fabric!r}")
        self.fabric = "nvlink" if fabric == "nvlink" else "pci"
        if self.fabric == "nvlink":
            eff = CONSTANTS["nvlink_eff"][self.arch]
        else:
            eff = CONSTANTS["pci_eff"]
        self.intra = link_bw * eff / 1e9          # Simple bus bandwidth inside a node, GB/s
        if nodes > 1:
            self.inter = inter_bw * CONSTANTS["net_eff"] / 1e9   # per GPU, GB/s
            # A ring crosses each node boundary through one NIC; ppn rings use ppn NICs.
            self.ring = min(self.intra, self.ppn * self.inter)
        else:
            self.inter = None
            self.ring = self.intra
        idx = 0 if nodes == 1 else (1 if nodes == 2 else 2)
        table = CONSTANTS["ll_max_bw"][self.arch if nodes == 1 else "multi_node"]
        self.ll_max = table[idx]
        # [T] LL128 only where NCCL enables it by default: NVLink inside the node, sm70+.
        self.ll128 = self.fabric == "nvlink"
        self.hw = self.fabric if nodes == 1 else "net"

    def describe(self) -> str:
        where = f"{self.nodes} nodes x {self.ppn}" if self.nodes > 1 else "1 node"
        return f"{self.n} ranks, {where}, {self.arch_given} {self.fabric}"


def _coll(k, algo, proto, nbytes, net: _Net) -> CollectiveEstimate | None:
    c = CONSTANTS
    n, nodes = net.n, net.nodes
    if proto == "LL128" and not net.ll128:
        return None
    # Bus bandwidth of this algorithm and protocol (GB/s), then NCCL's bus -> algorithm ratio.
    bus = net.ring
    if algo == "ring":
        if proto == "LL":
            bus = min(net.ll_max, bus * c["ll_frac"])
        elif proto == "LL128":
            bus = bus * c["ll128_frac"]
        if k == "all_reduce":
            nsteps = 2 * (n - 1)
        elif k in ("all_gather", "reduce_scatter"):
            nsteps = n - 1
        else:
            nsteps = n
        alg = bus * n / nsteps
    else:  # tree, all-reduce only
        bus = bus * c["tree_frac"]
        if proto == "LL":
            bus = min(bus * c["tree_ll_frac"], net.ll_max)
        elif proto == "LL128":
            bus = bus * c["tree_ll128_frac"][0 if nodes == 1 else 1]
        alg = bus * 0.5
        log_size = int(math.log2(max(nbytes / 64.0, 1.0)))
        table = c["tree_correction"][proto]
        if log_size < len(table):
            alg *= table[log_size]
    # Latency: base + hops, intra-node hops at the fabric's latency, node crossings at the NIC's.
    lat = c["base_lat_us"][algo][proto]
    intra_hop = c["hop_lat_us"][net.fabric][algo][proto]
    inter_hop = c["hop_lat_us"]["net"]["tree" if net.ppn == 1 else algo][proto]
    if algo == "ring":
        if k in ("broadcast", "reduce"):
            # A pipelined chain: the first chunk crosses n-1 hops.
            hops_intra = (n - 1) - (nodes - 1)
            lat += hops_intra * intra_hop + (nodes - 1) * inter_hop
        else:
            nsteps = 2 * (n - 1) if k == "all_reduce" else n - 1
            n_inter = 0 if nodes == 1 else (2 * (nodes - 1) if k == "all_reduce" else nodes - 1)
            if nodes > 1:
                overhead = c["net_overhead_us"] * (3 if proto == "Simple" else 1)
                intra_hop = max(intra_hop, overhead)
            lat += (nsteps - n_inter) * intra_hop + n_inter * inter_hop
            if (proto == "Simple" and nodes > 1 and k == "all_reduce"
                    and nbytes / (n * 16) >= 64):   # [T] ring plateau (16 channels assumed)
                lat *= c["ring_plateau"]["volta" if net.arch == "volta" else "other"]
    else:
        lat += 2 * ((net.ppn - 1) * intra_hop + math.log2(nodes) * inter_hop)
    us = lat + nbytes / (alg * 1e3)     # GB/s -> bytes/us is x1e3
    wire = bus_factor(k, n) * nbytes
    detail = (f"{k} {algo}/{proto}: {lat:.1f} us latency + {nbytes / (alg * 1e3):.1f} us at "
              f"{alg:.1f} GB/s algbw ({bus:.1f} GB/s bus); {net.describe()}")
    return CollectiveEstimate(us, algo, proto, wire / (us * 1e-6), detail)


def _p2p(k, proto, nbytes, net: _Net) -> CollectiveEstimate:
    c = CONSTANTS
    n = net.n
    if k == "send_recv":  # all of it to one peer (in the node when the node has one)
        per_peer = nbytes
        local_bytes = nbytes if net.ppn > 1 else 0.0
        remote_bytes = 0.0 if net.ppn > 1 else nbytes
    else:
        per_peer = nbytes / n
        local_bytes = nbytes * (net.ppn - 1) / n
        remote_bytes = nbytes * (n - net.ppn) / n
    intra, inter = net.intra, net.inter
    if proto == "LL":
        # Inside the node LL is bounded by the GPU generation's figure, across by the NIC's.
        intra = min(c["ll_max_bw"][net.arch][0], intra * c["ll_frac"])
        if inter is not None:
            inter = min(net.ll_max, inter * c["ll_frac"])
    # Every peer transfer runs at once (NCCL spreads the peers over channels): one step of
    # latency, on the slowest fabric used.
    hop = c["hop_lat_us"][net.fabric]["ring"][proto]
    if remote_bytes > 0:
        hop = max(hop, c["hop_lat_us"]["net"]["ring"][proto])
    lat = c["base_lat_us"]["ring"][proto] + hop
    t_local = local_bytes / (intra * 1e3)
    t_remote = remote_bytes / (inter * 1e3) if remote_bytes > 0 else 0.0
    us = lat + max(t_local, t_remote)
    wire = bus_factor(k, n) * nbytes
    detail = (f"{k} p2p/{proto}: {lat:.1f} us latency + {max(t_local, t_remote):.1f} us "
              f"({per_peer:.0f} B per peer; {local_bytes:.0f} B over the node's fabric at "
              f"{intra:.1f} GB/s"
              + (f", {remote_bytes:.0f} B over the NIC at {inter:.1f} GB/s" if remote_bytes else "")
              + f"); {net.describe()}")
    return CollectiveEstimate(us, "p2p", proto, wire / (us * 1e-6), detail)


# ------------------------------------------------------------------------------- platforms
def platform_collective(kind: str, nbytes: float, platform, ranks: int | None = None
                        ) -> tuple[CollectiveEstimate, int, int, list[str]]:
    """One collective on a resolved :class:`~predictors.hardware.platforms.Platform`:
    ``(estimate, ranks, nodes, notes)``.  ``ranks`` (default: every GPU) fill the nodes in
    order, so 8 ranks on 8-GPU nodes stay on one node's NVLink/NVSwitch."""
    if platform.gpus < 1:
        raise ValueError(f"platform {platform.name!r} has no GPUs: collectives need GPUs")
    n = platform.ranks if ranks is None else int(ranks)
    if not 1 <= n <= platform.ranks:
        raise ValueError(f"ranks must be between 1 and the platform's {platform.ranks} "
                         f"GPUs, got {ranks}")
    nodes = -(-n // platform.gpus)
    notes = []
    intra = platform.intra_link
    if intra is None:
        intra = "pcie4"
        if n > 1 and platform.gpus > 1:
            notes.append(f"platform {platform.name!r} names no GPU-to-GPU link: PCIe 4.0 "
                         "assumed")
    inter_bw = None
    if nodes > 1:
        if platform.inter_link is None:
            raise ValueError(f"{n} ranks span {nodes} nodes, but platform {platform.name!r} "
                             "has no NIC link between nodes")
        inter_bw = LINK_KINDS[platform.inter_link]
    fabric = "pcie" if intra.startswith("pcie") else "nvlink"
    est = collective_time(kind, nbytes, n, LINK_KINDS[intra], arch_of(platform.device),
                          nodes=nodes, inter_bw=inter_bw, fabric=fabric)
    return est, n, nodes, notes
