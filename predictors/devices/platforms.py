"""Platform presets: which devices, how many, and the links between them."""
from __future__ import annotations

from dataclasses import dataclass

from .specs import find_gpu_spec

__all__ = ["Platform", "PLATFORM_PRESETS", "LINK_KINDS", "GPU_MODELS", "resolve_platform"]

# Per-GPU bandwidth, one direction, from NVIDIA's NVLink/NVSwitch pages and the PCIe and
# InfiniBand specifications.
LINK_KINDS = {
    "nvlink2": 150e9,   # V100: 6 links x 25 GB/s
    "nvlink3": 300e9,   # A100: 12 links x 25 GB/s
    "nvlink4": 450e9,   # H100/H200: 18 links x 25 GB/s
    "pcie4": 32e9,      # PCIe 4.0 x16
    "pcie5": 64e9,      # PCIe 5.0 x16
    "nic400": 50e9,     # 400 Gb/s InfiniBand NDR / Ethernet
    "nic200": 25e9,     # 200 Gb/s HDR
}


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

    @property
    def ranks(self) -> int:
        return max(1, self.gpus * self.nodes)


V100 = "Tesla V100-SXM2-32GB"
A100 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"

PLATFORM_PRESETS: dict[str, Platform] = {p.name: p for p in [
    Platform("local-cpu", "cpu", 0, 1, None, None, 1, "this machine's CPU"),
    Platform("v100-1", V100, 1, 1, None, None, description="one V100 SXM2 32GB"),
    Platform("a100-1", A100, 1, 1, None, None, description="one A100 SXM4 40GB"),
    Platform("h100-1", H100, 1, 1, None, None, description="one H100 SXM5 80GB"),
    Platform("h200-1", H200, 1, 1, None, None, description="one H200 SXM 141GB"),
    Platform("dgx1-v100", V100, 8, 1, "nvlink2", None,
             description="DGX-1: 8 V100, hybrid cube-mesh NVLink"),
    Platform("dgx-a100", A100, 8, 1, "nvlink3", "nic200",
             description="DGX A100: 8 A100, NVSwitch"),
    Platform("dgx-h100", H100, 8, 1, "nvlink4", "nic400",
             description="DGX H100: 8 H100, NVSwitch"),
    Platform("dgx-h200", H200, 8, 1, "nvlink4", "nic400",
             description="DGX H200: 8 H200, NVSwitch"),
    Platform("pcie-4x-a100", A100, 4, 1, "pcie4", None,
             description="4 A100 on PCIe 4.0, no NVLink"),
    Platform("2node-8x-h100", H100, 8, 2, "nvlink4", "nic400",
             description="2 nodes of 8 H100, one 400G NIC per GPU"),
]}

# the short names a custom platform's GPU node may give as its ``model``
GPU_MODELS = {"v100": V100, "a100": A100, "h100": H100, "h200": H200}


def resolve_platform(platform: dict) -> Platform:
    """Turn a validated ``platform`` section into a :class:`Platform`.

    A preset may carry ``threads`` (local CPU).  A custom graph counts its ``gpu`` nodes and
    takes the model of the first one.
    """
    if "preset" in platform:
        preset = PLATFORM_PRESETS[platform["preset"]]
        threads = int(platform.get("threads", preset.threads))
        return Platform(preset.name, preset.device, preset.gpus, preset.nodes,
                        preset.intra_link, preset.inter_link, threads, preset.description)
    nodes = platform["nodes"]
    gpus = [n for n in nodes if n["kind"] == "gpu"]
    cpus = [n for n in nodes if n["kind"] == "cpu"]
    hosts = max(1, sum(1 for n in nodes if n["kind"] == "node"))
    if not gpus:
        threads = int(cpus[0].get("params", {}).get("threads", 1)) if cpus else 1
        return Platform("custom", "cpu", 0, 1, None, None, threads, "custom CPU platform")
    model = gpus[0].get("params", {}).get("model", "a100")
    if model in GPU_MODELS:  # a short name, or the name a GPU reports in any spelling
        device = GPU_MODELS[model]
    else:
        spec = find_gpu_spec(model)
        device = spec.name if spec is not None else model
    links = [e.get("kind") for e in platform.get("edges", [])]
    intra = next((k for k in links if k and k.startswith(("nvlink", "pcie"))), None)
    inter = next((k for k in links if k and k.startswith("nic")), None)
    per_node = max(1, len(gpus) // hosts)
    return Platform("custom", device, per_node, hosts, intra, inter,
                    description=f"custom: {len(gpus)} x {device}")
