"""The scenario format (``ml-dse/scenario``) as types: one msgspec definition of every
section and field.

:func:`predictors.scenario.format.validate_scenario` checks a document against these types
(:mod:`.typecheck` words their errors as one line per field) and then checks what types
cannot say: the wiring of the model graph, the platform graph, the ranks of an explicit
sharding.  :mod:`.schema` turns the types into the JSON Schema in
``docs/scenario-format.md``.

The parameters of each block kind come from the registry's :class:`~.registry.ParamSpec`
(which also drives the GUI's inspector): :func:`params_type` makes one Struct per kind from
them, so a parameter is described in one place.

Besides the types' constraints, each field may carry ``Meta.extra`` entries that word its
errors: ``expected`` (what the field holds, for "expected ..., got ..."), ``unknown`` (what
an unknown value of a closed set is called, e.g. ``block kind``) and ``fields`` (what an
unknown key of an object is called, e.g. ``training setting``).
"""
import copy
import sys
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from ..hardware.platforms import GPU_MODELS, LINK_KINDS, PLATFORM_PRESETS
from .registry import BLOCK_KINDS, DEFAULT_TABLE, MAX_SIZE, BlockKind, ParamSpec

__all__ = ["FORMAT", "VERSION", "DTYPES", "OPTIMIZERS", "INPUT_PIPELINES", "ROW_WISE",
           "REPLICATED", "PLATFORM_NODE_KINDS",
           "Scenario", "Model", "Block", "BlockId", "BlockKindName", "BLOCK_TYPES",
           "PARAMS_TYPES", "Edge", "Table", "Uniform", "Zipf", "Platform", "Device",
           "DeviceParams", "Link", "Training", "TRAINING_DEFAULTS", "Parallelism",
           "SCENARIO_DECODER", "params_type"]

FORMAT = "ml-dse/scenario"
VERSION = 1
DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("sgd", "adam", "adamw", "adagrad")
INPUT_PIPELINES = ("resident", "torchrec")
ROW_WISE = "rw"   # an embedding_sharding value: the table's rows split over every rank
REPLICATED = "dp"  # an embedding_sharding value: the table on every rank (data parallel)
PLATFORM_NODE_KINDS = ("cpu", "gpu", "node", "nvswitch", "nic", "pcie_switch")


def _meta(description: str | None = None, *, expected: str | None = None,
          unknown: str | None = None, fields: str | None = None, **constraints) -> Meta:
    """A ``Meta`` with a description, constraints and the error wording (see the module)."""
    extra = {k: v for k, v in (("expected", expected), ("unknown", unknown),
                               ("fields", fields)) if v}
    return Meta(description=description, extra=extra or None, **constraints)


# A float that is a real number: JSON Schema has no "finite", so the bound says it.
FLOAT_MAX = sys.float_info.max
Size = Annotated[int, Meta(ge=1, le=MAX_SIZE)]
PositiveInt = Annotated[int, Meta(ge=1)]
PositiveNumber = Annotated[float, Meta(gt=0, le=FLOAT_MAX)]
NonEmptyString = Annotated[str, Meta(min_length=1)]


# ---- the model: blocks (parameters from the registry) and edges -------------------------

class Uniform(Struct, tag_field="kind", tag="uniform"):
    """Every row is looked up equally often."""


class Zipf(Struct, tag_field="kind", tag="zipf"):
    """Lookups follow a Zipf law: index = Zipf rank - 1, truncated to the rows."""

    alpha: Annotated[PositiveNumber, Meta(description="the Zipf exponent")]


Distribution = Annotated[
    Uniform | Zipf,
    _meta("how the lookups spread over the rows",
          expected="{'kind': 'uniform'} or {'kind': 'zipf', 'alpha': a}")]


class Table(Struct, forbid_unknown_fields=True):
    """One embedding table."""

    rows: Annotated[Size, Meta(description="rows of the table")] = DEFAULT_TABLE["rows"]
    dim: Annotated[Size, Meta(description="embedding width")] = DEFAULT_TABLE["dim"]
    pooling: Annotated[Size, Meta(description="lookups per sample")] = DEFAULT_TABLE["pooling"]
    distribution: Distribution = field(default_factory=Uniform)


def _param_type(spec: ParamSpec):
    """The type of one block parameter, from its :class:`ParamSpec`."""
    lo, hi = spec.minimum, spec.maximum
    if spec.type == "int":
        t = Annotated[int, Meta(ge=None if lo is None else int(lo),
                                le=MAX_SIZE if hi is None else min(int(hi), MAX_SIZE))]
    elif spec.type == "float":
        t = Annotated[float, Meta(ge=lo, le=FLOAT_MAX if hi is None else hi)]
    elif spec.type == "choice":
        t = Literal[spec.choices]
    elif spec.type == "int_list":
        item = Annotated[int, Meta(ge=None if lo is None else int(lo), le=MAX_SIZE)]
        t = Annotated[list[item], _meta(min_length=1, expected="a non-empty list of integers")]
    elif spec.type == "tables":
        t = Annotated[list[Table], _meta(min_length=1, expected="a non-empty list of tables")]
    elif spec.type == "str":
        t = str
    else:
        t = Any
    if spec.optional and not (spec.type == "choice" and None in spec.choices):
        t = t | None
    return Annotated[t, Meta(description=spec.doc or None,
                             extra_json_schema={"default": spec.default})]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def params_type(kind: BlockKind) -> type[Struct]:
    """The parameters of a block kind as a Struct (defaults filled, unknown names refused)."""
    fields = []
    for spec in kind.params:
        t = _param_type(spec)
        if isinstance(spec.default, (list, dict)):
            fields.append((spec.name, t, field(
                default_factory=lambda d=spec.default, t=t: msgspec.convert(copy.deepcopy(d), t))))
        else:
            fields.append((spec.name, t, spec.default))
    cls = msgspec.defstruct(f"{_camel(kind.name)}Params", fields, forbid_unknown_fields=True,
                            module=__name__)
    cls.__doc__ = f"The parameters of a `{kind.name}` block."
    return cls


BlockId = Annotated[NonEmptyString, Meta(description="the block's name, unique in the model; "
                                                    "edges refer to it")]
BlockKindName = Literal[tuple(BLOCK_KINDS)]


def _block_type(kind: BlockKind, params: type[Struct]) -> type[Struct]:
    cls = msgspec.defstruct(
        f"{_camel(kind.name)}Block",
        [("id", BlockId),
         ("params", Annotated[params, _meta(fields=f"parameter of {kind.name}")],
          field(default_factory=params))],
        tag_field="kind", tag=kind.name, module=__name__)
    cls.__doc__ = f"{kind.label}: {kind.doc}"
    return cls


PARAMS_TYPES: dict[str, type[Struct]] = {name: params_type(k) for name, k in BLOCK_KINDS.items()}
BLOCK_TYPES: dict[str, type[Struct]] = {name: _block_type(k, PARAMS_TYPES[name])
                                        for name, k in BLOCK_KINDS.items()}
Block = Annotated[Union[tuple(BLOCK_TYPES.values())],  # noqa: UP007 - a union of many
                  _meta("a block: its id, its kind and the kind's parameters",
                        unknown="block kind")]


class Edge(Struct):
    """The output of `source` feeds `target`."""

    source: Annotated[str, Meta(description="the id of the feeding block")]
    target: Annotated[str, Meta(description="the id of the fed block")]


class Model(Struct):
    """The model graph: blocks and the edges between them (a DAG ending in a loss)."""

    nodes: Annotated[list[Block], _meta(min_length=1, expected="a non-empty list of blocks")]
    edges: Annotated[list[Edge], _meta(expected="a list of edges")] = []


# ---- the platform: a preset, or a graph of devices and links ----------------------------

class DeviceParams(Struct):
    """A device's settings: a CPU's threads, a GPU's model."""

    threads: Annotated[PositiveInt, Meta(description="threads (cpu)")] | UnsetType = UNSET
    model: Annotated[str, Meta(description="GPU model (gpu): " + ", ".join(GPU_MODELS)
                                           + " or a name in the GPU table; "
                                             "one model per platform")] | UnsetType = UNSET


class Device(Struct):
    """A device of a custom platform."""

    id: Annotated[NonEmptyString, Meta(description="unique in the platform")]
    kind: Annotated[Literal[PLATFORM_NODE_KINDS], Meta(description="node: a host")]
    params: DeviceParams | UnsetType = UNSET


class Link(Struct):
    """A link between two devices of a custom platform."""

    source: Annotated[str, Meta(description="a device id")]
    target: Annotated[str, Meta(description="a device id")]
    kind: Annotated[Literal[tuple(LINK_KINDS)], _meta(unknown="link kind")]


class Platform(Struct):
    """What the model trains on: a preset (with `threads` and `ranks` for `local-cpu`), or
    a custom graph of devices (`nodes`) and links (`edges`); a preset wins over a graph."""

    preset: Annotated[Literal[tuple(PLATFORM_PRESETS)],
                      _meta("a bundled platform", unknown="preset")] | UnsetType = UNSET
    threads: Annotated[PositiveInt, Meta(description="CPU threads of a preset")] | UnsetType \
        = UNSET
    ranks: Annotated[PositiveInt, Meta(
        description="processes of `local-cpu`, joined by gloo (each with `threads`)")] \
        | UnsetType = UNSET
    nodes: Annotated[list[Device], _meta(min_length=1, expected="a non-empty list of devices")
                     ] | UnsetType = UNSET
    edges: Annotated[list[Link], _meta(expected="a list of links")] | UnsetType = UNSET
    host: Annotated[NonEmptyString, Meta(
        description="the host whose CPU dispatches a GPU step: a name of the host catalogue "
                    "(resources/hosts) or a host file; default public-pool")] | UnsetType = UNSET

    def __post_init__(self):
        if self.preset is UNSET and self.nodes is UNSET:
            raise ValueError("expected {'preset': NAME} or {'nodes': [...], 'edges': [...]}")
        if self.ranks is not UNSET and self.preset != "local-cpu":
            raise ValueError("ranks: only the local-cpu preset runs several processes "
                             "(a GPU platform's ranks are its GPUs)")


# ---- training, parallelism and the document ----------------------------------------------

class Training(Struct, forbid_unknown_fields=True):
    """How the model trains."""

    batch_size: Annotated[Size, Meta(description="the global batch size")] = 128
    batch_per_gpu: Annotated[Size, Meta(
        description="the batch of each rank; when given, batch_size is derived: this "
                    "times the platform's ranks")] | UnsetType = UNSET
    optimizer: Annotated[Literal[OPTIMIZERS], Meta(
        description="sgd over every parameter; adam, adamw or adagrad over the dense "
                    "parameters, the embedding tables keeping one sparse row update (as "
                    "FBGEMM's fused lookups apply Adagrad inside their backward)")] = "sgd"
    dtype: Literal[DTYPES] = "float32"
    lr: Annotated[PositiveNumber, Meta(description="the learning rate")] = 0.01
    input_pipeline: Annotated[Literal[INPUT_PIPELINES], Meta(
        description="resident: the batch is on the device when the step starts; torchrec: "
                    "on GPUs, TorchRec's TrainPipelineSparseDist, which in each step copies "
                    "the next batch from the host and sends its sparse features to the "
                    "ranks that hold their tables")] = "resident"


# each training setting's default, for editors that show a setting a document leaves out
TRAINING_DEFAULTS = {f.name: f.default for f in msgspec.structs.fields(Training)
                     if f.default is not msgspec.NODEFAULT and f.default is not UNSET}


RankNumber = Annotated[int, Meta(ge=0)]


class TableWise(Struct, tag_field="kind", tag="tw", forbid_unknown_fields=True):
    """The whole table on one rank."""

    rank: RankNumber


class RowWise(Struct, tag_field="kind", tag=ROW_WISE, forbid_unknown_fields=True):
    """The table's rows split over every rank."""


class DataParallel(Struct, tag_field="kind", tag=REPLICATED, forbid_unknown_fields=True):
    """The table on every rank, its gradients all-reduced."""


class ColumnWise(Struct, tag_field="kind", tag="cw", forbid_unknown_fields=True):
    """The table's dim cut into equal shards, one on each of ``ranks``."""

    ranks: Annotated[list[RankNumber], _meta(min_length=2, expected="two or more ranks")]


class TableRowWise(Struct, tag_field="kind", tag="twrw", forbid_unknown_fields=True):
    """The table's rows split over the ranks of one node (all of them), summed there,
    then sent across the nodes."""

    ranks: Annotated[list[RankNumber], _meta(min_length=2, expected="a node's ranks")]


Rank = Annotated[RankNumber | Literal[ROW_WISE, REPLICATED] | TableWise | RowWise
                 | DataParallel | ColumnWise | TableRowWise,
                 _meta("a rank, 'rw' (the table's rows split over every rank), 'dp' (the "
                       "table on every rank, its gradients all-reduced) or an object: "
                       "{'kind': 'tw', 'rank': r}, {'kind': 'rw'}, {'kind': 'dp'}, "
                       "{'kind': 'cw', 'ranks': [r, ...]} (the dim cut into equal shards), "
                       "{'kind': 'twrw', 'ranks': [r, ...]} (the rows split over one "
                       "node's ranks)",
                       expected=f"a rank (0, 1, ...), {ROW_WISE!r}, {REPLICATED!r} or "
                                f"{{'kind': 'tw'|'rw'|'dp'|'cw'|'twrw', ...}}")]


class Parallelism(Struct, forbid_unknown_fields=True):
    """How the model is spread over the ranks."""

    embedding_sharding: Annotated[
        Literal["auto"] | dict[str, Rank],
        _meta("'auto', or an object mapping tables ('<block id>/<table index>') to ranks",
              expected="'auto' or an object mapping tables to ranks")] = "auto"


class Scenario(Struct, kw_only=True):
    """A scenario: a model, the platform it trains on, and how it trains."""

    format: Literal[FORMAT]
    version: Annotated[Literal[VERSION], Meta(description="the format version; older versions "
                                                          "are upgraded on load")]
    name: str = ""
    model: Annotated[Model, _meta(expected="an object with 'nodes' and 'edges'")]
    platform: Annotated[Platform, _meta(expected="{'preset': NAME} or {'nodes', 'edges'}"),
                        Meta(extra_json_schema={"default": {"preset": "local-cpu"}})] \
        = field(default_factory=lambda: Platform(preset="local-cpu"))
    training: Annotated[Training, _meta(fields="training setting")] = \
        field(default_factory=Training)
    parallelism: Annotated[Parallelism, _meta(fields="parallelism setting")] = \
        field(default_factory=Parallelism)
    layout: Annotated[dict[str, Any], _meta("canvas positions; the predictor ignores them",
                                            expected="an object of canvas positions")] = {}


SCENARIO_DECODER = msgspec.json.Decoder(Scenario)
