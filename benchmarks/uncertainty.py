"""Does the stated 80 % range of a prediction hold on measured steps it never saw?

The range of a GPU prediction comes from the errors of measured steps of the project's
H200 machine starts (``resources/measurements``), per verdict (host-, device-bound,
mixed), for two regimes: the H200 profile fitted on public data (an unseen GPU: every
start is out of its sample) and the H200's own measured profile (its overheads come from
the ``-rerun`` start, whose steps are therefore left out of its errors).  ``--fit``
predicts every start's steps and writes their errors, per start, to
``resources/uncertainty/gpu_public.json``; a prediction's range pools every start.

Without ``--fit`` the script checks the range on machine starts it never saw, one start
at a time: each start's steps are predicted and their range is taken from the errors of
the *other* starts only (leave one machine start out), and coverage is the share of
measured steps inside it; the target is at least 80 %, and the width (high / low - 1)
says what it costs.

    python benchmarks/uncertainty.py --fit
    python benchmarks/uncertainty.py
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.calibrate.cuda_profile import load_measurements  # noqa: E402
from predictors.calibrate.gpu_profiles import profile_for_device  # noqa: E402
from predictors.engine.predict import predict  # noqa: E402
from predictors.engine.uncertainty import PUBLIC_GPU_ERRORS, stated_range  # noqa: E402
from predictors.profiles import resolve_profile  # noqa: E402
from predictors.utils.fileio import atomic_write_bytes  # noqa: E402

MEASURED = ROOT / "resources" / "measurements"
STARTS = ("nvidia-h200-2026-11-29", "nvidia-h200-2026-11-29-rerun",
          "nvidia-h200-2026-11-29-seed7", "nvidia-h200-2026-11-29-seed11")
MEASURED_PROFILE = "nvidia-h200-measured"
# the measured profile's overheads come from the -rerun start's traced steps
# (resources/measurements/README.md): its errors come from the other starts (the first
# start's fp32 GEMMs and kernel sweep are in the profile too, so its device-bound steps
# are not wholly out of sample)
REGIME_STARTS = {"public": STARTS,
                 "calibrated": tuple(s for s in STARTS if not s.endswith("-rerun"))}


def _profiles() -> dict:
    device = load_measurements(MEASURED / STARTS[0])["device"]["name"]
    return {"public": profile_for_device(device),
            "calibrated": resolve_profile(MEASURED_PROFILE)}


def steps(folder: str, profile) -> list[dict]:
    """Each measured step of ``folder`` with its prediction by ``profile``."""
    doc = load_measurements(MEASURED / folder)
    out = []
    for row in doc.get("scenarios") or []:
        if not row.get("measure"):
            continue
        p = predict(row["doc"], profile=profile)
        out.append({"scenario": row["doc"]["name"], "predicted_ms": p.iteration_ms,
                    "measured_ms": row["measure"]["iteration_ms"],
                    "bound": p.verdict["bound"], "device": p.device})
    return out


def _by_bound(rows: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for s in rows:
        out.setdefault(s["bound"], []).append(round(s["predicted_ms"] / s["measured_ms"] - 1, 5))
    return {k: sorted(v) for k, v in sorted(out.items())}


def _table(device: str, per_start: dict, leave_out: str | None = None) -> dict:
    """The errors file: each regime's errors per machine start (but ``leave_out``)."""
    return {"device": device, "profiles": {"public": "fitted on public data",
                                           "calibrated": MEASURED_PROFILE},
            "command": "python benchmarks/uncertainty.py --fit",
            "errors_per_start": {r: {s: e for s, e in starts.items() if s != leave_out}
                                 for r, starts in per_start.items()}}


def fit() -> int:
    profiles = _profiles()
    device = load_measurements(MEASURED / STARTS[0])["device"]["name"]
    per_start = {regime: {s: _by_bound(steps(s, profiles[regime])) for s in starts}
                 for regime, starts in REGIME_STARTS.items()}
    doc = _table(device, per_start)
    PUBLIC_GPU_ERRORS.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(PUBLIC_GPU_ERRORS, (json.dumps(doc, indent=1) + "\n").encode())
    for regime, starts in per_start.items():
        counts: dict[str, int] = {}
        for by_bound in starts.values():
            for bound, errors in by_bound.items():
                counts[bound] = counts.get(bound, 0) + len(errors)
        print(f"{regime}: {sum(counts.values())} errors on {device} from {len(starts)} "
              "machine starts (" + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
              + ")")
    print(f"-> {PUBLIC_GPU_ERRORS.relative_to(ROOT)}")
    return 0


def report() -> int:
    try:
        known = json.loads(PUBLIC_GPU_ERRORS.read_text())
        per_start = known["errors_per_start"]
    except (OSError, ValueError, KeyError):
        print(f"{PUBLIC_GPU_ERRORS}: no errors per machine start; run --fit first",
              file=sys.stderr)
        return 1
    profiles = _profiles()
    labels = {"public": "profile fitted on public data (an unseen GPU)",
              "calibrated": "the GPU's own measured profile"}
    with tempfile.TemporaryDirectory() as tmp:
        for regime, starts in REGIME_STARTS.items():
            profile = profiles[regime]
            rows = []
            for start in starts:
                table = Path(tmp) / f"{regime}-{start}.json"
                table.write_text(json.dumps(_table(known["device"], per_start, start)))
                for s in steps(start, profile):
                    band = stated_range(s["predicted_ms"], profile, s["device"], s["bound"],
                                        table=table)
                    rows.append(dict(s, start=start,
                                     low=band and band["iteration_ms_low"],
                                     high=band and band["iteration_ms_high"]))
            ranged = [s for s in rows if s["low"] is not None]
            inside = [s for s in ranged if s["low"] <= s["measured_ms"] <= s["high"]]
            widths = sorted(s["high"] / s["low"] - 1.0 for s in ranged)
            print(f"{known['device']}, {labels[regime]}, each of {len(starts)} machine "
                  f"starts left out in turn: {len(inside)} of {len(ranged)} steps inside the "
                  f"80 % range ({100 * len(inside) / max(1, len(ranged)):.0f} %); width "
                  f"median {100 * widths[len(widths) // 2]:.0f} %, widest "
                  f"{100 * widths[-1]:.0f} %" if ranged else f"{labels[regime]}: no range")
            for start in starts:
                mine = [s for s in ranged if s["start"] == start]
                n_in = sum(s["low"] <= s["measured_ms"] <= s["high"] for s in mine)
                print(f"  {start}: {n_in} of {len(mine)} inside")
            for s in rows:
                mark = "" if s["low"] is None else (
                    "inside" if s["low"] <= s["measured_ms"] <= s["high"] else "OUTSIDE")
                rng = "" if s["low"] is None else f"[{s['low']:8.2f}, {s['high']:8.2f}]"
                print(f"    {s['start'][-6:]:>6} {s['scenario'][:44]:44s} {s['bound']:7s} "
                      f"predicted {s['predicted_ms']:8.2f} measured {s['measured_ms']:8.2f} "
                      f"{rng} {mark}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true",
                        help="predict every machine start's steps and write their errors")
    args = parser.parse_args(argv)
    return fit() if args.fit else report()


if __name__ == "__main__":
    sys.exit(main())
