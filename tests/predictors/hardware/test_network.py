"""A drawn platform is the network its collectives run on (predictors/hardware/network.py):
removing a link, slowing one link, sharing a NIC change the prediction as hardware would."""
import pytest

from predictors.costs.collectives import platform_collective
from predictors.hardware.network import hosts_without_gpus
from predictors.hardware.platforms import (
    PLATFORM_PRESETS,
    gpu_nvlink,
    link_issues,
    preset_graph,
    resolve_platform,
)
from predictors.scenario.format import ScenarioError, validate_platform

BIG = 1 << 30


def _switched(model: str, gpus: int, link: str, hosts: int = 1, nics: str = "rail") -> dict:
    """``hosts`` servers of ``gpus`` GPUs on one NVSwitch each, every GPU on its host's PCIe
    (a drawn pcie5 link to the CPU); ``nics``: "rail" (a NIC per GPU, linked to it),
    "shared" (one NIC per host linked to all its GPUs), "host" (one NIC linked to the host:
    the canvas's "one per GPU") or "none"."""
    nodes, edges = [], []
    for h in range(hosts):
        p = f"h{h}_"
        nodes += [{"id": f"{p}host", "kind": "node"}, {"id": f"{p}cpu", "kind": "cpu"},
                  {"id": f"{p}sw", "kind": "nvswitch"}]
        for i in range(gpus):
            g = f"{p}gpu{i}"
            nodes.append({"id": g, "kind": "gpu", "params": {"model": model}})
            edges += [{"source": g, "target": f"{p}sw", "kind": link},
                      {"source": g, "target": f"{p}cpu", "kind": "pcie5"}]
        if nics == "rail":
            for i in range(gpus):
                nodes.append({"id": f"{p}nic{i}", "kind": "nic"})
                edges.append({"source": f"{p}gpu{i}", "target": f"{p}nic{i}", "kind": "pcie5"})
        elif nics in ("shared", "host"):
            nodes.append({"id": f"{p}nic", "kind": "nic"})
            if nics == "shared":
                edges += [{"source": f"{p}gpu{i}", "target": f"{p}nic", "kind": "pcie5"}
                          for i in range(gpus)]
            else:
                edges.append({"source": f"{p}nic", "target": f"{p}host", "kind": "nic400"})
    names = sorted(n["id"] for n in nodes if n["kind"] == "nic")
    for a in names:              # every NIC on the fabric switch-less: linked to the others'
        for b in names:
            if a < b and a.split("_")[0] != b.split("_")[0]:
                edges.append({"source": a, "target": b, "kind": "nic400"})
    return validate_platform({"nodes": nodes, "edges": edges})


def _time(graph: dict, kind: str = "all_gather", nbytes: float = BIG, ranks=None):
    return platform_collective(kind, nbytes, resolve_platform(graph), ranks)[0]


def _drop(graph: dict, a: str, b: str) -> dict:
    graph["edges"] = [e for e in graph["edges"] if {e["source"], e["target"]} != {a, b}]
    return graph


def _relink(graph: dict, a: str, b: str, kind: str) -> dict:
    for e in graph["edges"]:
        if {e["source"], e["target"]} == {a, b}:
            e["kind"] = kind
    return graph


@pytest.mark.parametrize("name", [n for n, p in PLATFORM_PRESETS.items() if p.ranks > 1
                                  and p.device != "cpu"])
def test_a_preset_drawn_prices_collectives_as_the_preset(name):
    preset, drawn = PLATFORM_PRESETS[name], resolve_platform(validate_platform(
        preset_graph(name)))
    assert drawn.network is not None
    for kind in ("all_reduce", "all_gather", "all_to_all", "send_recv"):
        for nbytes in (1 << 10, 1 << 20, 1 << 28):
            a = platform_collective(kind, nbytes, preset)[0]
            b = platform_collective(kind, nbytes, drawn)[0]
            assert (a.us, a.algorithm, a.protocol) == pytest.approx(
                (b.us, b.algorithm, b.protocol)), (kind, nbytes)


def test_removing_a_gpus_switch_link_leaves_it_on_pcie():
    """gpu3 loses its NVLink to the switch: it still reaches the others over its host's
    PCIe, and every ring (and the NVLS all-reduce) slows to that."""
    full = _switched("h100", 4, "nvlink4")
    cut = _drop(_switched("h100", 4, "nvlink4"), "h0_gpu3", "h0_sw")
    t_full, t_cut = _time(full), _time(cut)
    assert t_cut.us > 5 * t_full.us
    assert t_cut.detail.endswith("pci")
    assert _time(full, "all_reduce").algorithm == "nvls"
    assert _time(cut, "all_reduce").algorithm == "ring"


def test_a_gpu_with_no_link_at_all_is_an_error_naming_it():
    graph = _switched("h100", 4, "nvlink4", nics="none")
    graph = _drop(_drop(graph, "h0_gpu2", "h0_sw"), "h0_gpu2", "h0_cpu")
    with pytest.raises(ValueError, match="h0_gpu2 has no link"):
        _time(graph)
    # the three linked GPUs alone are fine
    assert _time(graph, ranks=2).us > 0


def test_halving_one_gpus_link_halves_the_ring():
    """One A100 of eight on half NVLink3's bandwidth (NVLink2's 150 GB/s): a ring is as fast
    as its slowest route, so a large all-gather takes about twice as long."""
    base = _time(_switched("a100", 8, "nvlink3"))
    slower = _relink(_switched("a100", 8, "nvlink3"), "h0_gpu5", "h0_sw", "nvlink2")
    slow = _time(slower)
    assert slow.us / base.us == pytest.approx(2.0, rel=0.05)
    notes = platform_collective("all_gather", BIG, resolve_platform(slower))[3]
    assert any("h0_gpu5" in n and "150 GB/s" in n for n in notes)   # the prediction says why
    # a faster link elsewhere changes nothing: the slowest route sets the pace (B200s on
    # NVLink4, one of them on its own NVLink5)
    b200 = _time(_switched("b200", 8, "nvlink4"))
    fast = _time(_relink(_switched("b200", 8, "nvlink4"), "h0_gpu5", "h0_sw", "nvlink5"))
    assert fast.us == pytest.approx(b200.us)


def test_a_shared_nic_versus_one_nic_per_gpu():
    """Two hosts of four H100: with one 400G NIC per GPU the hosts exchange over four NICs,
    with one NIC shared by the four GPUs over one; the canvas's host NIC counts as one per
    GPU."""
    rail = _time(_switched("h100", 4, "nvlink4", 2, "rail"), "all_gather")
    shared = _time(_switched("h100", 4, "nvlink4", 2, "shared"), "all_gather")
    host = _time(_switched("h100", 4, "nvlink4", 2, "host"), "all_gather")
    assert shared.us / rail.us == pytest.approx(4.0, rel=0.1)
    assert host.us == pytest.approx(rail.us)
    a2a_rail = _time(_switched("h100", 4, "nvlink4", 2, "rail"), "all_to_all")
    a2a_shared = _time(_switched("h100", 4, "nvlink4", 2, "shared"), "all_to_all")
    assert a2a_shared.us > 3 * a2a_rail.us
    # ranks on one host never touch the NICs
    one_host = [_time(_switched("h100", 4, "nvlink4", 2, n), ranks=4).us
                for n in ("rail", "shared")]
    assert one_host[0] == pytest.approx(one_host[1])


def test_hosts_without_a_nic_cannot_exchange():
    graph = _switched("h100", 4, "nvlink4", 2, "none")
    with pytest.raises(ValueError, match="no NIC"):
        _time(graph)
    assert _time(graph, ranks=4).us > 0


def test_two_switches_in_a_host_lose_nvls():
    """NVLS reduces in one switch: GPUs split over two switches (joined by a switch link)
    run rings."""
    graph = _switched("h100", 4, "nvlink4")
    graph["nodes"].append({"id": "h0_sw2", "kind": "nvswitch"})
    _relink(graph, "h0_gpu3", "h0_sw", "nvlink4")
    graph["edges"] = [e for e in graph["edges"]
                      if {e["source"], e["target"]} != {"h0_gpu3", "h0_sw"}]
    graph["edges"] += [{"source": "h0_gpu3", "target": "h0_sw2", "kind": "nvlink4"},
                       {"source": "h0_sw", "target": "h0_sw2", "kind": "nvlink4"}]
    est = _time(validate_platform(graph), "all_reduce")
    assert est.algorithm == "ring" and "nvlink" in est.detail


def test_pcie_routes_go_through_their_switches():
    """Four H100 on two PCIe switches: a ring crosses the switches' uplinks to the CPU, so a
    slower uplink (PCIe 4.0 under PCIe 5.0 GPU links) sets its pace."""
    def tree(uplink):
        nodes = [{"id": "cpu", "kind": "cpu"}, {"id": "s0", "kind": "pcie_switch"},
                 {"id": "s1", "kind": "pcie_switch"}]
        nodes += [{"id": f"g{i}", "kind": "gpu", "params": {"model": "h100"}} for i in range(4)]
        edges = [{"source": f"g{i}", "target": f"s{i // 2}", "kind": "pcie5"} for i in range(4)]
        edges += [{"source": f"s{j}", "target": "cpu", "kind": uplink} for j in range(2)]
        return validate_platform({"nodes": nodes, "edges": edges})

    fast, slow = _time(tree("pcie5")), _time(tree("pcie4"))
    assert slow.us / fast.us == pytest.approx(2.0, rel=0.05)
    # two GPUs under one switch never touch the uplink
    assert _time(tree("pcie4"), ranks=2).us == pytest.approx(_time(tree("pcie5"), ranks=2).us)


# --- link loads: which links a collective crosses and what each carries -------------------

def _loads(graph_or_preset, kind, algorithm, nbytes=BIG, ranks=None):
    if isinstance(graph_or_preset, str):
        graph_or_preset = validate_platform(preset_graph(graph_or_preset))
    p = resolve_platform(graph_or_preset)
    return {link.name: b for link, b in p.network.link_loads(kind, nbytes, ranks or p.ranks,
                                                             algorithm)}, p


@pytest.mark.parametrize("kind, algorithm, share", [
    ("all_to_all", "p2p", 7 / 8),          # S/n to each of the 7 peers
    ("all_reduce", "ring", 2 * 7 / 8),     # 2(n-1)/n S to the next GPU
    ("all_gather", "ring", 7 / 8),
    ("all_reduce", "nvls", 9 / 8),         # (n+1)/n S to the switch and back
])
def test_every_nvlink_port_of_a_dgx_carries_the_rule(kind, algorithm, share):
    loads, _ = _loads("dgx-h100", kind, algorithm)
    assert sorted(loads) == [f"NVLink gpu{i}↔nvswitch" for i in range(8)]
    assert all(b == pytest.approx(share * BIG) for b in loads.values())


def test_across_hosts_the_nics_carry_what_leaves_the_host():
    """Two DGX H100: a ring all-reduce sends 1/ppn of each GPU's 2(n-1)/n S over the NICs
    (the host's NIC stands for one per GPU, 8 x 50 GB/s); an all-to-all the half of S
    that goes to the other host, from each GPU."""
    loads, p = _loads("2node-8x-h100", "all_reduce", "ring")
    w = 2 * 15 / 16 * BIG
    assert loads["NIC n0_nic"] == pytest.approx(w) == loads["NIC n1_nic"]
    assert loads["NVLink n1_gpu3↔n1_nvswitch"] == pytest.approx(w * 7 / 8)
    nic = next(link for link in p.network.links().values() if link.name == "NIC n0_nic")
    assert nic.bw == pytest.approx(8 * 50e9)
    loads, _ = _loads("2node-8x-h100", "all_to_all", "p2p")
    assert loads["NIC n0_nic"] == pytest.approx(8 * BIG / 2)
    assert loads["NVLink n0_gpu0↔n0_nvswitch"] == pytest.approx(7 / 16 * BIG)
    # eight ranks stay on the first host: no NIC
    loads, _ = _loads("2node-8x-h100", "all_to_all", "p2p", ranks=8)
    assert not any(name.startswith("NIC") for name in loads) and len(loads) == 8


def test_a_shared_nic_carries_its_gpus_traffic_and_routes_cross_switch_uplinks():
    loads, _ = _loads(_switched("h100", 4, "nvlink4", 2, "shared"), "all_gather", "ring")
    assert loads["NIC h0_nic"] == pytest.approx(7 / 8 * BIG)   # w S / ppn from each of 4
    loads, _ = _loads(_switched("h100", 4, "nvlink4", 2, "rail"), "all_gather", "ring")
    assert loads["NIC h0_nic2"] == pytest.approx(7 / 8 * BIG / 4)
    # a PCIe ring over two switches: the uplinks carry the routes that cross them
    nodes = [{"id": "cpu", "kind": "cpu"}, {"id": "s0", "kind": "pcie_switch"},
             {"id": "s1", "kind": "pcie_switch"}]
    nodes += [{"id": f"g{i}", "kind": "gpu", "params": {"model": "h100"}} for i in range(4)]
    edges = [{"source": f"g{i}", "target": f"s{i // 2}", "kind": "pcie5"} for i in range(4)]
    edges += [{"source": f"s{j}", "target": "cpu", "kind": "pcie4"} for j in range(2)]
    loads, _ = _loads(validate_platform({"nodes": nodes, "edges": edges}), "all_gather",
                      "ring")
    assert loads["PCIe g0↔s0"] == pytest.approx(3 / 4 * BIG)
    assert loads["PCIe s0↔host0"] == pytest.approx(3 / 4 * BIG)   # one route each way


def test_a_halved_link_carries_the_same_bytes_at_half_the_bandwidth():
    graph = _relink(_switched("a100", 8, "nvlink3"), "h0_gpu5", "h0_sw", "nvlink2")
    p = resolve_platform(graph)
    loads = {link: b for link, b in p.network.link_loads("all_reduce", BIG, 8, "ring")}
    by_name = {link.name: (link, b) for link, b in loads.items()}
    slow, fast = by_name["NVLink h0_gpu5↔h0_sw"], by_name["NVLink h0_gpu0↔h0_sw"]
    assert slow[1] == pytest.approx(fast[1])
    assert slow[0].bw == pytest.approx(fast[0].bw / 2)


def _messages(graph: dict) -> list[str]:
    try:
        validate_platform(graph)
    except ScenarioError as exc:
        return [str(i) for i in exc.issues]
    return []


@pytest.mark.parametrize("a, b, kind, expected", [
    ("h0_gpu0", "h0_nic0", "nvlink4", "NVLink joins GPUs and NVSwitches, not a nic"),
    ("h0_gpu0", "h0_cpu", "nic400", "needs a NIC at one end, not a cpu and a gpu"),
    ("h0_gpu0", "h0_sw", "pcie5", "an NVSwitch takes NVLink links only"),
    ("h0_nic0", "h0_sw", "nic400", "an NVSwitch takes NVLink links only"),
    ("h0_gpu0", "h0_sw", "nvlink5", "the NVIDIA H100 80GB HBM3 has NVLink4 at most"),
])
def test_a_link_its_ends_cannot_take_is_an_error_naming_it(a, b, kind, expected):
    graph = _switched("h100", 4, "nvlink4")
    assert _messages(graph) == [] and link_issues(graph) == []
    if any({e["source"], e["target"]} == {a, b} for e in graph["edges"]):
        _relink(graph, a, b, kind)
    else:
        graph["edges"].append({"source": a, "target": b, "kind": kind})
    [message] = _messages(graph)
    assert f"link {a}–{b}" in message and expected in message


def test_nvlink_on_a_gpu_without_it_and_between_nics_over_pcie_are_errors():
    l4 = {"nodes": [{"id": "a", "kind": "gpu", "params": {"model": "l4"}},
                    {"id": "b", "kind": "gpu", "params": {"model": "l4"}}],
          "edges": [{"source": "a", "target": "b", "kind": "nvlink4"}]}
    assert "the NVIDIA L4 has no NVLink" in _messages(l4)[0]
    l4["edges"][0]["kind"] = "pcie4"
    assert _messages(l4) == []
    two = _switched("h100", 2, "nvlink4", 2, "rail")
    _relink(two, "h0_nic0", "h1_nic0", "pcie5")
    assert "NICs reach each other over a NIC link" in _messages(two)[0]
    # an older NVLink generation on a newer GPU is allowed (a slower link, as drawn)
    assert _messages(_switched("h100", 4, "nvlink3")) == []
    assert (gpu_nvlink("Tesla V100-PCIE-32GB"), gpu_nvlink("Tesla V100-SXM2-32GB"),
            gpu_nvlink("NVIDIA B200"), gpu_nvlink("NVIDIA GeForce RTX 2080 Ti")) == \
        ("", "nvlink2", "nvlink5", None)      # the 2080 Ti's bridge: not checked


def test_a_host_and_nic_drawn_without_gpus_is_an_error_naming_the_host():
    graph = preset_graph("dgx-h100")
    graph["nodes"] += [{"id": "spare", "kind": "node"}, {"id": "spare_nic", "kind": "nic"}]
    graph["edges"] += [{"source": "spare", "target": "spare_nic", "kind": "nic400"},
                       {"source": "spare_nic", "target": "nic", "kind": "nic400"}]
    spare = next(i for i, n in enumerate(graph["nodes"]) if n["id"] == "spare")
    assert hosts_without_gpus(graph) == [(spare, "spare")]
    [message] = _messages(graph)
    assert message.startswith(f"platform.nodes[{spare}]") and "host 'spare' has no GPUs" \
        in message
    # two hosts, each with its own switched GPUs, are fine; so is every preset
    assert hosts_without_gpus(preset_graph("2node-8x-h100")) == []
    for name in PLATFORM_PRESETS:
        assert _messages(preset_graph(name)) == [], name


def test_gpus_on_one_switch_across_two_hosts_take_both_hosts():
    """One NVLink domain over two hosts (each GPU on its own host's PCIe): no host is
    empty; the same GPUs linked to no host are one group, which fills one host only."""
    graph = preset_graph("dgx-h100")
    graph["nodes"] += [{"id": "host2", "kind": "node"}, {"id": "cpu2", "kind": "cpu"}]
    for i in range(8):
        graph["edges"].append({"source": f"gpu{i}", "target": "cpu" if i < 4 else "cpu2",
                               "kind": "pcie5"})
    graph["edges"] += [{"source": "cpu", "target": "host", "kind": "pcie5"},
                       {"source": "cpu2", "target": "host2", "kind": "pcie5"}]
    assert hosts_without_gpus(graph) == [] and _messages(graph) == []
    unlinked = preset_graph("dgx-h100")
    unlinked["nodes"].append({"id": "host2", "kind": "node"})
    assert [h for _, h in hosts_without_gpus(unlinked)] == ["host2"]


def _pcie_tree(switches: int, per_switch: int, uplink: str) -> dict:
    """L40S GPUs (no NVLink) on PCIe 4.0 under ``switches`` PCIe switches, each switch on
    the CPU over ``uplink``."""
    nodes, edges = [{"id": "cpu", "kind": "cpu"}], []
    for s in range(switches):
        nodes.append({"id": f"s{s}", "kind": "pcie_switch"})
        edges.append({"source": f"s{s}", "target": "cpu", "kind": uplink})
        for i in range(per_switch):
            g = f"g{s * per_switch + i}"
            nodes.append({"id": g, "kind": "gpu", "params": {"model": "l40s"}})
            edges.append({"source": g, "target": f"s{s}", "kind": "pcie4"})
    return validate_platform({"nodes": nodes, "edges": edges})


def test_a_pcie_uplink_shared_by_an_all_to_all_sets_its_pace():
    """Eight GPUs under two switches: an all-to-all sends 2 x S through each uplink
    against 7/8 x S on a GPU's own link, so on equal links it takes 16/7 as long as on
    one switch; a ring crosses each uplink once each way and keeps its time."""
    one, two = _pcie_tree(1, 8, "pcie4"), _pcie_tree(2, 4, "pcie4")
    a2a_one, a2a_two = _time(one, "all_to_all", 1 << 28), _time(two, "all_to_all", 1 << 28)
    assert a2a_two.us / a2a_one.us == pytest.approx(16 / 7, rel=0.02)
    assert _time(two, "all_reduce", 1 << 28).us == pytest.approx(
        _time(one, "all_reduce", 1 << 28).us)
    notes = platform_collective("all_to_all", 1 << 28, resolve_platform(two))[3]
    assert any("s0" in n and "shared by the routes of each all-to-all" in n for n in notes)
    # a faster uplink (PCIe 5.0) halves what it adds; four switches of two share less
    assert _time(_pcie_tree(2, 4, "pcie5"), "all_to_all", 1 << 28).us < a2a_two.us
    # the link lanes then show no PCIe link above its bandwidth
    platform = resolve_platform(two)
    est = _time(two, "all_to_all", 1 << 28)
    for link, nbytes in platform.network.link_loads("all_to_all", 1 << 28, 8, est.algorithm):
        assert nbytes / (link.bw * est.us * 1e-6) <= 1.0, link.name


def test_a_gpus_own_pcie_link_beside_an_nvlink_pair_is_not_shared():
    """Two NVLink-bridged pairs of A100s, each GPU on its own PCIe 4.0 link to the CPU:
    the routes' spanning tree keeps one PCIe link per pair, but every GPU still has its
    own, so nothing is shared and the all-to-all keeps the model's time."""
    nodes = [{"id": "cpu", "kind": "cpu"}] + [
        {"id": f"g{i}", "kind": "gpu", "params": {"model": "a100"}} for i in range(4)]
    edges = [{"source": "g0", "target": "g1", "kind": "nvlink3"},
             {"source": "g2", "target": "g3", "kind": "nvlink3"}]
    edges += [{"source": f"g{i}", "target": "cpu", "kind": "pcie4"} for i in range(4)]
    platform = resolve_platform(validate_platform({"nodes": nodes, "edges": edges}))
    est, _, _, notes = platform_collective("all_to_all", 1 << 28, platform)
    assert "shared" not in est.detail and not any("shared" in n for n in notes)
