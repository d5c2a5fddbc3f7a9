"""Collective-communication time model (NCCL-style), for the simulator and the trace tools.

The model follows NCCL's own tuning model (``src/graph/tuning.cc`` of NVIDIA/nccl): for each
algorithm a collective can run with (ring; tree and, on NVSwitch-3 systems, NVLS / NVLSTree
as well for all-reduce) and each protocol (LL, LL128, Simple) it predicts

    time = base latency + steps x per-hop latency + bytes on the wire / protocol bandwidth

and takes the fastest, as NCCL's ``getAlgoInfo`` does.  All-to-all and grouped send/recv are
point-to-point: every peer transfer runs at once (one p2p step of latency), with LL or Simple,
whichever is faster (NCCL switches at 16 KiB per peer; the difference is at most the two
protocols' latency gap, and the faster-of-two keeps the time monotone in size and ranks).

The per-GPU link bandwidth comes from the caller (``predictors.hardware.platforms.LINK_KINDS``,
or a drawn platform's routes: ``predictors.hardware.network``) and is turned into NCCL's
*bus bandwidth* with the efficiencies below.  Every constant is in :data:`CONSTANTS`, with
its source; the few fitted ones ([F]) are re-derived by ``benchmarks/collectives.py --fit``
from public nccl-tests tables marked "fit" (the others validate).  No Qt, no numpy: plain
Python, cheap enough to call once per collective of a simulated iteration.

See ``docs/models/collectives.md`` for the validation.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..hardware.platforms import LINK_KINDS
from .collective_names import CANONICAL, arch_of, collective_kind

__all__ = ["CANONICAL", "PROTOCOLS", "CONSTANTS", "CollectiveEstimate", "collective_kind",
           "collective_time", "collective_options", "arch_of", "bus_factor",
           "platform_collective", "nvls_capable"]

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
#   [N] NVIDIA/nccl src/graph/tuning.cc of the 2.19 era: NVLS / NVLSTree latencies and the
#       NVLSTree bandwidth rule (the lower of the node's and the network's).
#   [F] fitted (benchmarks/collectives.py --fit) to the tables marked "fit" in
#       resources/measurements/nccl-tests-public/tables.json, over 32 KiB .. 512 MiB.
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
    # bandwidth: NCCL's per-link figure over the nominal 25 GB/s (20/25); Ampere at NCCL's
    # own 235 GB/s plateau over 300 GB/s.  Hopper [F]: 0.68 of NVLink4 between 32 KiB and
    # 512 MiB (a 4-GPU all-gather); NCCL's 20.6/25 = 0.82 is what 8 GiB calls reach.
    "nvlink_eff": {"volta": 0.80, "ampere": 0.78, "hopper": 0.680},
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
    # NVLS (NVLink SHARP, NVSwitch-3 and newer): every GPU sends its share to the switch once,
    # the switch reduces and multicasts, so a GPU's link carries (n+1)/n of the buffer each
    # way and the algorithm bandwidth is link x efficiency x n/(n+1).  [F] 0.608 of NVLink4
    # (8 H100, nccl-tests#290, 128-512 MiB; its 4 GiB calls reach 0.68).
    "nvls_eff": {"hopper": 0.608},
    "nvls_lat_us": 23.0,        # [N] one NVLS all-reduce in a node
    # [F] fitted: what a Simple-protocol call costs beyond NCCL's latency terms (filling and
    # draining its chunk pipeline), per generation; 0 where no table fits it.
    "simple_lat_us": {"hopper": 11.5},
    # per network level of NVLSTree (x 2 log2(nodes)) [F]: 83 us on two H100 nodes where
    # NCCL's model says 14 [N]; its mid-size calls reach the NICs' bandwidth late, so
    # NVLSTree wins from ~64 MiB and trees/rings below, as measured
    "nvls_tree_net_lat_us": {"hopper": 83.0},
}

_ARCHS = ("volta", "ampere", "hopper")
# GPU generations whose NVSwitch reduces in the switch (NVLink SHARP): NVSwitch-3 and newer
_NVLS_ARCHS = ("hopper", "blackwell")


@dataclass(frozen=True)
class CollectiveEstimate:
    """One predicted collective: its duration, how NCCL would run it, what it achieves."""

    us: float
    algorithm: str  # "ring" | "tree" | "nvls" | "nvls_tree" | "p2p" | "none"
    protocol: str   # "LL" | "LL128" | "Simple" | ""
    bus_bw: float   # bytes/s, nccl-tests convention: bytes on the wire per rank / time
    detail: str
    latency_us: float = 0.0   # the part that does not grow with the message


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


def nvls_capable(arch: str, link_bw: float, fabric: str | None = None) -> bool:
    """Whether NCCL would run NVLS (NVLink SHARP) on GPUs of ``arch`` joined at ``link_bw``
    bytes/s: an NVLink fabric (an NVSwitch of the third generation or newer, as on HGX/DGX
    H100, H200 and B200) and a GPU generation that has it."""
    a = (arch or "").lower()
    nvlink = (fabric or ("nvlink" if link_bw > CONSTANTS["nvlink_min_bw"] else "pcie")) \
        .lower() == "nvlink"
    return nvlink and (a in _NVLS_ARCHS or a not in _ARCHS + ("unknown", "turing", "pascal",
                                                              "ada"))


def collective_time(kind: str, nbytes: float, ranks: int, link_bw: float, arch: str = "ampere",
                    *, nodes: int = 1, inter_bw: float | None = None,
                    fabric: str | None = None, nvls: bool | None = None) -> CollectiveEstimate:
    """Predicted duration of one collective on ``ranks`` GPUs, as NCCL would run it.

    ``nbytes`` is the message as NCCL counts it: all-reduce, broadcast, reduce: the buffer;
    all-gather: the *output* buffer; reduce-scatter: the *input* buffer; all-to-all and
    send/recv: the bytes each rank sends in total (its own share included; for uneven
    all-to-allv pass the largest of any rank's sent and received totals).
    ``link_bw``: per-GPU, one-direction bandwidth of the intra-node fabric in bytes/s
    (``LINK_KINDS``).  ``arch``: ``"volta"``, ``"ampere"``, ``"hopper"``; anything else is
    taken as Hopper-like.  ``nodes`` > 1 needs ``inter_bw``, the per-GPU NIC bandwidth in
    bytes/s (one NIC per GPU, as on DGX/HGX nodes).  ``fabric`` (``"nvlink"`` | ``"pcie"``)
    defaults to NVLink for links faster than 64 GB/s.  ``nvls``: whether the GPUs of a node
    share an NVSwitch that reduces in the switch (NVLS); default: :func:`nvls_capable`.
    One rank (or an empty message) -> 0 us.
    """
    return collective_options(kind, nbytes, ranks, link_bw, arch, nodes=nodes,
                              inter_bw=inter_bw, fabric=fabric, nvls=nvls)[0]


def collective_options(kind: str, nbytes: float, ranks: int, link_bw: float,
                       arch: str = "ampere", *, nodes: int = 1, inter_bw: float | None = None,
                       fabric: str | None = None, nvls: bool | None = None
                       ) -> list[CollectiveEstimate]:
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
    if nvls is None:
        nvls = nvls_capable(arch, link_bw, fabric)
    net = _Net(n, nodes, link_bw, arch, inter_bw, fabric, nvls)
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
    if k == "all_reduce" and net.nvls and net.ppn > 1:
        out.append(_nvls(float(nbytes), net))
    out.sort(key=lambda e: e.us)
    return out


def _canonical(kind: str) -> str:
    k = kind if kind in CANONICAL else collective_kind(kind)
    if k is None:
        raise ValueError(f"not a collective: {kind!r} (expected one of {', '.join(CANONICAL)})")
    return k


class _Net:
    """The communicator as the model sees it: sizes, fabric, bus bandwidths in GB/s."""

    def __init__(self, n, nodes, link_bw, arch, inter_bw, fabric, nvls=False):
        self.n, self.nodes = n, nodes
        self.link = link_bw / 1e9                   # nominal per-GPU link, GB/s
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
        self.nvls = bool(nvls) and self.fabric == "nvlink"

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
    lat = c["base_lat_us"][algo][proto] + _simple_extra(proto, net)
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
    return CollectiveEstimate(us, algo, proto, wire / (us * 1e-6), detail, lat)


def _simple_extra(proto: str, net: _Net) -> float:
    """The fitted per-generation latency a Simple-protocol call adds (:data:`CONSTANTS`)."""
    return CONSTANTS["simple_lat_us"].get(net.arch, 0.0) if proto == "Simple" else 0.0


def _nvls(nbytes, net: _Net) -> CollectiveEstimate:
    """All-reduce through NVLink SHARP: in one node NVLS, across nodes NVLSTree (NVLS
    reduce-scatter in each node, a tree over the NICs between the nodes, NVLS all-gather)."""
    c = CONSTANTS
    ppn = net.ppn
    eff = c["nvls_eff"].get(net.arch, c["nvls_eff"]["hopper"])
    alg = net.link * eff * ppn / (ppn + 1)      # GB/s
    lat = c["nvls_lat_us"] + _simple_extra("Simple", net)
    algo = "nvls"
    if net.nodes > 1:
        # Each GPU carries 1/ppn of the node's reduced buffer over its own NIC: once each way
        # between two nodes, up and down a tree beyond.
        alg = min(alg, ppn * net.inter * (1.0 if net.nodes == 2 else 0.5))
        per_level = c["nvls_tree_net_lat_us"]
        lat += 2 * math.log2(net.nodes) * per_level.get(net.arch, per_level["hopper"])
        algo = "nvls_tree"
    us = lat + nbytes / (alg * 1e3)
    wire = bus_factor("all_reduce", net.n) * nbytes
    detail = (f"all_reduce {algo}/Simple: {lat:.1f} us latency + {nbytes / (alg * 1e3):.1f} us "
              f"at {alg:.1f} GB/s algbw (in-switch reduction); {net.describe()}")
    return CollectiveEstimate(us, algo, "Simple", wire / (us * 1e-6), detail, lat)


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
    lat = c["base_lat_us"]["ring"][proto] + hop + _simple_extra(proto, net)
    t_local = local_bytes / (intra * 1e3)
    t_remote = remote_bytes / (inter * 1e3) if remote_bytes > 0 else 0.0
    us = lat + max(t_local, t_remote)
    wire = bus_factor(k, n) * nbytes
    detail = (f"{k} p2p/{proto}: {lat:.1f} us latency + {max(t_local, t_remote):.1f} us "
              f"({per_peer:.0f} B per peer; {local_bytes:.0f} B over the node's fabric at "
              f"{intra:.1f} GB/s"
              + (f", {remote_bytes:.0f} B over the NIC at {inter:.1f} GB/s" if remote_bytes else "")
              + f"); {net.describe()}")
    return CollectiveEstimate(us, "p2p", proto, wire / (us * 1e-6), detail, lat)


# ------------------------------------------------------------------------------- platforms
def platform_collective(kind: str, nbytes: float, platform, ranks: int | None = None
                        ) -> tuple[CollectiveEstimate, int, int, list[str]]:
    """One collective on a resolved :class:`~predictors.hardware.platforms.Platform`:
    ``(estimate, ranks, nodes, notes)``.  ``ranks`` (default: every GPU) fill the nodes in
    order, so 8 ranks on 8-GPU nodes stay on one node's NVLink/NVSwitch.  A drawn platform
    runs over its graph (:meth:`~predictors.hardware.network.Network.communicator`: the
    ring's slowest route, each GPU's NIC share, NVLS where the GPUs share an NVSwitch); a
    GPU it cannot route is a ValueError that names it."""
    if platform.gpus < 1:
        raise ValueError(f"platform {platform.name!r} has no GPUs: collectives need GPUs")
    n = platform.ranks if ranks is None else int(ranks)
    if not 1 <= n <= platform.ranks:
        raise ValueError(f"ranks must be between 1 and the platform's {platform.ranks} "
                         f"GPUs, got {ranks}")
    arch = arch_of(platform.device)
    network = getattr(platform, "network", None)
    if network is not None and n > 1:
        comm = network.communicator(n)
        options = collective_options(
            kind, nbytes, n, comm.link_bw, arch, nodes=comm.nodes, inter_bw=comm.inter_bw,
            fabric=comm.fabric, nvls=comm.nvls and nvls_capable(arch, comm.link_bw, comm.fabric))
        est, note = min((_shared_pcie(e, _canonical(kind), nbytes, n, network)
                         for e in options), key=lambda x: x[0].us)
        return est, n, comm.nodes, list(comm.notes) + ([note] if note else [])
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
    est = collective_time(kind, nbytes, n, LINK_KINDS[intra], arch,
                          nodes=nodes, inter_bw=inter_bw, fabric=fabric)
    return est, n, nodes, notes


def _shared_pcie(est: CollectiveEstimate, kind: str, nbytes: float, ranks: int, network
                 ) -> tuple[CollectiveEstimate, str | None]:
    """``est`` slowed to what the busiest PCIe link of the drawn platform can carry: on a
    PCIe tree several routes can share a link (an all-to-all across two switches sends
    half of all its bytes through each switch's uplink), and no link moves more than its
    bandwidth (at NCCL's PCIe efficiency).  Only links every route between their two
    sides must cross count (bridges of the drawn graph): a GPU's own PCIe link beside an
    NVLink to its peer is not a shared path.  NVLink and NIC sharing are in the model
    itself (its ring's slowest route, each GPU's share of its NICs).  With it, a note
    that names the link (the same for every message size)."""
    if est.algorithm == "none":
        return est, None
    # LL lines carry 4 bytes of data in 8, LL128 120 in 128: their wire holds more bytes
    carried = {"LL": CONSTANTS["ll_frac"], "LL128": CONSTANTS["ll128_frac"]}.get(
        est.protocol, 1.0)
    worst, busiest, rate, carries = 0.0, None, 0.0, 0.0
    for link, per_byte in network.unit_loads(kind, ranks, est.algorithm):
        if link.kind.startswith("pcie") and link.bridge and link.bw > 0:
            link_rate = link.bw * CONSTANTS["pci_eff"] * carried     # bytes/s
            us = per_byte * nbytes / link_rate * 1e6
            if us > worst:
                worst, busiest, rate, carries = us, link, link_rate, per_byte * nbytes
    bound = est.latency_us + worst
    if busiest is None or bound <= est.us * (1 + 1e-9):
        return est, None
    wire = est.bus_bw * est.us * 1e-6
    why = (f"{busiest.name}, shared by its routes, carries {carries / 1e6:,.1f} MB "
           f"at {rate / 1e9:.0f} GB/s: {bound - est.us:.1f} us beyond the "
           f"{est.algorithm}'s own time")
    note = (f"{busiest.name} is shared by the routes of each {kind.replace('_', '-')} "
            f"({est.algorithm}) and sets its pace at {rate / 1e9:.0f} GB/s")
    return dataclasses.replace(est, us=bound, bus_bw=wire / (bound * 1e-6),
                               detail=f"{est.detail}; {why}"), note
