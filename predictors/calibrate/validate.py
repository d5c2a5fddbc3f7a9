"""``validate``: predict and measure random scenarios, and print the errors.

The scenarios come from a different seed than calibration used, so every shape is new
to the learned models.  Each scenario is measured once per round (two by default), the
rounds going through all scenarios in turn, so the run-to-run noise floor is printed
beside the prediction error, and the machine's drift against its calibration beside both.
"""
from __future__ import annotations

import datetime
import socket
from typing import Callable

from ..engine.predict import predict
from ..profiles import DeviceProfile
from ..utils.metrics import geomean_abs
from .hostload import OtherProcesses
from .measure import measure
from .samples import random_scenarios
from .speed import combine, probe, relative_speed

__all__ = ["validate_cpu", "format_report", "format_classes"]


def validate_cpu(profile: DeviceProfile, n: int = 10, seed: int = 1000, iters: int = 10,
                 kinds=("dlrm", "transformer"), rounds: int = 2,
                 progress: Callable[[float, str], None] | None = None,
                 ranges: str = "wide") -> dict:
    """Measure and predict ``n`` random scenarios per kind on the local CPU, drawn from
    ``ranges`` (``samples.RANGES``).

    Each scenario is measured once per round and the rounds go through all scenarios in
    turn, so that its measurements lie minutes apart: this VM's speed drifts by tens of
    percent over minutes, and back-to-back measurements would share one spell.  The
    fastest median is kept; ``noise`` is the spread between rounds (max / min - 1; None
    with one round)."""
    threads = int(profile.provenance.get("threads", profile.device.threads or 1))
    reference = profile.provenance.get("speed_reference")
    docs = [(kind, doc) for kind in kinds
            for doc in random_scenarios(n, seed, kinds=(kind,), threads=threads,
                                        ranges=ranges)]
    runs = [[] for _ in docs]
    speeds = [[] for _ in docs]
    load: list[list[float | None]] = [[] for _ in docs]
    rounds = max(1, int(rounds))
    for r in range(rounds):
        for i, (kind, doc) in enumerate(docs):
            if progress is not None:
                progress((r * len(docs) + i) / (rounds * len(docs)),
                         f"round {r + 1}/{rounds}: {doc['name']}")
            with OtherProcesses() as busy:
                speeds[i].append(probe(0.2, threads))
                runs[i].append(measure(doc, iters=iters, warmup=5, fast_init=True))
                speeds[i].append(probe(0.2, threads))
            load[i].append(busy.cpus)
    rows = []
    for i, (kind, doc) in enumerate(docs):
        times = [run["iteration_ms"] for run in runs[i]]
        measured = min(times)
        kept = times.index(measured)
        p = predict(doc, profile=profile)
        predicted = p.iteration_ms
        rows.append({"kind": kind, "scenario": doc["name"], "measured_ms": measured,
                     "predicted_ms": predicted, "error": predicted / measured - 1.0,
                     # the stated 80 % range, and whether the measured step is in it
                     "low_ms": p.iteration_ms_low, "high_ms": p.iteration_ms_high,
                     "inside": (None if p.iteration_ms_low is None else
                                p.iteration_ms_low <= measured <= p.iteration_ms_high),
                     # one round measures no run-to-run noise: None, not 0
                     "runs_ms": times,
                     "noise": max(times) / min(times) - 1 if len(times) > 1 else None,
                     "spread_pct": runs[i][kept]["spread_pct"], "other_cpus": load[i][kept],
                     # the probes just before and after the kept run
                     "speed": relative_speed(combine(speeds[i][2 * kept:2 * kept + 2]),
                                             reference)})
    summary = {}
    for kind in kinds:
        sel = [r for r in rows if r["kind"] == kind]
        errs = [abs(r["error"]) for r in sel]
        drifts = [abs(r["speed"]) for r in sel if r["speed"] is not None]
        noises = [r["noise"] for r in sel if r["noise"] is not None]
        summary[kind] = {"n": len(sel), "geomean_abs_error": geomean_abs(errs),
                         "abs_speed_geomean": (geomean_abs(drifts) if len(drifts) == len(sel)
                                               else None),
                         "mean_abs_error": sum(errs) / len(errs),
                         "worst_abs_error": max(errs),
                         "noise_geomean": geomean_abs(noises) if noises else None,
                         "noise_worst": max(noises) if noises else None,
                         "range_coverage": _coverage(sel)}
    return {"rows": rows, "summary": summary,
            "kernel_classes": profile.validation.get("classes", {}),
            "profile": profile.name, "threads": threads, "ranges": ranges}


def _coverage(rows: list[dict]) -> float | None:
    """The share of measured steps inside their stated range (None: no range)."""
    ranged = [r["inside"] for r in rows if r.get("inside") is not None]
    return sum(ranged) / len(ranged) if ranged else None


def end_to_end_record(result: dict, command: str) -> dict:
    """What a profile keeps of a validation: when, how, the summary and every scenario."""
    keep = ("scenario", "measured_ms", "predicted_ms", "error", "noise", "speed",
            "other_cpus")
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "command": command,
            "summary": result["summary"],
            "rows": [{k: r.get(k) for k in keep} for r in result["rows"]]}


def _cpus(x) -> str:
    return f"{x:>5.2f}" if isinstance(x, (int, float)) else f"{'?':>5}"


def _pct(x) -> str:
    return f"{100 * x:>6.1f}%" if isinstance(x, (int, float)) and x == x else f"{'-':>7}"


def format_classes(classes: dict) -> list[str]:
    """Per kernel class: held-out GMAE (all, microbenchmarks, in context) beside the
    measurement noise floor in the same metric.  Profiles calibrated before the floor
    was measured show dashes."""
    lines = [f"  {'class':<15} {'samples':>7} {'chosen':>6} {'GMAE':>7} {'isol.':>7} "
             f"{'in ctx':>7} {'MAPE':>7} | {'noise':>7} {'isol.':>7} {'in ctx':>7}"]
    for cls, m in classes.items():
        chosen = m.get("chosen", "")
        fig = m.get(chosen, {})
        floor = m.get("noise_floor") or {}
        lines.append(f"  {cls:<15} {m.get('samples', 0):>7} {chosen:>6} "
                     f"{_pct(fig.get('gmae'))} {_pct(fig.get('gmae_isolated'))} "
                     f"{_pct(fig.get('gmae_in_context'))} {_pct(fig.get('mape'))} | "
                     f"{_pct(floor.get('gmae'))} {_pct(floor.get('gmae_isolated'))} "
                     f"{_pct(floor.get('gmae_in_context'))}")
    lines.append("  (noise: the GMAE a perfect model would have against these measurements, "
                 "from repeated ones)")
    return lines


def format_report(result: dict) -> str:
    lines = [f"Validation of profile {result['profile']!r} ({result['threads']} thread(s))",
             "", "Kernel classes (held-out shapes from calibration):"]
    lines += format_classes(result["kernel_classes"])
    lines += ["", "End to end (one training iteration):",
              f"  {'scenario':<46} {'measured':>9} {'predicted':>9} {'error':>7} "
              f"{'noise':>6} {'busy':>5} {'speed':>7}"]
    for r in result["rows"]:
        speed = r.get("speed")
        lines.append(f"  {r['scenario']:<46} {r['measured_ms']:>7.2f}ms "
                     f"{r['predicted_ms']:>7.2f}ms {100 * r['error']:>+6.1f}% "
                     f"{_pct(r['noise'])[1:]} {_cpus(r.get('other_cpus'))} "
                     + (f"{100 * speed:>+6.1f}%" if speed is not None else f"{'-':>7}"))
    lines += ["  (busy: CPUs that other processes kept busy while the scenario was measured;",
              "   above ~0.3 on a small VM the measurement is slowed by them.",
              "   speed: how much faster a fixed GEMM and streaming add ran than while the",
              "   profile was calibrated; a shared VM drifts by tens of percent)", ""]
    for kind, s in result["summary"].items():
        lines.append(f"  {kind:<12} n={s['n']:<3} geomean |error| "
                     f"{100 * s['geomean_abs_error']:.1f}%  mean {100 * s['mean_abs_error']:.1f}%"
                     f"  worst {100 * s['worst_abs_error']:.1f}%   noise floor: " +
                     (f"geomean {100 * s['noise_geomean']:.1f}%, worst "
                      f"{100 * s['noise_worst']:.1f}%" if s.get("noise_geomean") is not None
                      else "not measured (one round)"))
        if s.get("range_coverage") is not None:
            lines.append(f"  {'':<12} inside the stated 80 % range: "
                         f"{100 * s['range_coverage']:.0f}% of the measured steps")
        if s.get("abs_speed_geomean") is not None:
            lines.append(f"  {'':<12} machine drift against the calibration: |speed| "
                         f"geomean {100 * s['abs_speed_geomean']:.1f}%")
    return "\n".join(lines)
