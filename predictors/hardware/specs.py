"""Device specifications: datasheet figures for the devices that platform presets use.

Each figure cites its source.  These are peak (datasheet) numbers; measured peaks and
learned kernel models come from device profiles (``calibrate``) and override them.
"""
from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass, field

__all__ = ["DeviceSpec", "GPU_SPECS", "GPU_ALIASES", "local_cpu_spec", "device_spec", "cpu_model",
           "cpu_signature", "find_gpu_spec", "known_gpus", "unknown_gpu_message", "profile_slug"]


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
    # GPU: maximum board power in W, from the same datasheet (0: not known).  Boards of
    # 75 W and less hold their clock only under light load (costs/datasheet.py)
    board_watts: float = 0.0
    # CPU: ns per n·log2(n) of its n indices that an EmbeddingBag backward with a dense
    # gradient spends beyond the sparse one (0: not measured)
    sort_ns: float = 0.0
    # CPU: ns per 4-KiB page that a freshly mapped allocation's first write spends in
    # the page fault, and DRAM bytes/s beyond the caches (0: not measured;
    # costs/large_ops.py)
    page_fault_ns: float = 0.0
    stream_bytes_per_s: float = 0.0

    def flops(self, dtype: str) -> float:
        """Peak matrix FLOP/s for ``dtype``, falling back to float32."""
        return self.peak_flops.get(dtype, self.peak_flops["float32"])


_GB = 1e9
_T = 1e12

# NVIDIA and AMD datasheets.  float32 GEMMs use TF32 tensor cores only when allowed, which PyTorch
# does not by default for matmul, so float32 is the CUDA-core figure.
GPU_SPECS: dict[str, DeviceSpec] = {s.name: s for s in [
    # Tesla V100 SXM2 32GB: V100 datasheet (2020): 15.7 TFLOPS FP32, 125 TFLOPS tensor,
    # 900 GB/s HBM2; Volta whitepaper: 80 SMs x 64 FP32 lanes, 6 MB L2, 1530 MHz boost.
    DeviceSpec("Tesla V100-SXM2-32GB", "gpu",
               {"float32": 15.7 * _T, "float16": 125 * _T, "bfloat16": 15.7 * _T},
               vector_flops=15.7 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=32 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet; Volta architecture whitepaper",
               clock_mhz=1530, cores_per_sm=64, board_watts=300),
    DeviceSpec("Tesla V100-SXM2-16GB", "gpu",
               {"float32": 15.7 * _T, "float16": 125 * _T, "bfloat16": 15.7 * _T},
               vector_flops=15.7 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=16 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet; Volta architecture whitepaper",
               clock_mhz=1530, cores_per_sm=64, board_watts=300),
    # V100 DGXS 32GB (DGX Station): the SXM2 part's clocks and memory.
    DeviceSpec("Tesla V100-DGXS-32GB", "gpu",
               {"float32": 15.7 * _T, "float16": 125 * _T, "bfloat16": 15.7 * _T},
               vector_flops=15.7 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=32 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet (SXM2 figures); DGX Station datasheet",
               clock_mhz=1530, cores_per_sm=64, board_watts=300),
    # V100 PCIe: datasheet 14 TFLOPS FP32, 112 TFLOPS tensor, 900 GB/s; 1370 MHz boost.
    DeviceSpec("Tesla V100-PCIE-32GB", "gpu",
               {"float32": 14.0 * _T, "float16": 112 * _T, "bfloat16": 14.0 * _T},
               vector_flops=14.0 * _T, mem_bw=900 * _GB, l2_bytes=6e6, sms=80,
               memory_bytes=32 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA V100 datasheet; Volta architecture whitepaper",
               clock_mhz=1370, cores_per_sm=64, board_watts=250),
    # A100 SXM4 40GB: A100 datasheet: 19.5 TFLOPS FP32, 312 TFLOPS FP16/BF16 tensor,
    # 1,555 GB/s HBM2; Ampere whitepaper: 108 SMs x 64 FP32 lanes, 40 MB L2, 1410 MHz.
    DeviceSpec("NVIDIA A100-SXM4-40GB", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1555 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=40 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64, board_watts=400),
    # PG509-200: the board name some A100 40GB SXM4 modules report (HTA's A100 traces).
    DeviceSpec("NVIDIA A100-PG509-200", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1555 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=40 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet (SXM4 40GB); Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64, board_watts=400),
    # A100 SXM4 80GB: datasheet 2,039 GB/s HBM2e, compute as the 40 GB part.
    DeviceSpec("NVIDIA A100-SXM4-80GB", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=2039 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64, board_watts=400),
    # A100 PCIe 40GB: datasheet 1,555 GB/s; 80GB PCIe: 1,935 GB/s; compute as SXM4.
    DeviceSpec("NVIDIA A100-PCIE-40GB", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1555 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=40 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64, board_watts=250),
    DeviceSpec("NVIDIA A100 80GB PCIe", "gpu",
               {"float32": 19.5 * _T, "float16": 312 * _T, "bfloat16": 312 * _T},
               vector_flops=19.5 * _T, mem_bw=1935 * _GB, l2_bytes=40e6, sms=108,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA A100 datasheet; Ampere GA100 whitepaper",
               clock_mhz=1410, cores_per_sm=64, board_watts=300),
    # H100 SXM5 80GB: H100 datasheet: 67 TFLOPS FP32, 989 TFLOPS BF16 dense, 3.35 TB/s
    # HBM3; Hopper whitepaper: 132 SMs x 128 FP32 lanes, 50 MB L2, 1980 MHz boost.
    DeviceSpec("NVIDIA H100 80GB HBM3", "gpu",
               {"float32": 67 * _T, "float16": 989 * _T, "bfloat16": 989 * _T},
               vector_flops=67 * _T, mem_bw=3350 * _GB, l2_bytes=50e6, sms=132,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA H100 datasheet; Hopper architecture whitepaper",
               clock_mhz=1980, cores_per_sm=128, board_watts=700),
    # H100 PCIe 80GB: datasheet 51 TFLOPS FP32, 756 TFLOPS BF16 dense, 2 TB/s HBM2e;
    # Hopper whitepaper: 114 SMs, 50 MB L2; 1755 MHz boost.
    DeviceSpec("NVIDIA H100 PCIe", "gpu",
               {"float32": 51 * _T, "float16": 756 * _T, "bfloat16": 756 * _T},
               vector_flops=51 * _T, mem_bw=2000 * _GB, l2_bytes=50e6, sms=114,
               memory_bytes=80 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA H100 datasheet; Hopper architecture whitepaper",
               clock_mhz=1755, cores_per_sm=128, board_watts=350),
    # H200 SXM 141GB: H200 datasheet: compute as H100 SXM, 4.8 TB/s HBM3e, 141 GB.
    DeviceSpec("NVIDIA H200", "gpu",
               {"float32": 67 * _T, "float16": 989 * _T, "bfloat16": 989 * _T},
               vector_flops=67 * _T, mem_bw=4800 * _GB, l2_bytes=50e6, sms=132,
               memory_bytes=141 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA H200 datasheet (GH100 figures from the Hopper whitepaper)",
               clock_mhz=1980, cores_per_sm=128, board_watts=700),
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
               clock_mhz=1545, cores_per_sm=64, board_watts=250),
    DeviceSpec("Tesla T4", "gpu",
               {"float32": 8.141 * _T, "float16": 65 * _T, "bfloat16": 8.141 * _T},
               vector_flops=8.141 * _T, mem_bw=320 * _GB, l2_bytes=4e6, sms=40,
               memory_bytes=16 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA T4 datasheet; NeuSight device_configs",
               clock_mhz=1590, cores_per_sm=64, board_watts=70),
    DeviceSpec("Tesla P100-PCIE-16GB", "gpu",
               {"float32": 9.519 * _T, "float16": 19.0 * _T, "bfloat16": 9.519 * _T},
               vector_flops=9.519 * _T, mem_bw=732 * _GB, l2_bytes=4e6, sms=56,
               memory_bytes=16 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA P100 datasheet; NeuSight device_configs",
               clock_mhz=1380, cores_per_sm=64, board_watts=250),
    DeviceSpec("Tesla P4", "gpu",
               {"float32": 5.699 * _T, "float16": 5.699 * _T, "bfloat16": 5.699 * _T},
               vector_flops=5.699 * _T, mem_bw=192 * _GB, l2_bytes=2e6, sms=40,
               memory_bytes=8 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA P4 datasheet; NeuSight device_configs (40 SMs x 64 lanes)",
               clock_mhz=1113, cores_per_sm=64, board_watts=75),
    # Ada Lovelace inference GPUs (PCIe, no NVLink).  Tensor figures are dense (the
    # datasheets quote twice these with sparsity).
    # L4: NVIDIA L4 datasheet: 30.3 TFLOPS FP32, TF32 60 / FP16 121 / BF16 121 TFLOPS dense
    # tensor, 24 GB GDDR6 at 300 GB/s, PCIe 4.0 x16; 7,424 CUDA cores = 58 SMs x 128 lanes
    # at 2040 MHz boost (= the 30.3 TFLOPS); 48 MB L2 (NeuSight's device_configs, which
    # list 60 SMs and 31.3 TFLOPS: 58 SMs is what the datasheet FP32 figure implies).
    DeviceSpec("NVIDIA L4", "gpu",
               {"float32": 30.3 * _T, "float16": 121 * _T, "bfloat16": 121 * _T},
               vector_flops=30.3 * _T, mem_bw=300 * _GB, l2_bytes=48e6, sms=58,
               memory_bytes=24 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA L4 datasheet; NeuSight device_configs (L2)",
               clock_mhz=2040, cores_per_sm=128, board_watts=72),
    # L40S: NVIDIA L40S datasheet: 91.6 TFLOPS FP32, TF32 183 / FP16 362 / BF16 362 TFLOPS
    # dense tensor, 48 GB GDDR6 at 864 GB/s, 18,176 CUDA cores (142 SMs x 128), PCIe 4.0
    # x16; Ada architecture whitepaper (AD102): 96 MB L2; 2520 MHz boost
    # (142 x 128 x 2 x 2520 MHz = the 91.6 TFLOPS).
    DeviceSpec("NVIDIA L40S", "gpu",
               {"float32": 91.6 * _T, "float16": 362 * _T, "bfloat16": 362 * _T},
               vector_flops=91.6 * _T, mem_bw=864 * _GB, l2_bytes=96e6, sms=142,
               memory_bytes=48 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="NVIDIA L40S datasheet; Ada Lovelace architecture whitepaper (AD102)",
               clock_mhz=2520, cores_per_sm=128, board_watts=350),
    # B200 (HGX/DGX B200, SXM, 1000 W): NVIDIA HGX B200 and DGX B200 datasheets, per GPU
    # (the 8-GPU figures / 8): 75 TFLOPS FP32, TF32 1.1 / FP16 2.25 / BF16 2.25 PFLOPS dense
    # tensor, 180 GB HBM3e at 8 TB/s, NVLink 5 at 1.8 TB/s (900 GB/s each way).  The
    # datasheets give no SM count, clock or L2: 148 SMs and 126 MB L2 are what the CUDA
    # runtime reports for the part, and the clock is the one the FP32 figure implies
    # (75 TFLOPS / (148 x 128 x 2) = 1980 MHz).
    DeviceSpec("NVIDIA B200", "gpu",
               {"float32": 75 * _T, "float16": 2250 * _T, "bfloat16": 2250 * _T},
               vector_flops=75 * _T, mem_bw=8000 * _GB, l2_bytes=126e6, sms=148,
               memory_bytes=180 * _GB, launch_latency_s=4e-6, kernel_floor_s=2e-6,
               source="NVIDIA HGX B200 / DGX B200 datasheets (per GPU); SMs and L2 as the "
                      "CUDA runtime reports them",
               clock_mhz=1980, cores_per_sm=128, board_watts=1000),
    # MI300X (OAM): AMD Instinct MI300X datasheet: 304 CUs, 2100 MHz peak engine clock,
    # 163.4 TFLOPS FP32 vector and matrix, TF32 653.7 / FP16 1307.4 / BF16 1307.4 TFLOPS
    # dense matrix, 192 GB HBM3 at 5.3 TB/s, 256 MB AMD Infinity Cache (the memory-side
    # last-level cache, in the place of NVIDIA's L2), Infinity Fabric (xGMI) 7 links x
    # 128 GB/s to the other GPUs.  FP32 lanes per CU: 64 stream processors issuing two
    # FP32 operations per cycle, i.e. 128 (304 x 128 x 2 x 2100 MHz = 163.4 TFLOPS).
    DeviceSpec("AMD Instinct MI300X", "gpu",
               {"float32": 163.4 * _T, "float16": 1307.4 * _T, "bfloat16": 1307.4 * _T},
               vector_flops=163.4 * _T, mem_bw=5300 * _GB, l2_bytes=256e6, sms=304,
               memory_bytes=192 * _GB, launch_latency_s=4e-6, kernel_floor_s=2.5e-6,
               source="AMD Instinct MI300X datasheet",
               clock_mhz=2100, cores_per_sm=128, board_watts=750),
]}

# Short names a user may type for a GPU (``l4``, ``h100``): the part each stands for.
GPU_ALIASES: dict[str, str] = {
    "v100": "Tesla V100-SXM2-32GB",
    "a100": "NVIDIA A100-SXM4-40GB",
    "a100-80gb": "NVIDIA A100-SXM4-80GB",
    "h100": "NVIDIA H100 80GB HBM3",
    "h100-sxm": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200",
    "l4": "NVIDIA L4",
    "l40s": "NVIDIA L40S",
    "b200": "NVIDIA B200",
    "mi300x": "AMD Instinct MI300X",
    "p100": "Tesla P100-PCIE-16GB",
}
# vendor and product-line words a name may carry or leave out ("NVIDIA L4" = "L4")
_PREFIXES = ("nvidia-", "tesla-", "geforce-", "amd-", "instinct-")


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
    """The spec of a GPU by the name it reports (in any spelling :func:`find_gpu_spec`
    takes), or ``cpu`` for the local CPU."""
    if name == "cpu":
        return local_cpu_spec(threads)
    spec = find_gpu_spec(name)
    if spec is None:
        raise KeyError(unknown_gpu_message(name, devices=("cpu",)))
    return spec


def profile_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    return "-".join("".join(c if c.isalnum() else " " for c in name.lower()).split())


def _bare(slug: str) -> str:
    """A slug without its vendor and product-line words: ``nvidia-l4`` -> ``l4``."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in _PREFIXES:
            if slug.startswith(prefix) and len(slug) > len(prefix):
                slug, stripped = slug[len(prefix):], True
    return slug


def find_gpu_spec(name: str) -> DeviceSpec | None:
    """A datasheet spec by the name the GPU reports (case, spaces, dashes, underscores
    ignored), that name without its vendor words (``L4``, ``A100-SXM4-40GB``,
    ``MI300X``), or a short name of :data:`GPU_ALIASES` (``h100``); None if unknown."""
    if name in GPU_SPECS:
        return GPU_SPECS[name]
    key = profile_slug(name)
    for spec_name, spec in GPU_SPECS.items():
        if profile_slug(spec_name) == key:
            return spec
    bare = _bare(key)
    if bare in GPU_ALIASES:
        return GPU_SPECS[GPU_ALIASES[bare]]
    matches = [spec for spec_name, spec in GPU_SPECS.items()
               if _bare(profile_slug(spec_name)) == bare]
    return matches[0] if len(matches) == 1 else None


def known_gpus() -> list[str]:
    """The names of every GPU with a datasheet spec, as the GPUs report them."""
    return list(GPU_SPECS)


def unknown_gpu_message(name: str, devices: tuple[str, ...] = (), extra: str = "") -> str:
    """One line saying ``name`` is no known device and listing the known GPUs (``devices``
    first, e.g. ``cpu``; ``extra`` appended, e.g. bundled profile names)."""
    known = ", ".join([*devices, *known_gpus()])
    short = ", ".join(GPU_ALIASES)
    return f"unknown device {name!r}; known: {known} (or a short name: {short}){extra}"
