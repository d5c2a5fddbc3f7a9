"""Device specifications: datasheet figures for the devices that platform presets use.

Each figure cites its source.  These are peak (datasheet) numbers; measured peaks and
learned kernel models come from device profiles (``calibrate``) and override them.
"""
from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass, field

__all__ = ["DeviceSpec", "GPU_SPECS", "local_cpu_spec", "device_spec", "cpu_model", "cpu_signature", "find_gpu_spec",
           "profile_slug"]


@dataclass(frozen=True)
class DeviceSpec:
    """Figures the roofline needs.  FLOP/s per dtype, bytes/s, seconds."""

    name: str
    kind: str  # "cpu" or "gpu"
    peak_flops: dict = field(default_factory=dict)  # dtype -> FLOP/s for GEMM-like work
    vector_flops: float = 0.0  # FLOP/s for elementwise work (no tensor cores)
    mem_bw: float = 0.0  # DRAM bytes/s
    l2_bytes: float = 0.0
    sms: int = 0
    memory_bytes: float = 0.0
    launch_latency_s: float = 0.0  # CPU launch call -> kernel may start
    kernel_floor_s: float = 0.0  # shortest kernel the device runs
    threads: int = 1
    source: str = ""
    clock_mhz: float = 0.0  # boost clock the FP32 peak assumes (GPU)
    cores_per_sm: int = 0  # FP32 lanes per SM (GPU)

    def flops(self, dtype: str) -> float:
        """Peak matrix FLOP/s for ``dtype``, falling back to float32."""
        return self.peak_flops.get(dtype, self.peak_flops["float32"])


_GB = 1e9
_T = 1e12

# NVIDIA datasheets.  float32 GEMMs use TF32 tensor cores only when allowed, which PyTorch
# does not by default for matmul, so float32 is the CUDA-core figure.
GPU_SPECS: dict[str, DeviceSpec] = {s.name: s for s in [
    # Tesla V100 SXM2 32GB: V100 datasheet (2020): 15.7 TFLOPS FP32, 125 TFLOPS tensor,
    # 900 GB/s HBM2; Volta whitepaper: 80 SMs x 64 FP32 lanes, 6 MB L2, 1530 MHz boost.
    DeviceSpec("Tesla V100-SXM2-32GB", "gpu",
               {"float32": 15.7 * _T, "float16": 125 * _T, "bfloat16": 15.7 * _T},
               vector_flops=15.7 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=32 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet; Volta architecture whitepaper",
               clock_mhz=1530, cores_per_sm=64),
    DeviceSpec("Tesla V100-SXM2-16GB", "gpu",
               {"float32": 15.7 * _T, "float16": 125 * _T, "bfloat16": 15.7 * _T},
               vector_flops=15.7 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=16 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet; Volta architecture whitepaper",
               clock_mhz=1530, cores_per_sm=64),
    # V100 DGXS 32GB (DGX Station): the SXM2 part's clocks and memory.
    DeviceSpec("Tesla V100-DGXS-32GB", "gpu",
               {"float32": 15.7 * _T, "float16": 125 * _T, "bfloat16": 15.7 * _T},
               vector_flops=15.7 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=32 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet (SXM2 figures); DGX Station datasheet",
               clock_mhz=1530, cores_per_sm=64),
    # V100 PCIe: datasheet 14 TFLOPS FP32, 112 TFLOPS tensor, 900 GB/s; 1370 MHz boost.
    DeviceSpec("Tesla V100-PCIE-32GB", "gpu",
               {"float32": 14.0 * _T, "float16": 112 * _T, "bfloat16": 14.0 * _T},
               vector_flops=14.0 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=32 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet; Volta architecture whitepaper",
               clock_mhz=1370, cores_per_sm=64),
    # A100 SXM4 40GB: A100 datasheet: 19.5 TFLOPS FP32, 312 TFLOPS FP16/BF16 tensor,
    # 1,555 GB/s HBM2; Ampere whitepaper: 108 SMs x 64 FP32 lanes, 40 MB L2, 1410 MHz.
    DeviceSpec("NVIDIA A100-SXM4-40GB", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1555 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=40 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64),
    # PG509-200: the board name some A100 40GB SXM4 modules report (HTA's A100 traces).
    DeviceSpec("NVIDIA A100-PG509-200", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1555 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=40 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet (SXM4 40GB); Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64),
    # A100 SXM4 80GB: datasheet 2,039 GB/s HBM2e, compute as the 40 GB part.
    DeviceSpec("NVIDIA A100-SXM4-80GB", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=2039 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64),
    # A100 PCIe 40GB: datasheet 1,555 GB/s; 80GB PCIe: 1,935 GB/s; compute as SXM4.
    DeviceSpec("NVIDIA A100-PCIE-40GB", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1555 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=40 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64),
    DeviceSpec("NVIDIA A100 80GB PCIe", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1935 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64),
    # H100 SXM5 80GB: H100 datasheet: 67 TFLOPS FP32, 989 TFLOPS BF16 dense, 3.35 TB/s
    # HBM3; Hopper whitepaper: 132 SMs x 128 FP32 lanes, 50 MB L2, 1980 MHz boost.
    DeviceSpec("NVIDIA H100 80GB HBM3", "gpu",
               {"float32": 67 * _T, "float16": 989 * _T, "bfloat16": 989 * _T},
               vector_flops=67 * _T, mem_bw=3350 * _GB, l2_bytes=50e6, sms=132,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA H100 datasheet; Hopper architecture whitepaper",
               clock_mhz=1980, cores_per_sm=128),
    # H100 PCIe 80GB: datasheet 51 TFLOPS FP32, 756 TFLOPS BF16 dense, 2 TB/s HBM2e;
    # Hopper whitepaper: 114 SMs, 50 MB L2; 1755 MHz boost.
    DeviceSpec("NVIDIA H100 PCIe", "gpu",
               {"float32": 51 * _T, "float16": 756 * _T, "bfloat16": 756 * _T},
               vector_flops=51 * _T, mem_bw=2000 * _GB, l2_bytes=50e6, sms=114,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA H100 datasheet; Hopper architecture whitepaper",
               clock_mhz=1755, cores_per_sm=128),
    # H200 SXM 141GB: H200 datasheet: compute as H100 SXM, 4.8 TB/s HBM3e, 141 GB.
    DeviceSpec("NVIDIA H200", "gpu",
               {"float32": 67 * _T, "float16": 989 * _T, "bfloat16": 989 * _T},
               vector_flops=67 * _T, mem_bw=4800 * _GB, l2_bytes=50e6, sms=132,
               memory_bytes=141 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA H200 datasheet (GH100 figures from the Hopper whitepaper)",
               clock_mhz=1980, cores_per_sm=128),
    # Older and inference GPUs that the public GEMM measurements cover (NeuSight's
    # device_configs: datasheet bandwidth and L2, FP32 peak = SMs x lanes x 2 x boost).
    # GeForce RTX 2080 Ti: Turing whitepaper: 68 SMs x 64 FP32 lanes, 1545 MHz boost
    # (13.4 TFLOPS), 616 GB/s GDDR6, 5.5 MB L2, 11 GB; FP16 tensor with FP32 accumulate
    # runs at half the FP16-accumulate 107.6 TFLOPS on GeForce parts.
    DeviceSpec("NVIDIA GeForce RTX 2080 Ti", "gpu",
               {"float32": 13.45 * _T, "float16": 53.8 * _T, "bfloat16": 13.45 * _T},
               vector_flops=13.45 * _T, mem_bw=616 * _GB, l2_bytes=5.5e6, sms=68,
               memory_bytes=11 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA Turing architecture whitepaper (TU102, RTX 2080 Ti)",
               clock_mhz=1545, cores_per_sm=64),
    DeviceSpec("Tesla T4", "gpu",
               {"float32": 8.141 * _T, "float16": 65 * _T, "bfloat16": 8.141 * _T},
               vector_flops=8.141 * _T, mem_bw=320 * _GB, l2_bytes=4e6, sms=40,
               memory_bytes=16 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA T4 datasheet; NeuSight device_configs",
               clock_mhz=1590, cores_per_sm=64),
    DeviceSpec("Tesla P100-PCIE-16GB", "gpu",
               {"float32": 9.519 * _T, "float16": 19.0 * _T, "bfloat16": 9.519 * _T},
               vector_flops=9.519 * _T, mem_bw=732 * _GB, l2_bytes=4e6, sms=56,
               memory_bytes=16 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA P100 datasheet; NeuSight device_configs",
               clock_mhz=1380, cores_per_sm=64),
    DeviceSpec("Tesla P4", "gpu",
               {"float32": 5.699 * _T, "float16": 5.699 * _T, "bfloat16": 5.699 * _T},
               vector_flops=5.699 * _T, mem_bw=192 * _GB, l2_bytes=2e6, sms=40,
               memory_bytes=8 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA P4 datasheet; NeuSight device_configs (40 SMs x 64 lanes)",
               clock_mhz=1113, cores_per_sm=64),
]}


def cpu_model() -> str:
    """This machine's CPU model name (``/proc/cpuinfo``)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


@functools.lru_cache(maxsize=1)
def cpu_signature() -> str:
    """What sets this CPU's speed beyond its marketing name (a VM may only say "AMD
    EPYC"): vendor, family and model from ``/proc/cpuinfo``, and its widest vector ISA,
    e.g. ``AuthenticAMD family 25 model 17, avx512``.  Profiles record it, and the local
    CPU's default profile is the one calibrated on the same signature."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("vendor_id", "cpu family", "model") and key not in fields:
                    fields[key] = value.strip()
                if not line.strip() and fields:
                    break
    except OSError:
        pass
    flags = _cpu_flags()
    isa = ("avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
           if platform.machine() in ("x86_64", "AMD64", "i686") else platform.machine())
    if not fields:
        return f"{platform.machine() or 'cpu'}, {isa}"
    return (f"{fields.get('vendor_id', '?')} family {fields.get('cpu family', '?')} "
            f"model {fields.get('model', '?')}, {isa}")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def local_cpu_spec(threads: int | None = None) -> DeviceSpec:
    """A roofline spec of this machine's CPU, before calibration.

    FLOP/s per core = SIMD width x 2 (FMA) x 2 FMA ports x an assumed 2.5 GHz; DRAM
    bandwidth is assumed at 10 GB/s per thread, capped at 80 GB/s.  ``calibrate`` replaces
    both with measured figures.
    """
    threads = threads or 1
    flags = _cpu_flags()
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    per_core = lanes * 2 * 2 * 2.5e9
    return DeviceSpec(
        f"{cpu_model()} ({threads} thread{'s' if threads != 1 else ''})", "cpu",
        {"float32": per_core * threads, "bfloat16": per_core * threads,
         "float16": per_core * threads / 4},
        vector_flops=per_core * threads / 4, mem_bw=min(80e9, 10e9 * threads),
        l2_bytes=1e6 * threads, sms=0, memory_bytes=float(os.sysconf("SC_PAGE_SIZE")
                                                          * os.sysconf("SC_PHYS_PAGES")),
        launch_latency_s=0.0, kernel_floor_s=1e-6, threads=threads,
        source="uncalibrated: SIMD width from /proc/cpuinfo flags, assumed clock and bandwidth")


def device_spec(name: str, threads: int | None = None) -> DeviceSpec:
    """The spec of a GPU by the name it reports, or ``cpu`` for the local CPU."""
    if name == "cpu":
        return local_cpu_spec(threads)
    try:
        return GPU_SPECS[name]
    except KeyError:
        raise KeyError(f"unknown device {name!r} (known: cpu, {', '.join(GPU_SPECS)})") from None


def profile_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    return "-".join("".join(c if c.isalnum() else " " for c in name.lower()).split())


def find_gpu_spec(name: str) -> DeviceSpec | None:
    """A datasheet spec by the name the GPU reports (case, spaces, dashes, underscores
    ignored), or None."""
    if name in GPU_SPECS:
        return GPU_SPECS[name]
    key = profile_slug(name)
    for spec_name, spec in GPU_SPECS.items():
        if profile_slug(spec_name) == key:
            return spec
    return None
