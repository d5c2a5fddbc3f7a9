"""``python -m predictors collective``: one collective's predicted time on a platform."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..costs.collectives import CANONICAL, bus_factor, platform_collective
from ..hardware.platforms import PLATFORM_PRESETS, resolve_platform

__all__ = ["register", "load_platform"]


def load_platform(arg: str):
    """A preset name, a scenario file (its platform) or a JSON file holding a platform
    section (``{"preset": ...}`` or ``{"nodes": [...], "edges": [...]}``)."""
    from ..scenario.format import (
        FORMAT,
        Issue,
        ScenarioError,
        load_scenario,
        validate_platform,
    )

    if arg in PLATFORM_PRESETS:
        return resolve_platform({"preset": arg})
    path = Path(arg)
    if not path.exists():
        raise ScenarioError([Issue("(platform)", f"no preset and no file named {arg!r} "
                                                 f"(presets: {', '.join(PLATFORM_PRESETS)})")])
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError([Issue("(file)", f"not a readable JSON file ({exc})")],
                            str(path)) from None
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        return resolve_platform(load_scenario(path)["platform"])
    if isinstance(doc, dict) and "platform" in doc and "nodes" not in doc:
        doc = doc["platform"]
    return resolve_platform(validate_platform(doc, str(path)))


def _cmd_collective(args) -> int:
    platform = load_platform(args.platform)
    try:
        est, ranks, nodes, notes = platform_collective(args.op, args.bytes, platform,
                                                       args.ranks)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
    if not value >= 0:
        raise ValueError(text)
    return value * scale


def register(subparsers) -> None:
    c = subparsers.add_parser("collective", help="predicted time of one collective on a "
                                                 "platform (NCCL-style model)")
    c.add_argument("--platform", required=True, metavar="PRESET_OR_FILE",
                   help=f"a preset ({', '.join(p for p in PLATFORM_PRESETS if p != 'local-cpu')}"
                        "), a scenario file or a platform JSON file")
    c.add_argument("--op", required=True, choices=list(CANONICAL))
    c.add_argument("--bytes", required=True, type=_size,
                   help="message size as NCCL counts it (all-gather: the output buffer); "
                        "suffixes K, M, G allowed")
    c.add_argument("--ranks", type=int, help="ranks taking part (default: every GPU)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=_cmd_collective)
