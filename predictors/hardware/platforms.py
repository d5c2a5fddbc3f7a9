"""Platform presets: which devices, how many, and the links between them."""
from __future__ import annotations

from dataclasses import dataclass, field

from .generations import arch_of
from .network import Network, build_network
from .specs import find_gpu_spec

__all__ = ["Platform", "PLATFORM_PRESETS", "LINK_KINDS", "LINK_LABELS", "GPU_MODELS",
           "resolve_platform", "preset_graph", "gpu_model_key", "gpu_nvlink",
           "gpu_device_name", "link_issues"]

# Per-GPU bandwidth, one direction, from NVIDIA's NVLink/NVSwitch pages and the PCIe and
# InfiniBand specifications.
LINK_KINDS = {
    "nvlink2": 150e9,   # V100: 6 links x 25 GB/s
    "nvlink3": 300e9,   # A100: 12 links x 25 GB/s
    "nvlink4": 450e9,   # H100/H200: 18 links x 25 GB/s
    "nvlink5": 900e9,   # B200: 18 links x 50 GB/s
    "pcie4": 32e9,      # PCIe 4.0 x16
    "pcie5": 64e9,      # PCIe 5.0 x16
    "nic400": 50e9,     # 400 Gb/s InfiniBand NDR / Ethernet
    "nic200": 25e9,     # 200 Gb/s HDR
}

LINK_LABELS = {"nvlink2": "NVLink2", "nvlink3": "NVLink3", "nvlink4": "NVLink4",
               "nvlink5": "NVLink5",
               "pcie4": "PCIe 4.0 x16", "pcie5": "PCIe 5.0 x16", "nic400": "NIC 400G",
               "nic200": "NIC 200G"}
# fabric devices a GPU link may end on (a CPU's PCIe root is not the GPUs' fabric)
_FABRIC = ("gpu", "nvswitch", "pcie_switch")
# the NVLink generation of each GPU generation; "" where it has none (NVIDIA datasheets:
# the Ada and PCIe Pascal GPUs of the GPU table have no NVLink, nor has the V100 PCIe;
# Turing is left unchecked: the T4 has none, the RTX 2080 Ti a two-GPU bridge)
_NVLINK_OF_ARCH = {"volta": "nvlink2", "ampere": "nvlink3", "hopper": "nvlink4",
                   "blackwell": "nvlink5", "ada": "", "pascal": ""}
_NVLINKS = ("nvlink2", "nvlink3", "nvlink4", "nvlink5")


@dataclass(frozen=True)
class Platform:
    """A resolved platform: ``gpus`` devices of one ``device`` model (0 for CPU-only)."""

    name: str
    device: str  # GPU name as it reports itself, or "cpu"
    gpus: int
    nodes: int
    intra_link: str | None
    inter_link: str | None
    threads: int = 1
    description: str = ""
    processes: int = 1   # CPU ranks: processes on this host joined by gloo
    # a custom graph's routes, NIC shares and switches (None for a preset: uniform links)
    network: Network | None = field(default=None, compare=False, repr=False)

    @property
    def ranks(self) -> int:
        return self.processes if self.device == "cpu" else max(1, self.gpus * self.nodes)

    @property
    def ranks_per_node(self) -> int:
        """The ranks of one node (a host's CPU processes are one node)."""
        return self.ranks if self.device == "cpu" else max(1, self.gpus)


V100 = "Tesla V100-SXM2-32GB"
A100 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
L4 = "NVIDIA L4"
L40S = "NVIDIA L40S"
B200 = "NVIDIA B200"
MI300X = "AMD Instinct MI300X"

PLATFORM_PRESETS: dict[str, Platform] = {p.name: p for p in [
    Platform("local-cpu", "cpu", 0, 1, None, None, 1, "this machine's CPU"),
    Platform("v100-1", V100, 1, 1, None, None, description="one V100 SXM2 32GB"),
    Platform("a100-1", A100, 1, 1, None, None, description="one A100 SXM4 40GB"),
    Platform("h100-1", H100, 1, 1, None, None, description="one H100 SXM5 80GB"),
    Platform("h200-1", H200, 1, 1, None, None, description="one H200 SXM 141GB"),
    Platform("l4-1", L4, 1, 1, None, None, description="one L4 24GB (PCIe)"),
    Platform("l40s-1", L40S, 1, 1, None, None, description="one L40S 48GB (PCIe)"),
    Platform("b200-1", B200, 1, 1, None, None, description="one B200 SXM 180GB"),
    Platform("mi300x-1", MI300X, 1, 1, None, None, description="one AMD Instinct MI300X 192GB"),
    Platform("dgx1-v100", V100, 8, 1, "nvlink2", None,
             description="DGX-1: 8 V100, hybrid cube-mesh NVLink"),
    Platform("dgx-a100", A100, 8, 1, "nvlink3", "nic200",
             description="DGX A100: 8 A100, NVSwitch"),
    Platform("dgx-h100", H100, 8, 1, "nvlink4", "nic400",
             description="DGX H100: 8 H100, NVSwitch"),
    Platform("dgx-h200", H200, 8, 1, "nvlink4", "nic400",
             description="DGX H200: 8 H200, NVSwitch"),
    Platform("dgx-b200", B200, 8, 1, "nvlink5", "nic400",
             description="DGX B200: 8 B200, NVSwitch"),
    Platform("pcie-4x-a100", A100, 4, 1, "pcie4", None,
             description="4 A100 on PCIe 4.0, no NVLink"),
    Platform("2node-8x-h100", H100, 8, 2, "nvlink4", "nic400",
             description="2 nodes of 8 H100, one 400G NIC per GPU"),
]}

# the short names a custom platform's GPU node may give as its ``model``
GPU_MODELS = {"v100": V100, "a100": A100, "h100": H100, "h200": H200, "l4": L4, "l40s": L40S,
              "b200": B200, "mi300x": MI300X}


def resolve_platform(platform: dict) -> Platform:
    """Turn a validated ``platform`` section into a :class:`Platform`.

    A preset may carry ``threads`` and ``ranks`` (local CPU).  A custom graph counts its ``gpu`` nodes and
    takes the model of the first one.
    """
    if "preset" in platform:
        preset = PLATFORM_PRESETS[platform["preset"]]
        threads = int(platform.get("threads", preset.threads))
        processes = int(platform.get("ranks", 1))
        description = preset.description + (f", {processes} processes joined by gloo"
                                            if processes > 1 else "")
        return Platform(preset.name, preset.device, preset.gpus, preset.nodes,
                        preset.intra_link, preset.inter_link, threads, description,
                        processes)
    nodes = platform["nodes"]
    gpus = [n for n in nodes if n["kind"] == "gpu"]
    cpus = [n for n in nodes if n["kind"] == "cpu"]
    hosts = max(1, sum(1 for n in nodes if n["kind"] == "node"))
    if not gpus:
        threads = int(cpus[0].get("params", {}).get("threads", 1)) if cpus else 1
        return Platform("custom", "cpu", 0, 1, None, None, threads, "custom CPU platform")
    device = gpu_device_name(gpus[0].get("params", {}).get("model", "a100"))
    intra, inter, unlinked = _slowest_links(platform, gpus)
    description = f"custom: {len(gpus)} x {device}"
    if unlinked and len(gpus) > 1:
        # a collective cannot route a GPU with no link at all: it names it (network.py)
        description += f"; {', '.join(unlinked)} without a GPU link"
    per_node = max(1, len(gpus) // hosts)
    network = build_network(platform, LINK_KINDS, _host_pcie(device), hosts)
    return Platform("custom", device, per_node, hosts, intra, inter,
                    description=description, network=network)


def _slowest_links(platform: dict, gpus: list[dict]) -> tuple[str | None, str | None,
                                                               list[str]]:
    """The slowest of the GPUs' own fabric links (GPU to GPU or to a switch), the slowest
    NIC link, and the GPUs that have no fabric link: a collective moves at the pace of the
    slowest link on its route."""
    kind_of = {n["id"]: n["kind"] for n in platform["nodes"]}
    fabric, nics, linked = [], [], set()
    for e in platform.get("edges", []):
        ends = {kind_of.get(e.get("source")), kind_of.get(e.get("target"))}
        kind = e.get("kind") or ""
        if kind.startswith("nic"):
            nics.append(kind)
        elif kind.startswith(("nvlink", "pcie")) and "gpu" in ends and ends <= set(_FABRIC):
            fabric.append(kind)
            linked.update(x for x in (e.get("source"), e.get("target"))
                          if kind_of.get(x) == "gpu")

    def slowest(kinds):
        return min(kinds, key=lambda k: LINK_KINDS.get(k, 0.0)) if kinds else None

    return slowest(fabric), slowest(nics), [g["id"] for g in gpus if g["id"] not in linked]


# GPUs whose host interface is PCIe 5.0 x16 (vendor datasheets); the others run 4.0
_PCIE5_GPUS = ("H100", "H200", "B200", "MI300X")


def _host_pcie(device: str) -> str:
    """The PCIe link between a GPU and its host."""
    return "pcie5" if any(g in device.upper() for g in _PCIE5_GPUS) else "pcie4"


def gpu_nvlink(device: str) -> str | None:
    """The NVLink generation a GPU has, as a link kind (``"nvlink3"`` for an A100); ``""``
    for a GPU without NVLink (L4, V100 PCIe); None when that is not known."""
    arch = arch_of(device)
    if arch == "volta" and "PCIE" in device.upper():
        return ""
    return _NVLINK_OF_ARCH.get(arch)


def gpu_device_name(model: str) -> str:
    """The name a GPU reports for a custom platform's ``model`` (a short name such as
    ``a100``, or any spelling of a name in the GPU table); unknown names as given."""
    if model in GPU_MODELS:
        return GPU_MODELS[model]
    spec = find_gpu_spec(model)
    return spec.name if spec is not None else model


def link_issues(platform: dict) -> list[tuple[int, str]]:
    """The links of a custom graph whose kind cannot join their ends, as (edge index,
    message naming it): a link joins two devices; NVLink joins GPUs and NVSwitches, and
    no faster than the GPU's own generation; a NIC link has a NIC at one end and no
    NVSwitch at the other; PCIe reaches no NVSwitch and does not join two NICs (the
    network between NICs is a NIC link)."""
    kind_of = {n["id"]: n["kind"] for n in platform.get("nodes", [])}
    model_of = {n["id"]: (n.get("params") or {}).get("model", "a100")
                for n in platform.get("nodes", []) if n["kind"] == "gpu"}
    out = []
    for i, e in enumerate(platform.get("edges", [])):
        a, b, kind = e.get("source"), e.get("target"), e.get("kind") or ""
        if a not in kind_of or b not in kind_of:
            continue
        ends = sorted((kind_of[a], kind_of[b]))
        name = f"{LINK_LABELS.get(kind, kind)} link {a}–{b}"
        if a == b:
            out.append((i, f"{name}: a link joins two devices, not {a} to itself"))
        elif kind.startswith("nvlink"):
            if not set(ends) <= {"gpu", "nvswitch"}:
                other = next(k for k in ends if k not in ("gpu", "nvswitch"))
                out.append((i, f"{name}: NVLink joins GPUs and NVSwitches, not a {other}"))
                continue
            for g in (a, b):
                if g not in model_of:
                    continue
                model = model_of[g]
                device = gpu_device_name(model)
                own = gpu_nvlink(device)
                if own == "":
                    out.append((i, f"{name}: the {device} has no NVLink; join it over PCIe"))
                    break
                if own and kind in _NVLINKS and _NVLINKS.index(kind) > _NVLINKS.index(own):
                    out.append((i, f"{name}: the {device} has {LINK_LABELS[own]} at most"))
                    break
        elif kind.startswith("nic"):
            if "nic" not in ends:
                out.append((i, f"{name}: a NIC link needs a NIC at one end, not a {ends[0]} "
                               f"and a {ends[1]}"))
            elif "nvswitch" in ends:
                out.append((i, f"{name}: an NVSwitch takes NVLink links only"))
        elif kind.startswith("pcie"):
            if "nvswitch" in ends:
                out.append((i, f"{name}: an NVSwitch takes NVLink links only"))
            elif ends == ["nic", "nic"]:
                out.append((i, f"{name}: NICs reach each other over a NIC link"))
    return out


def gpu_model_key(device: str) -> str:
    """The short model name of a GPU (``a100``) for a custom platform's GPU node."""
    return next((k for k, v in GPU_MODELS.items() if v == device), device)


def preset_graph(name: str) -> dict:
    """A preset as a platform graph (what the platform canvas shows and edits): per host
    a ``node``, its CPU, the GPUs on their fabric (an NVSwitch, DGX-1's hybrid cube-mesh
    NVLink, or a PCIe switch) and, where the preset has a network, the host's NICs,
    linked to the other hosts' NICs.  :func:`resolve_platform` gives it back as the preset, but named
    ``custom``."""
    p = PLATFORM_PRESETS[name]
    if p.device == "cpu":
        return {"nodes": [{"id": "cpu0", "kind": "cpu", "params": {"threads": p.threads}}],
                "edges": []}
    model = gpu_model_key(p.device)
    nodes, edges = [], []
    for h in range(p.nodes):
        pre = f"n{h}_" if p.nodes > 1 else ""
        nodes.append({"id": f"{pre}host", "kind": "node"})
        nodes.append({"id": f"{pre}cpu", "kind": "cpu"})
        gpus = [f"{pre}gpu{i}" for i in range(p.gpus)]
        nodes.extend({"id": g, "kind": "gpu", "params": {"model": model}} for g in gpus)
        if p.intra_link is None:
            pass  # one GPU: no fabric
        elif p.intra_link.startswith("pcie"):
            nodes.append({"id": f"{pre}pcie_switch", "kind": "pcie_switch"})
            edges.extend({"source": g, "target": f"{pre}pcie_switch", "kind": p.intra_link}
                         for g in gpus)
        elif p.name == "dgx1-v100":  # hybrid cube mesh: two fully linked quads, paired
            pairs = [(a, b) for q in (0, 4) for a in range(q, q + 4) for b in range(a + 1, q + 4)]
            pairs += [(i, i + 4) for i in range(4)]
            edges.extend({"source": gpus[a], "target": gpus[b], "kind": p.intra_link}
                         for a, b in pairs if b < len(gpus))
        else:
            nodes.append({"id": f"{pre}nvswitch", "kind": "nvswitch"})
            edges.extend({"source": g, "target": f"{pre}nvswitch", "kind": p.intra_link}
                         for g in gpus)
        if p.inter_link is not None:  # the host's scale-out NICs (one per GPU)
            nodes.append({"id": f"{pre}nic", "kind": "nic"})
            edges.append({"source": f"{pre}nic", "target": f"{pre}host",
                          "kind": p.inter_link})
    if p.nodes > 1 and p.inter_link is not None:
        nics = [f"n{h}_nic" for h in range(p.nodes)]
        edges.extend({"source": a, "target": b, "kind": p.inter_link}
                     for i, a in enumerate(nics) for b in nics[i + 1:])
    return {"nodes": nodes, "edges": edges}
