"""``trace-summary`` and ``replay``: recorded traces on the command line (no Qt)."""
from __future__ import annotations

import json

from ..traces.kineto import TraceError
from ..traces.recording import load_recording
from ..traces.replay import replay
from ..traces.summary import summarize
from .args import examples, unwritable, usage_error

__all__ = ["register"]


def _load(files):
    return load_recording(files)


def _cmd_summary(args) -> int:

    try:
        result = summarize(_load(args.files))
    except TraceError as exc:
        return usage_error(str(exc))
    if args.json:
        print(json.dumps(result))
        return 0
    for r in result["per_rank"]:
        steps = ", ".join(f"{s['name']} {s['dur_ms']:.3f} ms" for s in r["steps"]) or "none"
        print(f"rank {r['rank']} ({r['device']}): {r['file']}")
        print(f"  steps            {steps}")
        print(f"  device active    {r['device_active_ms']:10.3f} ms of {r['window_ms']:.3f} ms "
              f"(idle {r['device_idle_ms']:.3f} ms)")
        print(f"  exposed comm     {r['exposed_comm_ms']:10.3f} ms")
        print(f"  kernels          {r['kernels']:10d} ({r['comm_kernels']} communication)")
        for cat, ms in sorted(r["kernel_ms_by_category"].items(), key=lambda kv: -kv[1]):
            print(f"    {cat:<14} {ms:10.3f} ms")
    return 0


def _cmd_replay(args) -> int:

    if args.chrome_trace:
        problem = unwritable(args.chrome_trace)
        if problem:  # say so now, not after the replay
            return usage_error(f"--chrome-trace {args.chrome_trace}: {problem}")
    try:
        result = replay(_load(args.files))
    except TraceError as exc:
        return usage_error(str(exc))
    if args.chrome_trace:
        result.timeline.save_chrome_trace(args.chrome_trace)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"replayed {result.iteration_ms:.3f} ms, recorded {result.recorded_ms:.3f} ms "
          f"({result.error_pct:+.2f}%)")
    for r in result.per_rank:
        print(f"  rank {r['rank']:<3} replayed {r['iteration_ms']:9.3f} ms  recorded "
              f"{r['recorded_ms']:9.3f} ms  ({r['error_pct']:+.2f}%)")
    for note in result.notes:
        print(f"  note: {note}")
    return 0


def register(sub) -> None:
    """Add ``trace-summary`` and ``replay`` to the ``python -m predictors`` parser."""
    p = sub.add_parser(
        "trace-summary", help="steps, device time and kernels of recorded Kineto traces "
                              "(several files: the ranks of one job)",
        **examples("%(prog)s sample_traces/small_dlrm_cpu1.pt.trace.json.gz",
                   "%(prog)s resources/measurements/nvidia-h200-2026-11-29/scenario00.json.gz "
                   "--json"))
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="Kineto traces, plain or gzipped JSON")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_summary)
    r = sub.add_parser(
        "replay", help="re-simulate recorded traces with their own kernel times and "
                       "overheads, beside the recorded step time",
        **examples("%(prog)s sample_traces/small_dlrm_cpu1.pt.trace.json.gz",
                   "%(prog)s resources/measurements/nvidia-h200-2026-11-29/scenario00.json.gz "
                   "--json --chrome-trace replayed.json"))
    r.add_argument("files", nargs="+", metavar="FILE",
                   help="Kineto traces, plain or gzipped JSON")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--chrome-trace", metavar="OUT.json",
                   help="also write the replayed timeline as a Chrome trace")
    r.set_defaults(func=_cmd_replay)
