"""Kineto (PyTorch profiler) traces -> columnar events, decoded in pieces with msgspec.

Handles every era we know of: the 2021 categories (``Operator``, ``Runtime``, ``Kernel``,
``Memcpy``, ``Memset``, ``async`` flows, string tids such as ``"stream 7"``) and the current
ones (``cpu_op``, ``cuda_runtime``, ``cuda_driver``, ``kernel``, ``gpu_memcpy``, ``gpu_memset``,
``user_annotation``, ``gpu_user_annotation``, ``python_function``, ``ac2g`` flows), CUDA and
HIP runtimes, and traces with or without ``distributedInfo``.

Events are decoded into typed structs (:class:`_Event`), which read only the fields used and
check their types in C: a name, category or phase that is not a string, a time that is not
a number or ``args`` that is not an object is a :class:`TraceError` naming the event and the
field.  Ids (``pid``, ``tid``, ``External id``, ``correlation``...) may be any JSON value; one
that is not a usable integer counts as absent.

The ``traceEvents`` array is cut into pieces of a few MB at event boundaries and each piece is
decoded on its own, so a trace of a million events never exists as a million Python objects
at once; each piece is folded into numpy columns.  A piece that does not parse (a boundary
guessed inside a string) makes the reader decode the whole array at once.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import msgspec
import numpy as np

from ..utils.progress import check_cancelled
from .memory_events import add_memory, memory_counters

__all__ = ["TraceError", "KinetoTrace", "read_kineto", "parse_kineto_bytes", "Kind",
           "read_json_bytes", "stream_label"]


class TraceError(ValueError):
    """A trace that cannot be read: one line naming the file and the problem."""


class Kind:
    """Event kinds (int8 codes in :attr:`KinetoTrace.kind`)."""

    CPU_OP, ANNOTATION, RUNTIME, KERNEL, MEMCPY, MEMSET, PYTHON, GPU_ANNOTATION, SYNC, \
        OTHER = range(10)
    DEVICE = (KERNEL, MEMCPY, MEMSET, GPU_ANNOTATION, SYNC)


_KIND_OF_CAT = {
    "cpu_op": Kind.CPU_OP, "Operator": Kind.CPU_OP, "operator": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION, "User annotation": Kind.ANNOTATION,
    "cuda_runtime": Kind.RUNTIME, "Runtime": Kind.RUNTIME, "cuda_driver": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME, "privateuse1_runtime": Kind.RUNTIME,
    "kernel": Kind.KERNEL, "Kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY, "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET, "Memset": Kind.MEMSET,
    "python_function": Kind.PYTHON, "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_sync": Kind.SYNC,
}
_SKIP_CATS = frozenset({"Trace", "cpu_instant_event", "overhead", "Overhead"})
_FLOW_CATS = frozenset({"ac2g", "async"})
_CHUNK = 4 << 20  # bytes of JSON per parsed piece
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
_STREAM_NUM = re.compile(r"(\d+)")


@dataclass
class KinetoTrace:
    """The events of one Kineto file (one rank) as parallel arrays.

    Times are microseconds relative to ``base_us`` (the file's earliest event), so that
    sub-microsecond digits survive; ``base_us + ts`` is the file's own timestamp.
    ``thread`` indexes ``threads`` (CPU ``(pid, tid)`` or device ``(device, stream)``).
    ``ext`` is the ``External id`` (-1 if none), ``corr`` the CUDA correlation id,
    ``rf`` the ``Record function id``, ``flow`` the id of an ``ac2g``/``async`` flow that
    ends on a device event (-1 if none).
    """

    path: str
    rank: int
    meta: dict
    base_us: float
    ts: np.ndarray
    dur: np.ndarray
    kind: np.ndarray
    thread: np.ndarray
    name_id: np.ndarray
    detail_id: np.ndarray
    ext: np.ndarray
    corr: np.ndarray
    rf: np.ndarray
    threads: list[tuple]
    thread_is_device: np.ndarray
    names: list[str]
    details: list[str]
    thread_names: dict = field(default_factory=dict)
    flow_starts: dict = field(default_factory=dict)  # flow id -> (thread index, ts)
    bytes_read: int = 0
    # profile_memory's "[memory]" events: device -> (ts, allocated bytes, absolute?), the
    # device ("cpu", -1) or ("gpu", index); see :func:`~.memory_events.memory_counters`
    memory: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    @property
    def file(self) -> str:
        return os.path.basename(self.path)

    @property
    def device_name(self) -> str:
        props = self.meta.get("deviceProperties")
        if isinstance(props, list) and props and isinstance(props[0], dict):
            dev = props[0].get("name")
            return dev if isinstance(dev, str) else ""
        return ""

    def steps(self) -> list[tuple[str, float, float]]:
        """``(name, start, dur)`` of every ``ProfilerStep#N`` on the CPU, sorted, deduped."""
        sel = np.flatnonzero(((self.kind == Kind.ANNOTATION) | (self.kind == Kind.CPU_OP))
                             & self._step_name_mask())
        seen, out = set(), []
        for i in sel[np.argsort(self.ts[sel], kind="stable")]:
            key = (self.names[self.name_id[i]], round(float(self.ts[i]), 3))
            if key not in seen:
                seen.add(key)
                out.append((key[0], float(self.ts[i]), float(self.dur[i])))
        return out

    def _step_name_mask(self) -> np.ndarray:
        is_step = np.array([n.startswith("ProfilerStep#") for n in self.names], bool)
        return is_step[self.name_id] if len(self.names) else np.zeros(len(self), bool)


# --- reading bytes ---------------------------------------------------------------------------


def read_json_bytes(path: str | os.PathLike, progress=None, cancelled=None) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by name)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise TraceError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] != b"\x1f\x8b":
        return raw
    out, d = [], zlib.decompressobj(16 + zlib.MAX_WBITS)
    step, size, limit = 1 << 22, 0, _decompressed_limit()
    try:
        for i in range(0, len(raw), step):
            check_cancelled(cancelled, str(path))
            chunk = raw[i:i + step]
            while chunk:
                out.append(d.decompress(chunk))
                size += len(out[-1])
                chunk = b""
                if d.eof and d.unused_data:  # a gzip file may hold several members
                    chunk, d = d.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)
            if limit is not None and size > limit:
                raise TraceError(f"{path.name}: expands to over {size / 2**30:.1f} GiB, more "
                                 "than this machine's free memory can parse")
            if progress is not None:
                progress(0.3 * min(1.0, (i + step) / len(raw)), "decompressing")
        out.append(d.flush())
        if not d.eof:
            raise TraceError(f"{path.name}: the gzip stream is truncated")
    except zlib.error as exc:
        raise TraceError(f"{path.name}: not a valid gzip file ({exc})") from None
    return b"".join(out)


def _decompressed_limit() -> int | None:
    """The most JSON bytes worth decompressing: parsing needs about twice the text's size
    again, so a third of the memory available (Linux's MemAvailable, which counts the page
    cache as free; else a third of physical memory; None where the system does not say)."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 3
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 3
    except (ValueError, OSError, AttributeError):
        return None


# --- decoding events -------------------------------------------------------------------------

_Num = float | str | None  # a time: a number (or a numeric string)


class _Args(msgspec.Struct, gc=False):
    """The ``args`` fields the reader uses.  Ids and labels may be any JSON value; the
    allocator's byte counts of ``[memory]`` events are numbers."""

    ext: Any = msgspec.field(default=None, name="External id")
    ext_old: Any = msgspec.field(default=None, name="external id")
    corr: Any = msgspec.field(default=None, name="correlation")
    stream: Any = None
    device: Any = None
    rf: Any = msgspec.field(default=None, name="Record function id")
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    coll: Any = msgspec.field(default=None, name="Collective name")
    in_n: Any = msgspec.field(default=None, name="In msg nelems")
    out_n: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    nbytes: Any = msgspec.field(default=None, name="bytes")
    mem_bytes: float | None = msgspec.field(default=None, name="Bytes")
    mem_total: float | None = msgspec.field(default=None, name="Total Allocated")
    dev_type: Any = msgspec.field(default=None, name="Device Type")
    dev_id: Any = msgspec.field(default=None, name="Device Id")
    name: Any = None
    labels: Any = None


class _Event(msgspec.Struct, gc=False):
    """One trace event: the fields the reader uses, the others skipped unread."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Any = None
    tid: Any = None
    ts: _Num = None
    dur: _Num = None
    id: Any = None
    args: _Args | None = None


_EVENTS = msgspec.json.Decoder(list[_Event])
# A whole document: the object form (its values left undecoded) or the bare array of events.
_DOCUMENT = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[_Event] | str | int | float
                                 | bool | None)
_ANY = msgspec.json.Decoder()
_JSON_TYPES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
               "null": "null", "object": "an object", "array": "an array"}
_WHERE = re.compile(r"(.*?) - at `\$\[(\d+)\]\.?(.*)`$")
_EXPECTED = re.compile(r"Expected `(.+?)`, got `(\w+)`")


def _json_type(value) -> str:
    """How a decoded JSON value is called in messages: ``an object``, ``a string``..."""
    kind = {dict: "object", list: "array", str: "str", bool: "bool", int: "int",
            float: "float", type(None): "null"}.get(type(value), type(value).__name__)
    return _JSON_TYPES.get(kind, kind)


def _wrong_type(exc: msgspec.ValidationError, name: str, offset: int) -> TraceError:
    """A one-line error from msgspec's, with the event counted from 1 across pieces:
    ``event 12: 'name' must be a string, got an object``."""
    text = " ".join(str(exc).replace("\n", " ").split())
    m = _WHERE.match(text)
    if m is None:
        return TraceError(f"{name}: {text.replace('`', '')}")
    why, index, fieldname = m.group(1), int(m.group(2)), m.group(3)
    event = f"event {offset + index + 1}"
    e = _EXPECTED.match(why)
    if e is None:
        return TraceError(f"{name}: {event}: '{fieldname}': {why.replace('`', '').lower()}")
    alts = [_JSON_TYPES.get(t, t) for t in e.group(1).split(" | ")]
    expected = alts[0] if len(alts) == 1 else ", ".join(alts[:-1]) + " or " + alts[-1]
    got = _JSON_TYPES.get(e.group(2), e.group(2))
    if not fieldname:
        return TraceError(f"{name}: {event} is not {expected} (got {got})")
    return TraceError(f"{name}: {event}: '{fieldname}' must be {expected}, got {got}")


def _not_json(exc: msgspec.DecodeError, data: bytes, name: str) -> TraceError:
    if not data.strip():
        return TraceError(f"{name}: the file is empty")
    text = str(exc)
    if "truncated" in text:
        return TraceError(f"{name}: truncated JSON (the text stops inside a value)")
    text = re.sub(r"\(byte (\d+)\)", r"at byte \1", text.replace("JSON is malformed: ", ""))
    return TraceError(f"{name}: not JSON ({text})")


def _decode_events(piece, name: str, offset: int) -> list[_Event]:
    """The events of a JSON array; a field of the wrong type is a :class:`TraceError`, a
    syntax error the caller's ``msgspec.DecodeError``."""
    try:
        return _EVENTS.decode(piece)
    except msgspec.ValidationError as exc:
        raise _wrong_type(exc, name, offset) from None


def _decode_whole(data: bytes, name: str) -> tuple[dict, list[_Event]]:
    """``(metadata, events)`` of a document decoded at once: the object form of the Chrome
    trace format or its bare array of events."""
    try:
        doc = _DOCUMENT.decode(data)
    except msgspec.ValidationError as exc:  # an event of the bare array
        raise _wrong_type(exc, name, 0) from None
    except msgspec.DecodeError as exc:
        raise _not_json(exc, data, name) from None
    if isinstance(doc, list):
        return {}, doc
    if not isinstance(doc, dict):
        raise TraceError(f"{name}: not a trace (the JSON is {_json_type(doc)})")
    meta = {k: _ANY.decode(v) for k, v in doc.items() if k != "traceEvents"}
    events = doc.get("traceEvents")
    if events is None:
        if "nodes" in doc:
            raise TraceError(f"{name}: this is an execution trace (ET), not a Kineto "
                             "trace; load it beside its Kineto trace")
        raise TraceError(f"{name}: no 'traceEvents' array: not a Kineto/Chrome trace")
    if bytes(memoryview(events)[:1]) != b"[":
        raise TraceError(f"{name}: 'traceEvents' must be an array, got "
                         f"{_json_type(_ANY.decode(events))}")
    return meta, _decode_events(events, name, 0)


def _meta(text: bytes):
    """The document with an empty ``traceEvents`` array, or ``False`` where it does not
    parse."""
    try:
        return _ANY.decode(text)
    except msgspec.DecodeError:
        return False


def _split_events(data: bytes):
    """``(metadata, iterator of JSON arrays, count)``: the traceEvents array in pieces.

    Returns ``None`` where the layout is not the usual one; the caller decodes whole."""
    key = data.find(b'"traceEvents"')
    if key < 0:
        return None
    colon = data.find(b":", key + 13)
    lb = data.find(b"[", colon)
    if colon < 0 or lb < 0 or data[colon + 1:lb].strip():
        return None
    body_start = lb + 1
    first = data[body_start:body_start + 64].lstrip()
    if first.startswith(b"]"):  # an empty array
        meta = _meta(data[:lb + 1] + data[data.find(b"]", body_start):])
        if not isinstance(meta, dict) or meta.get("traceEvents") != []:
            return None  # not JSON, or a nested or repeated "traceEvents": decode whole
        return meta, iter(()), 0
    spans = []
    pos = lb  # the first piece starts with the array's own "["
    while True:
        m = _BOUNDARY.search(data, pos + _CHUNK) if pos + _CHUNK < len(data) else None
        if m is None:
            break
        spans.append((pos, m.start() + 1))
        pos = m.end() - 1
    # The last piece ends at the "}]" that closes the array: the first one after ``pos``
    # that leaves a parseable remainder.
    m = _ARRAY_END.search(data, pos)
    while m is not None:
        meta = _meta(data[:lb + 1] + data[m.end() - 1:])
        if meta is False:
            m = _ARRAY_END.search(data, m.end())
            continue
        # the array cut out must be the document's own traceEvents, not one nested in
        # another object before it (then decode the whole file)
        if not isinstance(meta, dict) or meta.get("traceEvents") != []:
            return None
        spans.append((pos, m.end()))
        return meta, _pieces(data, spans), len(spans)
    return None


def _pieces(data: bytes, spans: list[tuple[int, int]]):
    """The pieces of the traceEvents array, each a JSON array: the first begins with the
    array's own "[", the last ends with its "]"; brackets are added where it is cut (a
    copy of that piece), and an array in one piece is a view of ``data``."""
    view = memoryview(data)
    start, end = spans[0][0], spans[-1][1]
    for a, b in spans:
        if a == start and b == end:
            yield view[a:b]
        else:
            yield b"".join((b"" if a == start else b"[", view[a:b], b"" if b == end else b"]"))


# --- folding events into columns -----------------------------------------------------------


class _Columns:
    """What the pieces fold into: numpy columns per piece and the shared tables."""

    def __init__(self):
        self.threads: list[tuple] = []
        self.thread_index: dict = {}
        self.names: list[str] = []
        self.name_index: dict = {}
        self.details: list[str] = [""]
        self.detail_index: dict = {b"": 0}
        self.thread_names: dict = {}
        self.process_labels: dict = {}
        self.flow_s: dict = {}
        self.flow_f: dict = {}
        self.pieces: list[dict] = []  # the columns of each piece
        self.flows: list[tuple] = []  # (id, pid, tid, ts, is_start) arrays per piece
        self.memory: list[tuple] = []  # (ts, device type, device id, bytes, total or NaN)
        self.n = 0  # events decoded so far

    def count(self) -> int:
        return sum(len(p["ts"]) for p in self.pieces)

    def column(self, key: str, dtype) -> np.ndarray:
        return np.concatenate([p[key] for p in self.pieces]).astype(dtype, copy=False)


_I64 = 1 << 63


def _as_int(v, default=-1) -> int:
    """An id or number from a JSON value; ``default`` where it is missing, not a number,
    or beyond int64 (ids are only compared, so an unusable one is as good as absent).
    A string gives its first run of digits (``"stream 7"`` is 7)."""
    if isinstance(v, int):
        return int(v) if -_I64 <= v < _I64 else default
    if isinstance(v, float):
        return int(v) if -_I64 < v < _I64 else default  # NaN fails both comparisons
    if isinstance(v, str):
        m = _STREAM_NUM.search(v)
        if m and len(m.group(1)) <= 19:
            n = int(m.group(1))
            return n if n < _I64 else default
    return default


# CUPTI puts context-wide work (``Context Sync``) on stream id -1, written as uint32
_ALL_STREAMS = (-1, 0xFFFFFFFF)


def stream_label(stream: int) -> str:
    """A device lane's name: ``stream 7``, or what the pseudo-stream of context-wide
    synchronizations is."""
    return "context (all streams)" if stream in _ALL_STREAMS else f"stream {stream}"


def _ints(values: list) -> np.ndarray:
    """Integers from JSON values (see :func:`_as_int`); -1 where missing."""
    if None in values:
        values = [-1 if v is None else v for v in values]
    try:
        arr = np.array(values, np.int64)
        if arr.ndim == 1:
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    # numeric strings, lists, ints beyond int64: each distinct value converted once
    try:
        table = {v: _as_int(v) for v in set(values)}
    except TypeError:  # lists or objects among them
        return np.array([_as_int(v) for v in values], np.int64)
    return np.array([table[v] for v in values], np.int64)


def _intern(values: list, index: dict, table: list) -> np.ndarray:
    for v in dict.fromkeys(values):  # first-appearance order: deterministic tables
        if v not in index:
            index[v] = len(table)
            table.append(v)
    return np.array([index[v] for v in values], np.int32)


def _fold(events: list[_Event], c: _Columns, name: str) -> None:
    """Fold one piece of decoded events into columns, one list comprehension per field
    (the per-event Python work is a few attribute reads; the rest is numpy)."""
    c.n += len(events)
    xs = [e for e in events if e.ph == "X"]
    fl = [e for e in events if (e.ph == "s" or e.ph == "f") and e.cat in _FLOW_CATS]
    if fl:  # flows, columnar: only traces without correlation ids need them
        fts = [e.ts for e in fl]
        if None not in fts:
            try:
                c.flows.append((_ints([e.id for e in fl]), _ints([e.pid for e in fl]),
                                _ints([e.tid for e in fl]), np.array(fts, np.float64),
                                np.array([e.ph == "s" for e in fl], bool)))
            except ValueError:  # a time that is not a number: no flows
                pass
    if len(xs) + len(fl) < len(events):
        for e in events:
            if e.ph == "M":
                _fold_meta(e, c)
            elif e.ph == "i" and e.name == "[memory]" and e.args is not None:
                a = e.args
                add_memory(c.memory, e.ts, a.dev_type, a.dev_id, a.mem_bytes, a.mem_total)
    if not xs:
        return
    kind_of = _KIND_OF_CAT
    kinds = [kind_of.get(e.cat, -1) for e in xs]
    if -1 in kinds:  # categories we do not know: bookkeeping rows are dropped
        keep = []
        for e, k in zip(xs, kinds):
            if k >= 0:
                keep.append((e, k))
            elif e.cat in _SKIP_CATS or (isinstance(e.pid, str) and not e.pid.isdigit()):
                continue
            else:
                keep.append((e, Kind.OTHER))
        xs = [e for e, _ in keep]
        kinds = [k for _, k in keep]
        if not xs:
            return
    kind = np.array(kinds, np.int8)
    try:
        ts = np.array([e.ts for e in xs], np.float64)  # a missing time is NaN
    except ValueError:
        raise _not_a_number(events, xs, "ts", c.n, name) from None
    durs = [e.dur for e in xs]
    if None in durs:
        durs = [0.0 if d is None else d for d in durs]
    try:
        dur = np.array(durs, np.float64)
    except ValueError:
        raise _not_a_number(events, xs, "dur", c.n, name) from None
    no_args = _Args()
    args = [e.args or no_args for e in xs]
    is_dev = np.isin(kind, Kind.DEVICE)
    pid = _ints([e.pid for e in xs])
    tid = _ints([e.tid for e in xs])
    if is_dev.any():
        dv = _ints([a.device for a in args])
        st = _ints([a.stream for a in args])
        pid = np.where(is_dev & (dv >= 0), dv, pid)
        tid = np.where(is_dev & (st >= 0), st, tid)
    # Factorize (device?, pid, tid) with 1-D uniques (a row-wise unique sorts far slower).
    pu, pc = np.unique(pid, return_inverse=True)
    tu, tc = np.unique(tid, return_inverse=True)
    code = (is_dev.astype(np.int64) * len(pu) + pc.ravel()) * len(tu) + tc.ravel()
    cu, inv = np.unique(code, return_inverse=True)
    uniq = [(int(v // (len(pu) * len(tu))), int(pu[(v // len(tu)) % len(pu)]),
             int(tu[v % len(tu)])) for v in cu.tolist()]
    gid = np.empty(len(uniq), np.int32)
    for j, (d, p_, t_) in enumerate(uniq):
        key = ("dev" if d else "cpu", p_, t_)
        g = c.thread_index.get(key)
        if g is None:
            g = c.thread_index[key] = len(c.threads)
            c.threads.append(key)
        gid[j] = g
    thread = gid[inv.ravel()]
    name_id = _intern([e.name for e in xs], c.name_index, c.names)
    # Details: shapes of ops, collective sizes, copy sizes.
    dims = [bytes(a.dims) for a in args]
    for j in np.flatnonzero(is_dev).tolist():
        a = args[j]
        if a.nbytes is not None:
            dims[j] = f"{a.nbytes} bytes".encode()
    for j, a in enumerate(args):
        if a.coll is not None:
            dims[j] = f"collective {a.coll} in {a.in_n} out {a.out_n} {a.dtype or ''}".encode()
    dmap = c.detail_index
    for v in dict.fromkeys(dims):
        if v and v not in dmap:
            dmap[v] = len(c.details)
            c.details.append(v.decode(errors="replace"))
    dmap.setdefault(b"", 0)
    detail_id = np.array([dmap[v] for v in dims], np.int32)
    ext = _ints([a.ext if a.ext is not None else a.ext_old for a in args])
    corr = _ints([a.corr for a in args])
    rf = _ints([a.rf for a in args])
    c.pieces.append({"ts": ts, "dur": dur, "kind": kind, "thread": thread,
                     "name_id": name_id, "detail_id": detail_id, "ext": ext, "corr": corr,
                     "rf": rf})


def _not_a_number(events: list[_Event], xs: list[_Event], key: str, n: int,
                  name: str) -> TraceError:
    """The error for the first of ``xs`` whose time ``key`` is a string but not a number
    (``n`` counts the events up to the end of this piece)."""
    for e in xs:
        v = getattr(e, key)
        try:
            float(v if v is not None else 0.0)
        except ValueError:
            i = n - len(events) + next(j for j, x in enumerate(events) if x is e) + 1
            shown = v if len(v) <= 40 else v[:37] + "..."
            return TraceError(f"{name}: event {i}: '{key}' is not a number ({shown!r})")
    return TraceError(f"{name}: '{key}' is not a number")


def _fold_meta(e: _Event, c: _Columns) -> None:
    """A metadata (``"ph": "M"``) event: a thread's or a process's label."""
    a = e.args
    if a is None:
        return
    if e.name == "thread_name":
        c.thread_names[(_as_int(e.pid, 0), _as_int(e.tid, 0))] = str(a.name or "")
    elif e.name == "process_labels":
        c.process_labels[_as_int(e.pid, 0)] = str(a.labels or "")


def _rank_from(meta: dict, path: str) -> int | None:
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and info["rank"] >= 0:
        return int(info["rank"])
    m = re.search(r"(?:rank|worker|node|gpu|_r)[-_]?(\d+)", os.path.basename(path), re.I)
    return int(m.group(1)) if m else None


def parse_kineto_bytes(data: bytes, path: str = "trace.json", rank: int | None = None,
                       progress: Callable[[float, str], None] | None = None,
                       cancelled: Callable[[], bool] | None = None) -> KinetoTrace:
    """Parse the JSON text of one Kineto trace (see :func:`read_kineto`)."""
    name = os.path.basename(path)
    c = _Columns()
    split = _split_events(data)
    if split is not None:
        meta, pieces, count = split
        try:
            for j, piece in enumerate(pieces):
                check_cancelled(cancelled, name)
                _fold(_decode_events(piece, name, c.n), c, name)
                if progress is not None:
                    progress(0.3 + 0.6 * (j + 1) / max(count, 1), "reading events")
        except msgspec.DecodeError:  # a boundary inside a string: decode it whole
            c, split = _Columns(), None
    if split is None:
        check_cancelled(cancelled, name)
        meta, events = _decode_whole(data, name)
        check_cancelled(cancelled, name)
        _fold(events, c, name)
        del events
    if not c.count():
        raise TraceError(f"{name}: the trace has no timed events (empty trace)")
    if progress is not None:
        progress(0.92, "building columns")
    ts = c.column("ts", np.float64)
    if not np.isfinite(ts).all():
        raise TraceError(f"{name}: {int((~np.isfinite(ts)).sum())} event(s) have a missing "
                         "or non-finite timestamp ('ts')")
    dur = c.column("dur", np.float64)
    if not np.isfinite(dur).all():
        raise TraceError(f"{name}: some durations are not finite numbers")
    if (dur < 0).any():
        bad = int((dur < 0).sum())
        raise TraceError(f"{name}: {bad} event(s) have a negative duration ('dur', "
                         f"the first {float(dur[dur < 0][0]):g} us)")
    base = float(ts.min())
    kind = c.column("kind", np.int8)
    thread = c.column("thread", np.int32)
    is_dev = np.array([k[0] == "dev" for k in c.threads], bool)
    tnames = {}
    for t, key in enumerate(c.threads):
        if key[0] == "cpu":
            tnames[t] = c.thread_names.get(key[1:], f"thread {key[2]}")
        else:
            tnames[t] = stream_label(key[2])
    corr = c.column("corr", np.int64)
    dev_ev = is_dev[thread] if len(is_dev) else np.zeros(len(ts), bool)
    rt = kind == Kind.RUNTIME
    if c.flows and ((corr[dev_ev] < 0).any() or (rt.any() and (corr[rt] < 0).all())):
        # Only traces without correlation ids need the flows: id -> (pid, tid, ts), the
        # last one of an id winning, as when they are read one by one.
        fid, fpid, ftid, fts, fs = (np.concatenate(col) for col in zip(*c.flows))
        for sel, table in ((fs, c.flow_s), (~fs, c.flow_f)):
            table.update(zip(fid[sel].tolist(),
                             zip(fpid[sel].tolist(), ftid[sel].tolist(), fts[sel].tolist())))
    flow_starts = {}
    if c.flow_s:
        tindex = c.thread_index
        for fid, (pid, tid, fts) in c.flow_s.items():
            t = tindex.get(("cpu", pid, tid))
            if t is not None:
                flow_starts[fid] = (t, fts - base)
    trace = KinetoTrace(
        path=str(path), rank=-1, meta=meta, base_us=base, ts=ts - base, dur=dur, kind=kind,
        thread=thread, name_id=c.column("name_id", np.int32),
        detail_id=c.column("detail_id", np.int32), ext=c.column("ext", np.int64),
        corr=corr, rf=c.column("rf", np.int64),
        threads=list(c.threads), thread_is_device=is_dev, names=c.names,
        details=c.details, thread_names=tnames, flow_starts=flow_starts,
        bytes_read=len(data), memory=memory_counters(c.memory, base))
    _link_flows(trace, c.flow_f, base)
    r = rank if rank is not None else _rank_from(meta if isinstance(meta, dict) else {}, path)
    trace.rank = -1 if r is None else r
    return trace


def _link_flows(trace: KinetoTrace, flow_f: dict, base: float) -> None:
    """Give device events without a correlation id the id of the flow that ends on them."""
    missing = (trace.corr < 0) & trace.thread_is_device[trace.thread]
    if not missing.any() or not flow_f:
        return
    where = {(pid, tid, round(fts - base, 3)): fid for fid, (pid, tid, fts) in flow_f.items()}
    idx = np.flatnonzero(missing)
    thr = trace.thread[idx]
    pid = np.array([k[1] for k in trace.threads], np.int64)[thr].tolist()
    tid = np.array([k[2] for k in trace.threads], np.int64)[thr].tolist()
    found = [where.get((p, t, round(x, 3))) for p, t, x in zip(pid, tid, trace.ts[idx].tolist())]
    for i, fid in zip(idx.tolist(), found):
        if fid is not None:
            trace.corr[i] = fid


def read_kineto(path: str | os.PathLike, rank: int | None = None,
                progress: Callable[[float, str], None] | None = None,
                cancelled: Callable[[], bool] | None = None) -> KinetoTrace:
    """Read one Kineto trace file (plain or gzipped JSON).

    Parameters
    ----------
    path : the ``.json`` or ``.json.gz`` file
    rank : the rank it records (default: ``distributedInfo.rank``, else a number in the file
        name such as ``worker3`` or ``rank3``, else -1, to be numbered by the caller)
    progress : ``progress(fraction, stage)`` callback
    cancelled : polled between pieces; True raises :class:`Cancelled`

    Raises
    ------
    TraceError
        One line naming the file and what is wrong with it.
    """
    data = read_json_bytes(path, progress, cancelled)
    return parse_kineto_bytes(data, os.fspath(path), rank, progress, cancelled)


def is_gzip(path: str | os.PathLike) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def open_text(path: str | os.PathLike):
    return gzip.open(path, "rt") if is_gzip(path) else open(path)
