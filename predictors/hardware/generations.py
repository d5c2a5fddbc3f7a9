"""GPU generations from device names, as CUDA and the traces spell them."""
from __future__ import annotations

import re

__all__ = ["arch_of"]

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
