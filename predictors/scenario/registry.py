"""Block kinds: their parameters, defaults, ports and one-line summaries.

The registry describes *what* each block kind is; :mod:`predictors.model.workload` says how it
compiles to torch.  The GUI builds its palette and inspector from these descriptions.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["ParamSpec", "BlockKind", "BLOCK_KINDS", "block_kind", "default_params",
           "validate_params", "summarize", "DEFAULT_TABLE"]


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a block kind.

    ``type`` is one of ``int``, ``float``, ``str``, ``choice``, ``int_list``, ``tables``.
    ``minimum`` applies to numbers and to each entry of an ``int_list``.
    """

    name: str
    type: str
    default: Any
    doc: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple = ()
    optional: bool = False  # ``None`` is allowed


@dataclass(frozen=True)
class BlockKind:
    """A kind of model block, as the palette shows it."""

    name: str
    label: str
    category: str  # input | layer | interaction | loss
    doc: str
    params: tuple[ParamSpec, ...] = ()
    min_inputs: int = 1
    max_inputs: int | None = 1  # None: any number
    has_output: bool = True
    summary: Callable[[dict], str] = field(default=lambda p: "")


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1000.0
    return f"{n:.3g} TB"


def _tables_summary(p: dict) -> str:
    tables = p["tables"]
    total = sum(t["rows"] * t["dim"] * 4 for t in tables)
    fused = ", fused" if p.get("kernel") == "fused" else ""
    return f"{len(tables)} table{'s' if len(tables) != 1 else ''}, {_fmt_bytes(total)}{fused}"


DEFAULT_TABLE = {"rows": 100000, "dim": 64, "pooling": 20, "distribution": {"kind": "uniform"}}

BLOCK_KINDS: dict[str, BlockKind] = {k.name: k for k in [
    BlockKind(
        "dense_input", "Dense input", "input",
        "Dense (continuous) features of each sample: a float tensor [batch, features].",
        (ParamSpec("features", "int", 13, "number of dense features", minimum=1),),
        min_inputs=0, max_inputs=0,
        summary=lambda p: f"{p['features']} features"),
    BlockKind(
        "embedding_tables", "Embedding tables", "input",
        "Embedding tables with sparse gradients, one EmbeddingBag each or fused (kernel); "
        "pooling = lookups per sample.",
        (ParamSpec("tables", "tables", [dict(DEFAULT_TABLE)] * 4, "the embedding tables"),
         ParamSpec("mode", "choice", "sum", "pooling mode", choices=("sum", "mean")),
         ParamSpec("kernel", "choice", "per_table",
                   "lookup kernels: per_table, one EmbeddingBag per table (facebookresearch/"
                   "dlrm); fused, one lookup per dim for all of a rank's tables, as TorchRec "
                   "runs FBGEMM's table-batched embedding", choices=("per_table", "fused"))),
        min_inputs=0, max_inputs=0, summary=_tables_summary),
    BlockKind(
        "token_input", "Token input", "input",
        "Token ids [batch, seq_len] looked up in an Embedding(vocab, hidden); hidden comes "
        "from the transformer layer it feeds.",
        (ParamSpec("vocab", "int", 30522, "vocabulary size", minimum=1),
         ParamSpec("seq_len", "int", 128, "tokens per sample", minimum=1)),
        min_inputs=0, max_inputs=0,
        summary=lambda p: f"vocab {p['vocab']}, seq {p['seq_len']}"),
    BlockKind(
        "mlp", "MLP", "layer",
        "A Linear then the activation for every layer; the last layer takes `final` instead.",
        (ParamSpec("layers", "int_list", [512, 256, 64], "output width of each Linear",
                   minimum=1),
         ParamSpec("activation", "choice", "relu", "activation between layers",
                   choices=("relu", "gelu", "sigmoid", "tanh")),
         ParamSpec("final", "choice", None, "activation after the last layer",
                   choices=(None, "relu", "sigmoid"), optional=True)),
        summary=lambda p: "MLP " + "-".join(str(x) for x in p["layers"])),
    BlockKind(
        "interaction", "Interaction", "interaction",
        "dot: pairwise dot products of the bottom-MLP output and pooled embeddings (strictly "
        "lower triangle) concatenated with the dense vector, as facebookresearch/dlrm; "
        "cat: concatenation; dcn: concatenation then a low-rank DCNv2 cross network, as the "
        "MLPerf DLRM-DCNv2 reference.",
        (ParamSpec("op", "choice", "dot", "interaction kind", choices=("dot", "cat", "dcn")),
         ParamSpec("layers", "int", 3, "cross layers (dcn only)", minimum=1),
         ParamSpec("low_rank", "int", 512, "low-rank dimension (dcn only)", minimum=1)),
        min_inputs=2, max_inputs=None,
        summary=lambda p: (f"dcn x{p['layers']}, rank {p['low_rank']}" if p["op"] == "dcn"
                           else p["op"])),
    BlockKind(
        "transformer_layer", "Transformer layers", "layer",
        "`count` x TransformerEncoderLayer(hidden, heads, ffn, dropout, gelu, batch_first, "
        "norm_first).",
        (ParamSpec("hidden", "int", 768, "model width", minimum=1),
         ParamSpec("heads", "int", 12, "attention heads (must divide hidden)", minimum=1),
         ParamSpec("ffn", "int", 3072, "feed-forward width", minimum=1),
         ParamSpec("count", "int", 12, "number of layers", minimum=1, maximum=512),
         ParamSpec("dropout", "float", 0.1, "dropout probability", minimum=0.0, maximum=1.0)),
        summary=lambda p: f"{p['count']} x {p['hidden']}/{p['heads']}h/{p['ffn']}"),
    BlockKind(
        "lm_head", "LM head", "layer",
        "Linear(hidden, vocab) over every token.", (),
        summary=lambda p: "Linear(hidden, vocab)"),
    BlockKind(
        "loss", "Loss", "loss",
        "The training loss; cross_entropy after an lm_head is taken over every token.",
        (ParamSpec("kind", "choice", "bce", "loss function",
                   choices=("bce", "mse", "cross_entropy")),),
        has_output=False, summary=lambda p: p["kind"]),
]}


def block_kind(name: str) -> BlockKind:
    """The kind called ``name``; ``KeyError`` names the known kinds."""
    try:
        return BLOCK_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown block kind {name!r} (known: {', '.join(BLOCK_KINDS)})") from None


def default_params(kind: str) -> dict:
    """A fresh copy of the default parameters of ``kind``."""
    return {p.name: copy.deepcopy(p.default) for p in block_kind(kind).params}


# Sizes beyond this are no real model's and overflow torch's int64 size arithmetic.
MAX_SIZE = 1 << 40


def _check_number(spec: ParamSpec, value, where: str, errors: list, integer: bool):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)) or (
            integer and not (isinstance(value, int) or float(value).is_integer())):
        errors.append((where, f"expected {'an integer' if integer else 'a finite number'}, "
                              f"got {value!r}"))
        return None
    value = int(value) if integer else float(value)
    if integer and value > MAX_SIZE:
        errors.append((where, f"must be <= {MAX_SIZE:,}, got {value:,}"))
        return None
    if spec.minimum is not None and value < spec.minimum:
        what = "positive" if spec.minimum == 1 else f">= {spec.minimum}"
        errors.append((where, f"must be {what}, got {value!r}"))
    if spec.maximum is not None and value > spec.maximum:
        errors.append((where, f"must be <= {spec.maximum}, got {value!r}"))
    return value


def _check_table(t, where: str, errors: list) -> dict | None:
    if not isinstance(t, dict):
        errors.append((where, f"expected an object, got {t!r}"))
        return None
    out = dict(DEFAULT_TABLE, **t)
    for key in ("rows", "dim", "pooling"):
        out[key] = _check_number(ParamSpec(key, "int", 1, minimum=1), out[key],
                                  f"{where}.{key}", errors, True)
    dist = out.get("distribution")
    if not isinstance(dist, dict) or dist.get("kind") not in ("uniform", "zipf"):
        errors.append((f"{where}.distribution",
                       f"expected {{'kind': 'uniform'}} or {{'kind': 'zipf', 'alpha': a}}, "
                       f"got {dist!r}"))
    elif dist["kind"] == "zipf":
        alpha = dist.get("alpha")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
                or not 0 < alpha < math.inf:
            errors.append((f"{where}.distribution.alpha", f"must be a positive number, "
                                                          f"got {alpha!r}"))
    unknown = set(t) - set(DEFAULT_TABLE)
    if unknown:
        errors.append((where, f"unknown table field(s) {sorted(unknown)}"))
    return out


def validate_params(kind: str, params: dict, where: str) -> tuple[dict, list[tuple[str, str]]]:
    """Check ``params`` of a block of ``kind``; fill defaults.

    Returns the normalized parameters and a list of ``(field path, message)`` errors.
    """
    spec_by_name = {p.name: p for p in block_kind(kind).params}
    errors: list[tuple[str, str]] = []
    if not isinstance(params, dict):
        return default_params(kind), [(where, f"expected an object, got {params!r}")]
    for name in params:
        if name not in spec_by_name:
            errors.append((f"{where}.{name}", f"unknown parameter of {kind} "
                                              f"(known: {', '.join(spec_by_name) or 'none'})"))
    out = default_params(kind)
    for name, spec in spec_by_name.items():
        if name not in params:
            continue
        value, path = params[name], f"{where}.{name}"
        if value is None and spec.optional:
            out[name] = None
        elif spec.type in ("int", "float"):
            out[name] = _check_number(spec, value, path, errors, spec.type == "int")
        elif spec.type == "choice":
            if value not in spec.choices:
                errors.append((path, f"expected one of {list(spec.choices)}, got {value!r}"))
            out[name] = value
        elif spec.type == "int_list":
            if not isinstance(value, list) or not value:
                errors.append((path, f"expected a non-empty list of integers, got {value!r}"))
            else:
                out[name] = [_check_number(spec, v, f"{path}[{i}]", errors, True)
                             for i, v in enumerate(value)]
        elif spec.type == "tables":
            if not isinstance(value, list) or not value:
                errors.append((path, f"expected a non-empty list of tables, got {value!r}"))
            else:
                out[name] = [_check_table(t, f"{path}[{i}]", errors) for i, t in enumerate(value)]
        else:
            out[name] = value
    return out, errors


def summarize(kind: str, params: dict) -> str:
    """A short label such as ``MLP 512-256-64`` or ``12 tables, 1.2 GB``."""
    try:
        return block_kind(kind).summary(params)
    except Exception:  # a half-edited block still gets drawn
        return ""
