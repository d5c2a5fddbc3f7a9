"""``python -m predictors collective``: one collective's predicted time on a platform."""
from __future__ import annotations

import json

from ..costs.collectives import CANONICAL, bus_factor, platform_collective
from ..hardware.platforms import resolve_platform
from .args import PLATFORM_HELP, examples, platform_section, positive_int, usage_error

__all__ = ["load_platform", "register"]


def load_platform(arg: str):
    """The :class:`~predictors.hardware.platforms.Platform` that ``--platform ARG`` names
    (:func:`.args.platform_section`)."""
    return resolve_platform(platform_section(arg))


def _cmd_collective(args) -> int:
    platform = load_platform(args.platform)
    try:
        est, ranks, nodes, notes = platform_collective(args.op, args.bytes, platform,
                                                       args.ranks)
    except ValueError as exc:
        return usage_error(str(exc))
    seconds = est.us * 1e-6
    algbw = args.bytes / seconds / 1e9 if seconds > 0 else 0.0
    out = {"op": args.op, "bytes": args.bytes, "platform": platform.name,
           "device": platform.device, "ranks": ranks, "nodes": nodes,
           "time_ms": est.us / 1e3, "algbw_GBps": algbw,
           "busbw_GBps": algbw * bus_factor(args.op, ranks),
           "algorithm": est.algorithm, "protocol": est.protocol, "detail": est.detail,
           "notes": notes}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{args.op} of {args.bytes:.0f} bytes on {ranks} rank(s) of {platform.name} "
          f"({nodes} node(s))")
    how = "/".join(x for x in (est.algorithm, est.protocol) if x)
    print(f"  time     {out['time_ms'] * 1e3:10.1f} us   ({how})")
    print(f"  algbw    {algbw:10.1f} GB/s")
    print(f"  busbw    {out['busbw_GBps']:10.1f} GB/s")
    print(f"  {est.detail}")
    for note in notes:
        print(f"  note: {note}")
    return 0


def _size(text: str) -> float:
    """Bytes, with an optional K/M/G suffix (powers of 1024), as nccl-tests takes them."""
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    t = text.strip().lower().rstrip("b")
    scale = units.get(t[-1:], 1)
    value = float(t[:-1] if scale > 1 else t)
    if not 0 <= value < float("inf"):  # NaN fails too
        raise ValueError(text)
    return value * scale


def register(subparsers) -> None:
    c = subparsers.add_parser(
        "collective", help="predicted time of one collective on a platform (NCCL-style model)",
        **examples("%(prog)s --platform dgx-a100 --op all_reduce --bytes 64M",
                   "%(prog)s --platform 2node-8x-h100 --op all_gather --bytes 1G --ranks 16 "
                   "--json",
                   "%(prog)s --platform resources/scenarios/mlperf_dlrm_dcnv2.json "
                   "--op all_to_all --bytes 16M"))
    c.add_argument("--platform", required=True, metavar="PRESET_OR_FILE", help=PLATFORM_HELP)
    c.add_argument("--op", required=True, choices=list(CANONICAL))
    c.add_argument("--bytes", required=True, type=_size, metavar="SIZE",
                   help="message size as NCCL counts it (all-gather: the output buffer); "
                        "suffixes K, M, G (powers of 1024) allowed")
    c.add_argument("--ranks", type=positive_int, metavar="N",
                   help="ranks taking part (default: every GPU)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=_cmd_collective)
