"""Check GPU profiles against real recordings: replay each recorded job with its kernels
*modeled* instead of recorded, and compare the step time, the device-active time and
each op's kernel time with the recording.

Each device event gets a modeled duration where the recording says enough to model it:

- a kernel launched inside an ``aten::`` op with recorded shapes (``Input Dims``): the
  profile's kernel models, exactly as :func:`predictors.costs.op_costs.kernel_seconds`
  costs a captured op.  The op's modeled time is split over the kernels it launched in
  their recorded proportions (the simulator models an op as one kernel).  The dtype is not
  in every trace; it is read from the kernel's name (``volta_sgemm`` is float32, a name
  with ``Half``/``fp16``/``h884`` float16, ``BFloat16``/``bf16`` bfloat16);
- a collective (NCCL/RCCL kernel): :mod:`predictors.costs.collectives`, with the message
  size from the op's ``In msg nelems`` (newer traces) or from the execution trace's
  ``record_param_comms`` node (ET files given beside the Kineto files);
- a memcpy / memset: its recorded byte count over PCIe (host <-> device) or HBM.

Everything else (ops without shapes, convolutions, vendor-library ops such as ``fbgemm::``)
keeps its recorded duration, and the report says what share of the recorded device time that is.
The CPU side always replays with the overheads measured from the trace itself
(:func:`predictors.traces.replay.replay`), so the figures isolate the kernel models.
"""
from __future__ import annotations

import bisect
import json
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from ..costs.collectives import arch_of, collective_kind, collective_time
from ..costs.convolution import conv_geometry, conv_pass
from ..costs.op_costs import kernel_seconds
from ..hardware.platforms import LINK_KINDS, gpu_nvlink
from ..model.op_classes import classify
from ..profiles import DeviceProfile
from ..traces.kineto import Kind, KinetoTrace, TraceError, read_json_bytes
from ..traces.overhead_tables import innermost_ops
from ..traces.recording import Recording, kernel_category
from ..traces.replay import replay
from ..utils.metrics import gmae

__all__ = ["TraceValidation", "ModeledKernels", "model_kernels", "validate_recording",
           "collective_sizes_from_et", "intra_link_bw"]

# Host <-> device copies: the PCIe bandwidth the DLRM papers measured on V100 and A100
# hosts (../shared/data/README.md).  A copy from pageable memory is staged through pinned
# buffers by the driver, chunk by chunk, so the host memcpy (~10 GB/s, one core) overlaps
# the DMA and the slower of the two sets the rate.
PCIE_MEASURED_BW = 8.1e9
HOST_STAGING_BW = 10e9
COPY_SETUP_US = 1.0
PCIE3_BW = 16e9  # PCIe 3.0 x16, one direction


@dataclass
class ModeledKernels:
    """Modeled device-event durations of one recorded job, and how they were obtained."""

    durations: list[np.ndarray]           # per rank, per event (us); NaN: recorded kept
    per_op: list[dict] = field(default_factory=list)  # modeled ops with recorded shapes
    device_us: dict = field(default_factory=dict)     # recorded device time by source
    notes: list[str] = field(default_factory=list)


@dataclass
class TraceValidation:
    """Recorded vs replayed-with-modeled-kernels figures of one job."""

    job: str
    device: str
    profile: str
    ranks: int
    recorded_ms: float
    replay_recorded_ms: float
    replay_modeled_ms: float
    active_recorded_ms: float
    active_modeled_ms: float
    coverage: dict
    per_class: dict
    kernel_gmae: float | None
    kernels_compared: int
    notes: list[str] = field(default_factory=list)

    @property
    def iteration_error_pct(self) -> float:
        return 100.0 * (self.replay_modeled_ms / max(self.recorded_ms, 1e-9) - 1.0)

    @property
    def active_error_pct(self) -> float:
        return 100.0 * (self.active_modeled_ms / max(self.active_recorded_ms, 1e-9) - 1.0)

    def to_json(self) -> dict:
        return {"job": self.job, "device": self.device, "profile": self.profile,
                "ranks": self.ranks, "recorded_ms": self.recorded_ms,
                "replay_recorded_kernels_ms": self.replay_recorded_ms,
                "replay_modeled_kernels_ms": self.replay_modeled_ms,
                "iteration_error_pct": self.iteration_error_pct,
                "device_active_recorded_ms": self.active_recorded_ms,
                "device_active_modeled_ms": self.active_modeled_ms,
                "device_active_error_pct": self.active_error_pct,
                "coverage_pct": self.coverage, "per_class": self.per_class,
                "kernel_gmae_pct": None if self.kernel_gmae is None else 100 * self.kernel_gmae,
                "kernels_compared": self.kernels_compared, "notes": self.notes}


# --- reading what the recording says about each kernel -----------------------------------

_DTYPE_HINTS = (("float32", ("tf32", "sgemm")),
                ("bfloat16", ("bfloat16", "bf16")),
                ("float16", ("c10::half", "half>", "fp16", "f16", "h884", "h1688", "h16816",
                             "hgemm")),
                ("float64", ("double", "dgemm")))


def dtype_from_kernel(name: str) -> str:
    """The floating dtype a kernel's name reveals (float32 when it names none)."""
    low = name.lower()
    for dtype, hints in _DTYPE_HINTS:
        if any(h in low for h in hints):
            return dtype
    return "float32"


def _shapes(dims) -> list[list[int]]:
    """Tensor shapes of an ``Input Dims`` list; non-tensor arguments (``[]``) are left out
    and a tensor list contributes each of its tensors."""
    out = []
    for d in dims if isinstance(dims, list) else ():
        if isinstance(d, list) and d and all(isinstance(x, int) for x in d):
            out.append([int(x) for x in d])
        elif isinstance(d, list) and d and all(isinstance(x, list) for x in d):
            out.extend(_shapes(d))
    return out


def _out_shapes(op: str, ins: list[list[int]]) -> list[list[int]]:
    base = op.split("::")[-1]
    cat = classify(op)
    if base.endswith("_") or not ins:
        return []
    if cat == "gemm":
        if base in ("mm", "matmul") and len(ins) >= 2:
            return [ins[0][:-1] + ins[1][-1:]]
        if base == "addmm" and len(ins) >= 3:
            return [[ins[1][0], ins[2][1]]]
        if base in ("bmm",) and len(ins) >= 2:
            return [[ins[0][0], ins[0][1], ins[1][2]]]
        return []
    if cat == "reduction" and ("norm" in base and base != "norm" or "softmax" in base):
        return [ins[0]]  # normalizations keep their input's shape (dx too, backward)
    if cat == "elementwise":
        try:
            return [list(np.broadcast_shapes(*[tuple(s) for s in ins]))]
        except ValueError:
            return [ins[0]]
    return []


# One-tensor ops whose ``out=`` form (recorded with the output among ``Input Dims``) older
# PyTorch called from the functional form (``relu`` -> ``clamp_min(x, 0, out=y)``).
UNARY_OPS = frozenset(
    "clamp_min clamp_max clamp relu sigmoid tanh gelu silu exp log neg abs sqrt rsqrt "
    "reciprocal hardtanh leaky_relu elu threshold".split())


def conv_shapes(tr: KinetoTrace) -> dict[int, tuple[list, list]]:
    """``(input shapes, output shapes)`` of the recorded convolution ops of one trace, in
    the form :mod:`predictors.costs.convolution` reads, where the trace says enough.

    ``Input Dims`` gives a forward convolution's input and weight but not its stride, and
    a ``*_backward_input``/``_weight`` op records sizes as int lists, not shapes.  The
    combined backward op records ``x``, ``dy`` and ``w``: its ``dy`` is the forward's output
    (the same layer's forward has the same ``x`` and ``w``), and it encloses the two
    gradient ops, which take their shapes from it.  A forward convolution without its
    backward (inference) stays unresolved."""
    ev = np.flatnonzero(tr.kind == Kind.CPU_OP)
    passes = {int(k): conv_pass(tr.names[tr.name_id[k]]) for k in ev}
    passes = {k: p for k, p in passes.items() if p is not None}
    geo: dict[int, tuple] = {}
    out_of: dict[tuple, list] = {}
    for k, p in passes.items():
        if p != "backward":
            continue
        ins = _shapes(_json_dims(tr.details[tr.detail_id[k]]))
        g = conv_geometry({"name": tr.names[tr.name_id[k]], "input_shapes": ins})
        if g is not None:
            geo[k] = g
            out_of[(tuple(g[0]), tuple(g[1]))] = g[2]
    parents = sorted(geo, key=lambda k: (tr.thread[k], tr.ts[k]))
    keys = [(tr.thread[k], tr.ts[k]) for k in parents]
    out: dict[int, tuple[list, list]] = {}
    for k, p in passes.items():
        if p == "backward":
            x, w, dy = geo.get(k, (None,) * 3)
            if x is not None:
                out[k] = ([dy, x, w], [])
        elif p == "forward":
            ins = _shapes(_json_dims(tr.details[tr.detail_id[k]]))
            y = out_of.get((tuple(ins[0]), tuple(ins[1]))) if len(ins) >= 2 else None
            if y is not None:
                out[k] = (ins, [y])
        else:
            j = bisect.bisect_right(keys, (tr.thread[k], tr.ts[k])) - 1
            if j < 0 or keys[j][0] != tr.thread[k]:
                continue
            par = parents[j]
            if tr.ts[par] + tr.dur[par] < tr.ts[k] + tr.dur[k]:
                continue
            x, w, dy = geo[par]
            out[k] = ([dy, w], [x]) if p == "backward_input" else ([dy, x], [w])
    return out


def _json_dims(text: str):
    """The parsed ``Input Dims`` text ([] when absent or not JSON)."""
    try:
        return json.loads(text) if text else []
    except ValueError:
        return []


def node_from_trace(op: str, dims_text: str, dtype: str,
                    conv: tuple[list, list] | None = None) -> dict | None:
    """A captured-op node (the form the kernel models read) from a recorded op's name and
    ``Input Dims``, or None when the recording lacks what the models need.  A convolution
    needs its shapes resolved by :func:`conv_shapes` (``conv``)."""
    if not op.startswith("aten::") or not dims_text:
        return None
    if conv_pass(op) is not None:
        if conv is None:
            return None  # stride unknown: the trace has no backward of this layer
        ins, outs = conv
        return _node(op, ins, [dtype] * len(ins), outs, dtype)
    ins = _shapes(_json_dims(dims_text))
    if not ins:
        return None
    base = op.split("::")[-1]
    outs = None
    if base in UNARY_OPS and len(ins) == 2 and ins[1] == ins[0]:
        outs = [ins.pop()]  # the ``out=`` form: the second tensor is written, not read
    in_dtypes = [dtype] * len(ins)
    if classify(op) == "embedding" or base in ("index", "index_select", "gather"):
        in_dtypes = [dtype] + ["int64"] * (len(ins) - 1)  # indices (and offsets)
    elif base in ("_index_put_impl_", "index_put_", "index_put") and len(ins) > 2:
        in_dtypes = [dtype] + ["int64"] * (len(ins) - 2) + [dtype]  # self, indices, values
    elif base in ("scatter", "scatter_", "scatter_add", "scatter_add_", "index_add",
                  "index_add_") and len(ins) > 1:
        in_dtypes[1] = "int64"  # self, index, source
    outs = outs if outs is not None else _out_shapes(op, ins)
    return _node(op, ins, in_dtypes, outs, dtype)


def _node(op: str, ins: list, in_dtypes: list, outs: list, dtype: str) -> dict:
    return {"name": op, "overload": "", "phase": "", "thread": "main", "block": "",
            "grad_fn": "", "input_shapes": ins, "input_dtypes": in_dtypes,
            "input_nnz": [None] * len(ins), "output_shapes": outs,
            "output_dtypes": [dtype] * len(outs), "output_nnz": [None] * len(outs),
            "scalars": [], "lookup": None}


# --- collectives ------------------------------------------------------------------------

def intra_link_bw(device_name: str) -> float:
    """Per-GPU one-direction bandwidth (bytes/s) of the fabric a GPU of this name sits on:
    NVLink of its generation for SXM/DGX parts, PCIe otherwise (3.0 x16 before Ampere)."""
    low = device_name.lower()
    arch = arch_of(device_name)
    if any(k in low for k in ("sxm", "dgx", "pg509", "hbm3", "h200")):
        return LINK_KINDS[gpu_nvlink(device_name) or "nvlink4"]
    return LINK_KINDS["pcie4"] if arch in ("ampere", "hopper") else PCIE3_BW


_RANK_RE = re.compile(r"(\d+)(?!.*\d)")


def collective_sizes_from_et(paths: list[str]) -> dict[int, list[tuple[str, float]]]:
    """Per rank (the last number in the ET file's name), the ``(kind, bytes)`` of each
    ``record_param_comms`` collective in execution order ('wait' and barriers left out).

    ``bytes`` is what NCCL counts: the buffer for all-reduce, the send buffer for
    all-to-all, the output buffer for all-gather."""
    out: dict[int, list[tuple[str, float]]] = {}
    for n, path in enumerate(sorted(paths)):
        try:
            doc = json.loads(read_json_bytes(path))
        except (TraceError, ValueError, OSError) as exc:
            raise TraceError(f"{os.path.basename(path)}: not an execution trace ({exc})") \
                from None
        nodes = doc.get("nodes") if isinstance(doc, dict) else None
        if not isinstance(nodes, list):
            raise TraceError(f"{os.path.basename(path)}: not an execution trace (no 'nodes')")
        m = _RANK_RE.search(os.path.basename(path).split(".")[0])
        rank = int(m.group(1)) if m else n
        colls = []
        for node in sorted((x for x in nodes if isinstance(x, dict)),
                           key=lambda x: x["id"] if type(x.get("id")) is int else -1):
            if node.get("name") != "record_param_comms":
                continue
            ins = node.get("inputs")
            ins = ins if isinstance(ins, list) else []
            kind = next((x for x in ins if isinstance(x, str)), "")
            ck = collective_kind(kind)
            if ck is None:
                continue
            if ck == "all_gather":  # NCCL counts all-gather's output buffer
                outs = node.get("outputs")
                outs = outs if isinstance(outs, list) else []
                colls.append((ck, _tensor_bytes(outs[0] if outs else None)))
            else:
                colls.append((ck, _tensor_bytes(ins[0] if ins else None)))
        out[rank] = colls
    return out


def _tensor_bytes(t) -> float:
    """Bytes of an ET tensor ``[id, storage, offset, numel, itemsize, device]`` or a list
    of them."""
    if isinstance(t, list) and len(t) == 6 and isinstance(t[3], int) and isinstance(t[4], int):
        return float(t[3] * t[4])
    if isinstance(t, list):
        return float(sum(_tensor_bytes(x) for x in t))
    return 0.0


_ITEMSIZE = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8,
             "int": 4, "long": 8, "int64": 8, "int32": 4, "int8": 1, "byte": 1, "uint8": 1}
_KINETO_COLL = re.compile(r"collective (\S+) in (\S+) out (\S+) ?(\S*)")


def _kineto_collective(detail: str) -> tuple[str, float] | None:
    m = _KINETO_COLL.match(detail)
    if not m:
        return None
    kind = collective_kind(m.group(1))
    try:
        n_in, n_out = float(m.group(2)), float(m.group(3))
    except ValueError:
        return None
    size = _ITEMSIZE.get(m.group(4).split(".")[-1].lower(), 4)
    if kind is None:
        return None
    # NCCL's count: all-gather counts its output, the others their input.
    return kind, (n_out if kind == "all_gather" else n_in) * size


def _world_size(rec: Recording) -> int:
    for tr in rec.traces:
        info = tr.meta.get("distributedInfo") if isinstance(tr.meta, dict) else None
        if isinstance(info, dict) and isinstance(info.get("world_size"), int):
            return max(info["world_size"], len(rec.traces))
    return len(rec.traces)


# --- modeling ---------------------------------------------------------------------------

def model_kernels(rec: Recording, profile: DeviceProfile,
                  et_paths: list[str] | None = None) -> ModeledKernels:
    """Modeled durations of the device events of ``rec`` (see the module docstring)."""
    device = profile.device
    et_sizes = collective_sizes_from_et(et_paths) if et_paths else {}
    world = _world_size(rec)
    arch, link = arch_of(device.name), intra_link_bw(device.name)
    src_us = {"kernel models": 0.0, "collective model": 0.0, "copy model": 0.0,
              "recorded (no model)": 0.0}
    durations, per_op, notes = [], [], []
    mismatched = 0
    for tr, op in zip(rec.traces, rec.ops):
        dur = np.full(len(tr), np.nan)
        inner = innermost_ops(tr, op)
        dev = np.flatnonzero(tr.thread_is_device[tr.thread]
                             & np.isin(tr.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)))
        # Issue order (the launching call's time): the order the ET records collectives in.
        issued = np.where(op.launcher[dev] >= 0, tr.ts[np.maximum(op.launcher[dev], 0)],
                          tr.ts[dev])
        dev = dev[np.lexsort((tr.ts[dev], issued))]
        comm_names = np.array([kernel_category(n) == "communication" for n in tr.names], bool)
        colls = et_sizes.get(tr.rank, [])
        q = 0
        by_op: dict[int, list[int]] = {}
        for k in dev.tolist():
            name = tr.names[tr.name_id[k]]
            kind = int(tr.kind[k])
            rec_us = float(tr.dur[k])
            call = int(op.launcher[k])
            holder = int(inner[call]) if call >= 0 else -1
            if kind == Kind.KERNEL and comm_names[tr.name_id[k]]:
                size = None
                if holder >= 0:
                    size = _kineto_collective(tr.details[tr.detail_id[holder]])
                if size is None and q < len(colls):
                    size = colls[q]
                    ran = collective_kind(name)  # NCCL runs all-to-all as send/recv
                    if ran is not None and ran != size[0] and {ran, size[0]} != {
                            "send_recv", "all_to_all"}:
                        mismatched += 1
                q += 1
                if size is not None and world > 1:
                    est = collective_time(size[0], size[1], world, link, arch)
                    dur[k] = est.us
                    src_us["collective model"] += rec_us
                else:
                    src_us["recorded (no model)"] += rec_us
                continue
            if kind in (Kind.MEMCPY, Kind.MEMSET):
                m = re.match(r"(\d+) bytes", tr.details[tr.detail_id[k]])
                if m:
                    nbytes = float(m.group(1))
                    low = name.lower()
                    host = "htod" in low or "dtoh" in low or "host" in low
                    bw = PCIE_MEASURED_BW if host else device.mem_bw / (
                        1 if kind == Kind.MEMSET else 2)
                    if host and "pageable" in low:
                        bw = min(bw, HOST_STAGING_BW)
                    dur[k] = COPY_SETUP_US + nbytes / bw * 1e6
                    src_us["copy model"] += rec_us
                    per_op.append({"rank": tr.rank, "op": name, "dims": f"{nbytes:.0f} bytes",
                                   "class": "transfer", "model": "copy model",
                                   "kernels": 1, "recorded_us": rec_us,
                                   "predicted_us": float(dur[k])})
                else:
                    src_us["recorded (no model)"] += rec_us
                continue
            if holder >= 0:
                by_op.setdefault(holder, []).append(k)
            else:
                src_us["recorded (no model)"] += rec_us
        holders = list(by_op)
        convs = conv_shapes(tr)
        nodes = []
        for h in holders:
            kernels = by_op[h]
            dtype = dtype_from_kernel(" ".join(tr.names[tr.name_id[k]] for k in kernels))
            nodes.append(node_from_trace(tr.names[tr.name_id[h]],
                                         tr.details[tr.detail_id[h]], dtype, convs.get(h)))
        good = [j for j, n in enumerate(nodes) if n is not None]
        seconds = [math.nan] * len(nodes)
        if good:
            costs, secs, models = kernel_seconds([nodes[j] for j in good], device, profile)
            for j, c, s, mname in zip(good, costs, secs, models):
                if c.category != "view" and s > 0:
                    seconds[j] = s
                    nodes[j]["_model"], nodes[j]["_class"] = mname, c.category
        for j, h in enumerate(holders):
            kernels = by_op[h]
            rec_k = tr.dur[kernels]
            total = float(rec_k.sum())
            if seconds[j] != seconds[j]:
                src_us["recorded (no model)"] += total
                continue
            pred = seconds[j] * 1e6
            share = rec_k / total if total > 0 else np.full(len(kernels), 1 / len(kernels))
            dur[kernels] = pred * share
            src_us["kernel models"] += total
            per_op.append({"rank": tr.rank, "op": tr.names[tr.name_id[h]],
                           "dims": tr.details[tr.detail_id[h]], "class": nodes[j]["_class"],
                           "model": nodes[j]["_model"], "kernels": len(kernels),
                           "recorded_us": total, "predicted_us": pred})
        durations.append(dur)
    if mismatched:
        notes.append(f"{mismatched} NCCL kernel(s) ran a different collective than the "
                     "execution trace's at the same position: the ET does not match the "
                     "Kineto files, or records collectives in another order")
    return ModeledKernels(durations, per_op, src_us, notes)


def _gmae(pred, actual) -> float | None:
    """:func:`~predictors.utils.metrics.gmae`, None without a positive measurement."""
    g = gmae(pred, actual)
    return None if math.isnan(g) else g


def _active_ms(tl, ranks) -> float:
    """Mean over ranks of the device-busy time per step (inside the rank's steps)."""
    vals = []
    for r in ranks:
        lanes = tl.lanes_of(r, "stream")
        if not lanes:
            continue
        window = tl.step_window(r)
        steps = max(1, sum(1 for s in tl.steps if s.rank == r))
        vals.append((tl.busy_ms(lanes, *window) if window else tl.busy_ms(lanes)) / steps)
    return float(np.mean(vals)) if vals else 0.0


def validate_recording(rec: Recording, profile: DeviceProfile, *, job: str = "",
                       et_paths: list[str] | None = None) -> TraceValidation:
    """Replay ``rec`` with recorded and with modeled kernels and compare (see module doc).
    Raises :class:`TraceError` for a recording without GPU work or without CPU ops."""
    for tr, op in zip(rec.traces, rec.ops):
        if not np.isin(tr.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)).any():
            raise TraceError(f"{tr.file}: records no GPU kernels or copies: nothing to model")
        if not len(op.items):
            raise TraceError(f"{tr.file}: records no CPU ops: nothing launches the kernels, "
                             "so there is nothing to replay")
    modeled = model_kernels(rec, profile, et_paths)
    base = replay(rec)
    mod = replay(rec, durations=modeled.durations)
    ranks = [tr.rank for tr in rec.traces]
    rec_active = _active_ms(rec.timeline, ranks)
    mod_active = _active_ms(mod.timeline, ranks)
    total = sum(modeled.device_us.values()) or 1.0
    coverage = {k: 100.0 * v / total for k, v in modeled.device_us.items()}
    per_class: dict[str, dict] = {}
    rows = modeled.per_op
    for cls in sorted({r["class"] for r in rows}):
        sel = [r for r in rows if r["class"] == cls]
        per_class[cls] = {
            "ops": len(sel),
            "recorded_ms": sum(r["recorded_us"] for r in sel) / 1e3,
            "predicted_ms": sum(r["predicted_us"] for r in sel) / 1e3,
            "gmae_pct": None if (g := _gmae([r["predicted_us"] for r in sel],
                                            [r["recorded_us"] for r in sel])) is None
            else 100 * g}
    kernel_rows = [r for r in rows if r["class"] != "transfer"]  # kernels, not copies
    g = _gmae([r["predicted_us"] for r in kernel_rows],
              [r["recorded_us"] for r in kernel_rows]) if kernel_rows else None
    notes = list(mod.notes) + modeled.notes
    if profile.kind == "datasheet":
        notes.append(f"{profile.name}: no bundled profile; datasheet figures with a "
                     "borrowed GEMM regressor")
    device = rec.traces[0].device_name or profile.name
    return TraceValidation(job or ", ".join(rec.files[:2]), device, profile.name,
                           len(rec.traces), base.recorded_ms, base.iteration_ms,
                           mod.iteration_ms, rec_active, mod_active, coverage, per_class,
                           g, len(kernel_rows), notes)
