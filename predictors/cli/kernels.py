"""``python -m predictors kernels predict | build-profiles | validate-traces``: GPU kernel
models on CSVs, rebuilt from public data, and checked against real recorded traces."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import numpy as np

from ..calibrate.gpu_profiles import (
    PROFILE_DIR,
    attach_trace_overheads,
    build_profiles,
    profile_for_device,
)
from ..calibrate.public_data import neusight_dir
from ..costs.datasheet import with_measured_sibling
from ..costs.gpu_embedding import embedding_bag_ms
from ..profiles import ProfileError
from ..traces.kineto import TraceError
from ..traces.recording import load_recording
from ..utils.fileio import atomic_write_bytes
from .args import examples

__all__ = ["predict_rows", "register"]

GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")
CONV_OPS = ("conv",)
EMBEDDING_OPS = ("embedding_bag",)
CONV_COLUMNS = "B,Cin,Cout,H[,W,kernel,stride,padding]"


class _UsageError(Exception):
    pass


def _fail(message: str) -> int:
    """One ``error:`` line on stderr; exit status 2 (a user error)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def _column(rows: list[dict], name: str, default=None, *, kind=float,
            whole: bool = True) -> np.ndarray:
    """A numeric column: sizes (``whole``) from 1 to 2^40, else positive finite numbers
    (a mean pooling factor may be fractional)."""
    out = []
    for i, row in enumerate(rows, start=2):  # line 1 is the header
        raw = row.get(name)
        if raw is None or raw == "":
            if default is None:
                raise _UsageError(f"line {i}: column {name!r} is empty")
            raw = default
        try:
            value = kind(raw)
        except ValueError:
            raise _UsageError(f"line {i}: column {name!r}: {raw!r} is not a number") from None
        if whole and not (1 <= value <= 2.0 ** 40 and float(value).is_integer()):
            raise _UsageError(f"line {i}: column {name!r}: {raw!r} must be a whole number "
                              "from 1 to 2^40")
        if not whole and not 0 < value <= 2.0 ** 40:  # NaN fails too
            raise _UsageError(f"line {i}: column {name!r}: {raw!r} must be a positive number")
        out.append(value)
    return np.array(out, dtype=np.float64)


_DTYPES = {"float32": "float32", "fp32": "float32", "float": "float32",
           "float16": "float16", "fp16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "bf16": "bfloat16"}


def _dtypes(rows: list[dict]) -> np.ndarray:
    """The optional ``dtype`` column (float32 where absent or empty)."""
    out = []
    for i, row in enumerate(rows, start=2):
        raw = (row.get("dtype") or "float32").strip().lower()
        if raw not in _DTYPES:
            raise _UsageError(f"line {i}: column 'dtype': {raw!r} is not one of "
                              "float32, float16, bfloat16")
        out.append(_DTYPES[raw])
    return np.array(out, dtype=object)


def _gemm_node(op: str, b, m, n, k, dtype: str) -> dict:
    """A captured-op node of one CSV GEMM row (``mm``/``addmm`` rows fold B into M)."""
    b, m, n, k = int(b), int(m), int(n), int(k)
    if op in ("mm", "addmm"):
        ins = [(m * b, k), (k, n)] if op == "mm" else [(n,), (m * b, k), (k, n)]
        outs = [(m * b, n)]
    else:
        ins = [(b, m, k), (b, k, n)] if op == "bmm" else [(b, m, n), (b, m, k), (b, k, n)]
        outs = [(b, m, n)]
    return {"name": f"aten::{op}", "input_shapes": ins, "input_dtypes": [dtype] * len(ins),
            "input_nnz": [None] * len(ins), "output_shapes": outs,
            "output_dtypes": [dtype], "output_nnz": [None], "phase": "forward",
            "thread": "main", "lookup": None}


def _conv_node(n, cin, cout, h, w, k, stride, pad, dtype: str) -> dict:
    """A captured forward-convolution node of one CSV row (NCHW, square kernel)."""
    ho, wo = (int((x + 2 * pad - k) // stride + 1) for x in (h, w))
    if min(ho, wo) < 1:
        raise _UsageError(f"a {int(k)}x{int(k)} kernel with padding {int(pad)} does not fit "
                          f"a {int(h)}x{int(w)} image")
    ins = [(int(n), int(cin), int(h), int(w)), (int(cout), int(cin), int(k), int(k))]
    return {"name": "aten::convolution", "input_shapes": ins, "input_dtypes": [dtype] * 2,
            "input_nnz": [None] * 2, "output_shapes": [(int(n), int(cout), ho, wo)],
            "output_dtypes": [dtype], "output_nnz": [None], "phase": "forward",
            "thread": "main", "lookup": None}


def _predict_conv(profile, rows: list[dict], fields: list[str]) -> np.ndarray:
    missing = [c for c in ("B", "Cin", "Cout", "H") if c not in fields]
    if missing:
        raise _UsageError(f"--in: missing column(s) {', '.join(missing)} (conv columns: "
                          f"{CONV_COLUMNS})")
    n, cin, cout, h = (_column(rows, c) for c in ("B", "Cin", "Cout", "H"))
    w = np.array([float(r.get("W") or r["H"]) for r in rows]) if "W" in fields else h
    k, stride = (_column(rows, c, default=d) for c, d in (("kernel", "3"), ("stride", "1")))
    pad = np.array([float(r.get("padding") or "1") for r in rows])
    if ((pad < 0) | (pad != np.floor(pad))).any():
        raise _UsageError("column 'padding' must be a whole number from 0")
    dtypes = _dtypes(rows)
    nodes = [_conv_node(*v, dtypes[i]) for i, v in enumerate(zip(n, cin, cout, h, w, k,
                                                                  stride, pad))]
    from ..costs.op_costs import kernel_seconds  # deferred: imports torch

    return np.array(kernel_seconds(nodes, profile.device, profile)[1]) * 1e3


def predict_rows(profile, op: str, rows: list[dict], fields: list[str]) -> np.ndarray:
    """Predicted kernel ms for CSV rows of ``op`` on ``profile``'s GPU."""
    if op in CONV_OPS:
        return _predict_conv(profile, rows, fields)
    if op in GEMM_OPS:
        missing = [c for c in "MNK" if c not in fields] + (
            ["B"] if op in ("bmm", "baddbmm") and "B" not in fields else [])
        if missing:
            raise _UsageError(f"--in: missing column(s) {', '.join(missing)} "
                              "(GEMM columns: B,M,N,K)")
        model = profile.kernel_models.get("gemm")
        if model is None:
            raise _UsageError(f"profile {profile.name!r} has no GEMM model")
        B, M, N, K = (_column(rows, c, default="1" if c == "B" else None) for c in "BMNK")
        dtypes = _dtypes(rows)
        # mm/addmm with B > 1: B row blocks sharing the (K, N) operand, as a linear layer
        out = model.predict_shapes(B, M, N, K, shared_weight=op in ("mm", "addmm"))
        half = np.flatnonzero(dtypes != "float32")
        if len(half):  # tensor-core GEMMs: the profile's model for them (measured roofline)
            from ..costs.op_costs import kernel_seconds  # deferred: imports torch
            nodes = [_gemm_node(op, B[i], M[i], N[i], K[i], dtypes[i]) for i in half]
            out[half] = np.array(kernel_seconds(nodes, profile.device, profile)[1]) * 1e3
        return out

    missing = [c for c in ("rows", "dim", "batch", "pooling") if c not in fields]
    if missing:
        raise _UsageError(f"--in: missing column(s) {', '.join(missing)} (embedding_bag "
                          "columns: rows,dim,batch,pooling[,distribution,alpha,backward])")
    model = profile.kernel_models.get("embedding")
    if model is None:
        raise _UsageError(f"profile {profile.name!r} has no embedding model")
    E, D, Bt = (_column(rows, c) for c in ("rows", "dim", "batch"))
    L = _column(rows, "pooling", whole=False)
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        kind = (row.get("distribution") or "uniform").strip().lower()
        if kind not in ("uniform", "zipf"):
            raise _UsageError(f"line {i + 2}: column 'distribution': expected uniform or "
                              f"zipf, got {kind!r}")
        dist = {"kind": kind}
        if kind == "zipf":
            try:
                dist["alpha"] = float(row.get("alpha") or 1.0)
            except ValueError:
                raise _UsageError(f"line {i + 2}: column 'alpha' is not a number") from None
            if not 0 < dist["alpha"] < float("inf"):
                raise _UsageError(f"line {i + 2}: column 'alpha' must be a positive number")
        backward = (row.get("backward") or "0").strip().lower() in ("1", "true", "yes")
        out[i] = embedding_bag_ms(int(E[i]), int(D[i]), int(Bt[i]), L[i], dist, model.peaks,
                                  backward=backward, kernel_floor_ms=model.kernel_floor_ms,
                                  clock_mhz=model.clock_mhz, constants=model.bag_forward)
    return out


def _cmd_predict(args) -> int:

    try:
        profile = profile_for_device(args.gpu)
    except KeyError as exc:
        return _fail(f"--gpu: {exc.args[0]}")
    except ProfileError as exc:
        return _fail(f"--gpu: {exc}")
    if profile.device.kind != "gpu":
        return _fail(f"--gpu: {profile.name!r} describes a CPU; kernels predict models "
                     "GPU kernels")
    try:
        with open(args.inp, newline="") as f:
            reader = csv.DictReader(f)
            fields = [c.strip() for c in (reader.fieldnames or [])]
            reader.fieldnames = fields
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return _fail(f"--in: cannot read {args.inp}: {exc}")
    if not fields:
        return _fail(f"--in: {args.inp} has no header line")
    if len(fields) == 1 and any(sep in fields[0] for sep in ";\t|"):
        return _fail(f"--in: {args.inp}: one column {fields[0]!r}; the columns must be "
                     "separated by commas")
    try:
        pred = predict_rows(profile, args.op, rows, fields)
    except _UsageError as exc:
        return _fail(f"{args.inp}: {exc}" if not str(exc).startswith("--") else str(exc))
    out_fields = fields + (["pred_ms"] if "pred_ms" not in fields else [])
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=out_fields, extrasaction="ignore")
    writer.writeheader()
    for row, ms in zip(rows, pred):
        writer.writerow(row | {"pred_ms": f"{ms:.6g}"})
    try:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(args.out, text.getvalue().encode())
    except OSError as exc:
        return _fail(f"--out: {exc}")
    print(f"{args.out}: {len(rows)} rows, {args.op} on {profile.name} ({profile.kind})")
    if profile.provenance.get("power_cap") and args.op in GEMM_OPS + CONV_OPS:
        print(f"note: {profile.provenance['power_cap']}")
    return 0


def _cmd_build(args) -> int:

    if args.overheads_only:
        paths = sorted(Path(args.out or PROFILE_DIR).glob("*.json"))
        if not paths:
            return _fail(f"no profiles in {args.out or PROFILE_DIR} to add overheads to")
        try:
            attach_trace_overheads(paths)
        except FileNotFoundError as exc:
            return _fail(str(exc))
        return 0

    if neusight_dir() is None and args.data is None:
        return _fail("the NeuSight GEMM measurements are not there "
                     "(../shared/data/microbench/neusight-gemm); nothing to fit")
    try:
        build_profiles(args.out or PROFILE_DIR, regressor=args.regressor, seed=args.seed,
                       validate=not args.no_validate, data_dir=args.data)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    return 0


def print_validation(v) -> None:
    """The human-readable report of one :class:`~.trace_validation.TraceValidation`."""
    print(f"{v.job}: {v.ranks} rank(s) of {v.device}, profile {v.profile}")
    print(f"  iteration      recorded {v.recorded_ms:10.3f} ms   replayed with recorded "
          f"kernels {v.replay_recorded_ms:10.3f} ms   with modeled kernels "
          f"{v.replay_modeled_ms:10.3f} ms ({v.iteration_error_pct:+.1f}%)")
    print(f"  device active  recorded {v.active_recorded_ms:10.3f} ms   modeled "
          f"{v.active_modeled_ms:10.3f} ms ({v.active_error_pct:+.1f}%) per step")
    cov = ", ".join(f"{k} {x:.1f}%" for k, x in v.coverage.items())
    print(f"  device time    {cov}")
    if v.kernel_gmae is not None:
        print(f"  per-op kernel GMAE {100 * v.kernel_gmae:.1f}% over {v.kernels_compared} ops "
              "with recorded shapes (copies listed apart)")
    for cls, row in v.per_class.items():
        print(f"    {cls:<12} {row['ops']:6d} ops  recorded {row['recorded_ms']:9.3f} ms  "
              f"modeled {row['predicted_ms']:9.3f} ms  GMAE "
              + ("    -" if row["gmae_pct"] is None else f"{row['gmae_pct']:5.1f}%"))
    for note in v.notes:
        print(f"  note: {note}")


def _cmd_validate_traces(args) -> int:
    from ..calibrate.trace_validation import validate_recording  # deferred: imports torch

    try:
        rec = load_recording(args.files)
    except TraceError as exc:
        return _fail(str(exc))
    name = args.gpu or rec.traces[0].device_name
    if not name:
        return _fail(f"{rec.traces[0].file}: the trace names no GPU; give --gpu NAME")
    try:
        profile = profile_for_device(name)
    except (KeyError, ProfileError) as exc:
        where = "--gpu" if args.gpu else f"{rec.traces[0].file}: the trace's GPU"
        return _fail(f"{where}: {exc.args[0] if isinstance(exc, KeyError) else exc}")
    if not args.gpu:   # as a prediction for that GPU models it
        profile = with_measured_sibling(profile)
    if profile.device.kind != "gpu":
        return _fail(f"--gpu: {profile.name!r} describes a CPU; validate-traces models GPU "
                     "kernels")
    try:
        result = validate_recording(rec, profile, et_paths=args.et)
    except TraceError as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print_validation(result)
    return 0


_GPU_HELP = ("the name a GPU reports (e.g. 'NVIDIA H100 80GB HBM3'; case, spaces and dashes "
             "are forgiven), a bundled profile's name (nvidia-h200), or a profile JSON path; "
             "the profile as bundled (a scenario prediction also gives a GPU the measured "
             "GEMM models of a GPU of the same compute)")


def register(subparsers) -> None:
    k = subparsers.add_parser(
        "kernels", help="GPU kernel models: predict, build profiles, validate against traces",
        **examples("%(prog)s predict --gpu 'NVIDIA H100 80GB HBM3' --op mm --in shapes.csv "
                   "--out pred.csv",
                   "%(prog)s validate-traces "
                   "resources/measurements/nvidia-h200-2026-11-29/scenario00.json.gz",
                   "%(prog)s SUBCOMMAND --help"))
    ksub = k.add_subparsers(dest="kernels_command", required=True, metavar="SUBCOMMAND")
    p = ksub.add_parser(
        "predict", help="predict kernel times for the shapes of a CSV",
        **examples("printf 'M,N,K\\n4096,4096,4096\\n' > shapes.csv",
                   "%(prog)s --gpu 'NVIDIA H100 80GB HBM3' --op mm --in shapes.csv "
                   "--out pred.csv",
                   "%(prog)s --gpu nvidia-h200-measured --op addmm --in shapes.csv "
                   "--out pred.csv"))
    p.add_argument("--gpu", required=True, metavar="NAME", help=_GPU_HELP)
    p.add_argument("--op", required=True, choices=GEMM_OPS + CONV_OPS + EMBEDDING_OPS)
    p.add_argument("--in", dest="inp", required=True, metavar="SHAPES.csv",
                   help="GEMM: columns B,M,N,K (B optional for mm/addmm), optional dtype "
                        "(float32 default, float16, bfloat16); conv (2-D forward, NCHW): "
                        f"{CONV_COLUMNS} (W = H, 3x3, stride 1, padding 1 by default), "
                        "optional dtype; embedding_bag: "
                        "rows,dim,batch,pooling[,distribution,alpha,backward]")
    p.add_argument("--out", required=True, metavar="PRED.csv",
                   help="the input rows with pred_ms (kernel milliseconds) added")
    p.set_defaults(func=_cmd_predict)
    b = ksub.add_parser(
        "build-profiles", help="rebuild the bundled GPU profiles",
        **examples("%(prog)s",
                   "%(prog)s --out /tmp/profiles --no-validate",
                   "%(prog)s --overheads-only"))
    b.add_argument("--out", metavar="DIR", help="output folder (default: resources/profiles/gpu)")
    b.add_argument("--regressor", choices=("gbm", "mlp"), default="gbm",
                   help="the fp32 GEMM model (default gbm)")
    b.add_argument("--seed", type=int, default=0, help="the fits' seed (default 0)")
    b.add_argument("--data", metavar="DIR",
                   help="the neusight-gemm folder (default: ../shared/data/microbench/"
                        "neusight-gemm)")
    b.add_argument("--no-validate", action="store_true",
                   help="skip the held-out and leave-one-GPU-out fits")
    b.add_argument("--overheads-only", action="store_true",
                   help="only re-measure T1-T5 and launch maps from the public GPU traces "
                        "into the existing profiles")
    b.set_defaults(func=_cmd_build)
    v = ksub.add_parser(
        "validate-traces",
        help="replay recorded GPU traces with modeled kernels and compare with the recording",
        **examples("%(prog)s resources/measurements/nvidia-h200-2026-11-29/scenario00.json.gz",
                   "%(prog)s resources/measurements/nvidia-h200-2026-11-29/scenario03.json.gz "
                   "--gpu nvidia-h200-measured --json"))
    v.add_argument("files", nargs="+", metavar="FILE",
                   help="Kineto traces (several files: the ranks of one job)")
    v.add_argument("--et", nargs="+", metavar="ET.json",
                   help="the job's execution traces (collective sizes for old traces)")
    v.add_argument("--gpu", metavar="NAME",
                   help=f"the profile to model with (default: the GPU the trace names, "
                        f"as a prediction for it would, measured GEMMs of a GPU of the "
                        f"same compute included): {_GPU_HELP}")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    v.set_defaults(func=_cmd_validate_traces)
