"""Achievable peaks of GPUs for the roofline-style models: measured where public
measurements exist, otherwise derived from the datasheet and labelled as estimates."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .specs import DeviceSpec

__all__ = ["MeasuredPeaks", "measured_peaks", "MEASURED"]


@dataclass(frozen=True)
class MeasuredPeaks:
    """FLOP/s (FP32 CUDA cores), DRAM and L2 bytes/s that kernels reach, and where from."""

    fp32_flops: float
    dram_bw: float
    l2_bw: float
    l2_bytes: float
    sms: int
    source: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "MeasuredPeaks":
        return cls(float(d["fp32_flops"]), float(d["dram_bw"]), float(d["l2_bw"]),
                   float(d["l2_bytes"]), int(d["sms"]), str(d.get("source", "")))


_ML_PERF_MODEL = ("measured by the DLRM performance-model papers (owensgroup/ml_perf_model, "
                  "BSD-3), as listed in ../shared/data/README.md")

# Measured peaks: family -> (FP32 FLOP/s, DRAM B/s, L2 B/s, the datasheet FP32 and DRAM
# figures of the part they were measured on, whose ratios carry to sibling parts).
MEASURED = {
    "A100": (15027e9, 1391e9, 2271e9, 19.5e12, 1555e9),
    "V100": (15442e9, 817e9, 2848e9, 15.7e12, 900e9),
}
# Mean measured/datasheet ratios of the two, for GPUs without measurements.
_FLOPS_RATIO = (15027 / 19500 + 15442 / 15700) / 2
_DRAM_RATIO = (1391 / 1555 + 817 / 900) / 2


def _family(name: str) -> str | None:
    for fam in MEASURED:
        if fam in name:
            return fam
    return None


def measured_peaks(spec: DeviceSpec) -> MeasuredPeaks:
    """The best achievable peaks known for ``spec``.

    A100 and V100 parts take the measured figures, scaled by their datasheet ratio to the
    measured part (e.g. an 80 GB A100's faster HBM); other GPUs take the mean measured /
    datasheet ratio of those two, and an L2 bandwidth scaled from the A100's by SMs x clock.
    """
    fp32 = spec.flops("float32")
    fam = _family(spec.name)
    if fam is not None:
        flops, dram, l2, ds_flops, ds_dram = MEASURED[fam]
        return MeasuredPeaks(flops * fp32 / ds_flops, dram * spec.mem_bw / ds_dram,
                             l2 * fp32 / ds_flops, spec.l2_bytes, spec.sms,
                             f"{fam}: {_ML_PERF_MODEL}; scaled to {spec.name}'s datasheet")
    a100_rate = 108 * 1410.0
    rate = spec.sms * (spec.clock_mhz or 1410.0)
    return MeasuredPeaks(fp32 * _FLOPS_RATIO, spec.mem_bw * _DRAM_RATIO,
                         MEASURED["A100"][2] * rate / a100_rate, spec.l2_bytes, spec.sms,
                         "estimated: datasheet x the mean measured/datasheet ratio of A100 "
                         "and V100; L2 bandwidth = A100's measured x (SMs x clock) ratio")
