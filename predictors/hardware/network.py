"""A drawn platform graph as the network its collectives run on.

The graph's devices (GPUs, NVSwitches, PCIe switches, NICs, hosts) and links (each with the
per-GPU bandwidth of its kind) are the network.  For the first ``n`` GPUs (ranks fill the
hosts in order) :meth:`Network.communicator` says what NCCL's algorithms run over:

- inside a host, a ring through the GPUs over their widest routes; a route is as fast as
  its slowest link, the ring as fast as its slowest route.  PCIe routes pass the drawn
  switches and their links to the CPU; a GPU whose links do not reach the CPU sits on it
  over its own PCIe;
- across hosts, each GPU's share of the NICs that serve it: a NIC linked to GPUs is shared
  by them, a NIC linked only to its host stands for one NIC per GPU (as the presets draw
  it);
- NVLS where every GPU of a host hangs on the same NVSwitch over NVLink.

A GPU without any link, or one that must leave its host without a NIC, is an error that
names it.  :meth:`Network.link_loads` says which physical links a collective's algorithm
crosses and how many bytes each carries (the Timeline's link lanes).  Plain networkx; no Qt.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import networkx as nx

__all__ = ["Communicator", "Link", "Network", "build_network", "hosts_without_gpus"]

_FABRIC = ("gpu", "nvswitch", "pcie_switch")
_HOST_ROOT = "__host_pcie__"


@dataclass(frozen=True)
class Communicator:
    """What a collective over the first ``ranks`` GPUs runs on (bandwidths in bytes/s)."""

    ranks: int
    nodes: int
    link_bw: float          # the ring's slowest route inside a host
    fabric: str             # "nvlink" | "pcie": the kind of that slowest route's slowest link
    inter_bw: float | None  # the slowest GPU's share of its NICs (None on one host)
    nvls: bool              # every host's GPUs on one NVSwitch over NVLink
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Link:
    """A physical link (or link group) that collectives cross: a GPU's NVLink or PCIe
    link inside its host, or a NIC; ``bw`` is bytes/s in one direction (a NIC standing
    for one NIC per GPU: their sum)."""

    name: str    # "NVLink gpu0↔nvswitch", "PCIe gpu3↔pcie_switch0", "NIC n1_nic"
    kind: str    # the drawn kind: "nvlink4", "pcie5", "nic400"
    bw: float
    order: int   # position in :meth:`Network.links` (hosts in order, NICs last)
    bridge: bool = True   # every route between its sides crosses it (Network.bridges)


@dataclass(frozen=True, eq=False)
class Network:
    """The GPUs of a drawn platform, grouped by host, with their routes and NIC shares."""

    gpus: tuple[str, ...]                 # in rank order: host by host
    host_of: tuple[int, ...]
    graphs: tuple[nx.Graph, ...]          # per host: its maximum spanning tree of routes
    nic_bw: tuple[float, ...]             # per GPU, bytes/s (0: no NIC)
    switch_of: tuple[str | None, ...]     # the NVSwitch a GPU hangs on over NVLink
    unlinked: tuple[str, ...]             # GPUs without any link
    # per NIC on the network: (its id, its kind, {GPU: that GPU's share of it, bytes/s})
    nics: tuple[tuple[str, str, dict], ...] = ()
    # the route links (keyed as in :meth:`links`) that are bridges of their host's whole
    # drawn graph: every route between their two sides crosses them, so their load is
    # real; a route link with a parallel path stands for links the tree left out
    bridges: frozenset = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "_cache", {})   # communicators by rank count
        object.__setattr__(self, "_orders", {})  # ring orders by (host, GPUs)
        object.__setattr__(self, "_links", None)
        object.__setattr__(self, "_unit", {})     # link loads per byte, by collective

    def communicator(self, ranks: int) -> Communicator:
        """The network the first ``ranks`` GPUs use; ValueError names a GPU it cannot
        route."""
        if ranks not in self._cache:
            self._cache[ranks] = self._communicator(ranks)
        return self._cache[ranks]

    def _communicator(self, ranks: int) -> Communicator:
        members = list(range(ranks))
        lost = [self.gpus[i] for i in members if self.gpus[i] in self.unlinked]
        if lost and ranks > 1:
            one = len(lost) == 1
            raise ValueError(f"{', '.join(lost)} {'has' if one else 'have'} no link to the "
                             f"other GPUs: draw {'its' if one else 'their'} NVLink/NVSwitch "
                             "or PCIe link")
        by_host: dict[int, list[int]] = {}
        for i in members:
            by_host.setdefault(self.host_of[i], []).append(i)
        nodes = len(by_host)
        link_bw, fabric, notes = float("inf"), "nvlink", []
        for host, idx in by_host.items():
            bw, kind, slowest, fastest = self._ring(host, [self.gpus[i] for i in idx])
            if bw < link_bw:
                link_bw, fabric = bw, kind
            if bw < fastest:      # heterogeneous routes: say which one sets the pace
                notes.append(f"the ring's slowest route, {slowest[0]} to {slowest[1]}, runs at "
                             f"{bw / 1e9:.0f} GB/s ({kind}); the fastest at "
                             f"{fastest / 1e9:.0f} GB/s")
        inter = None
        if nodes > 1:
            without = [self.gpus[i] for i in members if self.nic_bw[i] <= 0]
            if without:
                raise ValueError(f"{', '.join(without)} must reach GPUs on other hosts, but no "
                                 "NIC linked to the network serves "
                                 f"{'it' if len(without) == 1 else 'them'}")
            inter = min(self.nic_bw[i] for i in members)
        if link_bw == float("inf"):          # one GPU per host: no fabric inside a host
            link_bw, fabric = (inter or 0.0), "nvlink"
        nvls = all(len({self.switch_of[i] for i in idx}) == 1
                   and self.switch_of[idx[0]] is not None for idx in by_host.values())
        return Communicator(ranks, nodes, link_bw, fabric, inter, nvls, tuple(notes))

    def _ring(self, host: int, gpus: list[str]) -> tuple[float, str, tuple[str, str], float]:
        """A ring through ``gpus`` over widest routes, greedily (the next GPU is the one with
        the widest route): its slowest route's bandwidth, that route's slowest link kind,
        its two GPUs, and the fastest route's bandwidth."""
        if len(gpus) < 2:
            return float("inf"), "nvlink", ("", ""), float("inf")
        tree = self.graphs[host]
        order = self._ring_order(host, gpus)
        pairs = list(zip(order, order[1:] + order[:1]))
        hops = [_route(tree, a, b) for a, b in pairs]
        i = min(range(len(hops)), key=lambda j: hops[j][0])
        return hops[i][0], hops[i][1], pairs[i], max(h[0] for h in hops)

    def _ring_order(self, host: int, gpus: list[str]) -> list[str]:
        """The ring through ``gpus``, greedily: the next GPU is the one with the widest
        route."""
        key = (host, tuple(gpus))
        if key not in self._orders:
            tree = self.graphs[host]
            order, left = [gpus[0]], set(gpus[1:])
            while left:
                here = order[-1]
                nxt = max(sorted(left), key=lambda g: _route(tree, here, g)[0])
                order.append(nxt)
                left.remove(nxt)
            self._orders[key] = order
        return self._orders[key]

    # --- the links a collective crosses ---------------------------------------------------

    def links(self) -> dict[tuple, Link]:
        """Every link a route or a NIC may carry: per host the links of its widest routes
        (GPUs, switches, the host's PCIe root), then the NICs; keyed ``(host, end, end)``
        (ends sorted) or ``("nic", id)``."""
        if self._links is None:
            out: dict[tuple, Link] = {}
            for h, tree in enumerate(self.graphs):
                for u, v in sorted((tuple(sorted(e, key=_natural)) for e in tree.edges),
                                   key=lambda e: (_natural(e[0]), _natural(e[1]))):
                    kind = tree.edges[u, v]["kind"]
                    a, b = sorted((u, v), key=lambda x: (x not in self.gpus, x == _HOST_ROOT,
                                                         _natural(x)))
                    family = "PCIe" if kind.startswith("pcie") else "NVLink"
                    out[(h, u, v)] = Link(f"{family} {_shown(a, h)}↔{_shown(b, h)}", kind,
                                          tree.edges[u, v]["bw"], len(out),
                                          (h, u, v) in self.bridges)
            for nic, kind, shares in self.nics:
                out[("nic", nic)] = Link(f"NIC {nic}", kind, sum(shares.values()), len(out))
            object.__setattr__(self, "_links", out)
        return self._links

    def unit_loads(self, kind: str, ranks: int, algorithm: str) -> list[tuple[Link, float]]:
        """:meth:`link_loads` per byte of the collective (every load grows with its size),
        kept per ``(kind, ranks, algorithm)``."""
        key = (kind, ranks, algorithm)
        if key not in self._unit:
            self._unit[key] = self.link_loads(kind, 1.0, ranks, algorithm)
        return self._unit[key]

    def link_loads(self, kind: str, nbytes: float, ranks: int, algorithm: str
                   ) -> list[tuple[Link, float]]:
        """The links one ``kind`` collective (canonical name) of ``nbytes`` over the first
        ``ranks`` GPUs crosses when it runs as ``algorithm`` (the collective model's
        choice), each with the bytes it carries in its busier direction, in
        :meth:`links` order.  The rule is in ``docs/models/collectives.md`` ("Link
        lanes")."""
        if ranks < 2 or nbytes <= 0 or algorithm == "none":
            return []
        by_host: dict[int, list[str]] = {}
        for i in range(ranks):
            by_host.setdefault(self.host_of[i], []).append(self.gpus[i])
        n, nodes, s = ranks, len(by_host), float(nbytes)
        flows: dict[tuple, list[float]] = {}   # link key -> bytes (forward, backward)
        nic_out: dict[str, float] = {}         # GPU -> bytes it sends to other hosts

        def send(h: int, a: str, b: str, amount: float, both: bool = False) -> None:
            path = nx.shortest_path(self.graphs[h], a, b)
            for u, v in itertools.pairwise(path):
                key = (h,) + tuple(sorted((u, v), key=_natural))
                both_ways = flows.setdefault(key, [0.0, 0.0])
                forward = (u, v) == key[1:]
                both_ways[0 if forward else 1] += amount
                if both:
                    both_ways[1 if forward else 0] += amount

        for h, gpus in by_host.items():
            ppn = len(gpus)
            order = self._ring_order(h, gpus) if ppn > 1 else gpus
            ring = list(zip(order, order[1:] + order[:1])) if ppn > 1 else []
            if algorithm == "ring":
                per_rank = s * _ring_wire(kind, n)
                inside = per_rank if nodes == 1 else per_rank * (ppn - 1) / ppn
                chain = kind in ("broadcast", "reduce") and nodes == 1
                for a, b in ring[:-1] if chain else ring:
                    send(h, a, b, inside)
                if nodes > 1:
                    nic_out.update((g, per_rank / ppn) for g in gpus)
            elif algorithm == "tree":           # a chain in the host, both ways
                for a, b in ring[:-1]:
                    send(h, a, b, s, both=True)
                if nodes > 1:
                    nic_out.update((g, s / ppn) for g in gpus)
            elif algorithm in ("nvls", "nvls_tree"):   # each GPU to its switch and back
                for g in gpus:
                    switch = self.switch_of[self.gpus.index(g)]
                    if switch is not None and ppn > 1:
                        send(h, g, switch, s * (ppn + 1) / ppn, both=True)
                if nodes > 1:
                    nic_out.update((g, s / ppn * (1 if nodes == 2 else 2)) for g in gpus)
            elif algorithm == "p2p" and kind == "send_recv":   # each to the next GPU
                for a, b in ring:
                    send(h, a, b, s)
                if ppn == 1 and nodes > 1:
                    nic_out[gpus[0]] = s
            elif algorithm == "p2p":            # every pair at once, S/n each
                for a, b in itertools.permutations(gpus, 2):
                    send(h, a, b, s / n)
                if nodes > 1:
                    nic_out.update((g, s * (n - ppn) / n) for g in gpus)
        links = self.links()
        loads = [(links[key], max(ways)) for key, ways in flows.items() if key in links]
        # a GPU's bytes to other hosts split over its NICs by its share of each
        total = {g: sum(sh.get(g, 0.0) for _, _, sh in self.nics) for g in nic_out}
        for nic, _, shares in self.nics:
            carried = sum(out * shares[g] / total[g] for g, out in nic_out.items()
                          if g in shares and total[g] > 0)
            if carried > 0:
                loads.append((links[("nic", nic)], carried))
        return sorted((x for x in loads if x[1] > 0), key=lambda x: x[0].order)


def _ring_wire(kind: str, n: int) -> float:
    """Bytes a rank sends to the next on a ring, over the message (nccl-tests' factors)."""
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    return (n - 1) / n if kind in ("all_gather", "reduce_scatter") else 1.0


def _natural(name: str) -> tuple:
    """``gpu2`` before ``gpu10``."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _shown(node: str, host: int = 0) -> str:
    return f"host{host}" if node == _HOST_ROOT else node


def _route(tree: nx.Graph, a: str, b: str) -> tuple[float, str]:
    """The widest route between two GPUs (their path in the maximum spanning tree): the
    bandwidth of its slowest link and that link's kind family."""
    path = nx.shortest_path(tree, a, b)
    links = [tree.edges[u, v] for u, v in itertools.pairwise(path)]
    slowest = min(links, key=lambda e: e["bw"])
    return slowest["bw"], "pcie" if slowest["kind"].startswith("pcie") else "nvlink"


def build_network(platform: dict, link_bw: dict[str, float], host_link: str,
                  hosts: int) -> Network:
    """The :class:`Network` of a validated custom platform graph.  ``link_bw``: bytes/s per
    link kind; ``host_link``: the GPUs' PCIe link to their host; ``hosts``: the number of
    ``node`` devices (at least 1)."""
    kind_of, gpus, edges = _parts(platform)
    linked = {x for e in edges for x in (e["source"], e["target"])}
    host_of = _hosts(platform, gpus, edges, kind_of, max(1, hosts))
    hosts = max(1, hosts)

    # per host: the fabric (GPU, switch and host-PCIe links) and its widest routes
    graphs, bridges = [], set()
    for h in range(hosts):
        members = [g for g in gpus if host_of[g] == h]
        g = nx.Graph()
        g.add_nodes_from(members)
        for e in edges:
            a, b, kind = e["source"], e["target"], e.get("kind", "")
            ends = {kind_of[a], kind_of[b]}
            if not kind.startswith(("nvlink", "pcie")) or not ends <= set(_FABRIC) | {
                    "cpu", "node"} or ends <= {"cpu", "node"}:
                continue
            if any(kind_of[x] == "gpu" and host_of.get(x) != h for x in (a, b)):
                continue          # another host's GPU
            # a CPU or host end is this host's PCIe root
            _add(g, _HOST_ROOT if kind_of[a] in ("cpu", "node") else a,
                 _HOST_ROOT if kind_of[b] in ("cpu", "node") else b, kind, link_bw)
        # a wired GPU whose drawn links do not reach its host's PCIe root still sits on it
        for m in members:
            if m in linked and not (g.has_node(_HOST_ROOT) and nx.has_path(g, m, _HOST_ROOT)):
                _add(g, m, _HOST_ROOT, host_link, link_bw)
        # keep the part joined to this host's GPUs: a spanning forest's trees per component
        graphs.append(nx.maximum_spanning_tree(g, weight="bw"))
        bridges.update((h,) + tuple(sorted(e, key=_natural)) for e in nx.bridges(g))

    nic_bw, nics = _nic_shares(gpus, edges, kind_of, host_of, link_bw)
    switch_of = {}
    for e in edges:
        a, b, kind = e["source"], e["target"], e.get("kind", "")
        if kind.startswith("nvlink") and {kind_of[a], kind_of[b]} == {"gpu", "nvswitch"}:
            gpu, sw = (a, b) if kind_of[a] == "gpu" else (b, a)
            switch_of.setdefault(gpu, sw)
    order = sorted(gpus, key=lambda g: (host_of[g], gpus.index(g)))
    return Network(tuple(order), tuple(host_of[g] for g in order), tuple(graphs),
                   tuple(nic_bw[g] for g in order), tuple(switch_of.get(g) for g in order),
                   tuple(g for g in order if g not in linked), nics, frozenset(bridges))


def _add(g: nx.Graph, a: str, b: str, kind: str, link_bw: dict[str, float]) -> None:
    """Add a link, keeping the faster one where two join the same ends."""
    bw = link_bw.get(kind, 0.0)
    if a != b and (not g.has_edge(a, b) or g.edges[a, b]["bw"] < bw):
        g.add_edge(a, b, bw=bw, kind=kind)


def _parts(platform: dict) -> tuple[dict, list[str], list[dict]]:
    """A graph's device kinds by id, its GPUs in drawing order, and its links between
    devices that exist."""
    kind_of = {n["id"]: n["kind"] for n in platform["nodes"]}
    gpus = [n["id"] for n in platform["nodes"] if n["kind"] == "gpu"]
    edges = [e for e in platform.get("edges", [])
             if e.get("source") in kind_of and e.get("target") in kind_of]
    return kind_of, gpus, edges


def _gpu_groups(platform: dict, gpus: list[str], edges: list[dict], kind_of: dict
                ) -> tuple[list[str], list[tuple[list[str], list[int]]]]:
    """The host ids in drawing order, and each group of GPUs joined by links (links between
    NICs do not join: they are the network between hosts) with the indices of the hosts
    its links reach, groups in the drawing order of their first GPU."""
    host_ids = [n["id"] for n in platform["nodes"] if n["kind"] == "node"]
    local = nx.Graph()
    local.add_nodes_from(kind_of)
    local.add_edges_from((e["source"], e["target"]) for e in edges
                         if not (kind_of[e["source"]] == kind_of[e["target"]] == "nic"))
    groups = []
    for comp in nx.connected_components(local):
        members = [g for g in gpus if g in comp]
        if members:
            groups.append((members, [i for i, h in enumerate(host_ids) if h in comp]))
    groups.sort(key=lambda m: gpus.index(m[0][0]))
    return host_ids, groups


def hosts_without_gpus(platform: dict) -> list[tuple[int, str]]:
    """The hosts (``node`` devices) of a custom graph that no group of linked GPUs can sit
    on, as (node index, id): a host is taken by the GPUs whose links reach it, and the
    groups of GPUs whose links reach no host take the other hosts one each, in drawing
    order.  GPUs joined by NVLink, a switch or PCIe are in one group."""
    kind_of, gpus, edges = _parts(platform)
    host_ids, groups = _gpu_groups(platform, gpus, edges, kind_of)
    if len(host_ids) <= 1 or not gpus:
        return []
    taken = {h for _, reached in groups for h in reached}
    loose = sum(1 for _, reached in groups if not reached)
    free = [h for h in range(len(host_ids)) if h not in taken]
    index = {n["id"]: i for i, n in enumerate(platform["nodes"])}
    return [(index[host_ids[h]], host_ids[h]) for h in free[loose:]]


def _hosts(platform: dict, gpus: list[str], edges: list[dict], kind_of: dict,
           hosts: int) -> dict[str, int]:
    """Which host each GPU belongs to: the host its links reach (not counting links between
    NICs); GPUs whose links reach no host take the hosts without GPUs in drawing order; what
    is left fills the hosts in order."""
    if hosts <= 1 or not any(n["kind"] == "node" for n in platform["nodes"]):
        return {g: 0 for g in gpus}
    host_ids, groups = _gpu_groups(platform, gpus, edges, kind_of)
    host_of = {g: reached[0] for members, reached in groups if len(reached) == 1
               for g in members}
    islands = [members for members, reached in groups if len(reached) != 1]
    free = [h for h in range(len(host_ids)) if h not in host_of.values()]
    if len(islands) == len(free):
        for h, members in zip(free, islands):
            host_of.update((g, h) for g in members)
    per_host = max(1, len(gpus) // hosts)
    for i, g in enumerate(gpus):
        host_of.setdefault(g, min(i // per_host, hosts - 1))
    return host_of


def _nic_shares(gpus, edges, kind_of, host_of, link_bw
                ) -> tuple[dict[str, float], tuple[tuple[str, str, dict], ...]]:
    """Each GPU's NIC bandwidth in bytes/s, and per NIC its kind and what it gives each GPU
    it serves: a NIC on the network (linked to another NIC) linked to GPUs gives each of
    them an equal share, over the GPU's own link to it; one linked only to its host counts
    as one NIC per GPU of that host."""
    nics = sorted((n for n, k in kind_of.items() if k == "nic"), key=_natural)
    out = {g: 0.0 for g in gpus}
    served_by: list[tuple[str, str, dict]] = []
    for nic in nics:
        mine = [e for e in edges if nic in (e["source"], e["target"])]
        network = [link_bw.get(e.get("kind", ""), 0.0) for e in mine
                   if kind_of[e["source"]] == kind_of[e["target"]] == "nic"]
        if not network:
            continue
        speed = min(network)
        nic_kind = min((e.get("kind", "") for e in mine
                        if kind_of[e["source"]] == kind_of[e["target"]] == "nic"),
                       key=lambda k: link_bw.get(k, 0.0))
        served = {}
        for e in mine:
            other = e["target"] if e["source"] == nic else e["source"]
            if kind_of[other] == "gpu":
                served[other] = link_bw.get(e.get("kind", ""), 0.0)
        if served:
            shares = {g: min(attach, speed / len(served)) for g, attach in served.items()}
            for g, share in shares.items():
                out[g] += share
            served_by.append((nic, nic_kind, shares))
            continue
        host_ids = [n for n, k in kind_of.items() if k == "node"]
        shares = {}
        for e in mine:
            for other in (e["source"], e["target"]):
                if kind_of[other] != "node":
                    continue
                for g in gpus:
                    if host_of[g] == host_ids.index(other):
                        share = min(speed, link_bw.get(e.get("kind", ""), 0.0))
                        shares[g] = max(shares.get(g, 0.0), share)
                        out[g] = max(out[g], share)
        if shares:
            served_by.append((nic, nic_kind, shares))
    return out, tuple(served_by)
