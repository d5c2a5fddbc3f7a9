"""Scenario files (format ``ml-dse/scenario``): load, validate, migrate and save.

A scenario is kept as plain JSON-like data.  :func:`validate_scenario` returns a normalized
copy (defaults filled in) or raises :class:`ScenarioError`, whose ``issues`` each name the
field at fault, e.g. ``model.nodes[2].params.layers[1]: must be positive, got 0``.  The
fields and their types are defined once, in :mod:`.definition`; this module checks the
format version and what types cannot say (the model's wiring, the platform graph).
"""
from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec
import networkx as nx
from msgspec import UNSET

from ..hardware.network import hosts_without_gpus
from ..hardware.platforms import GPU_MODELS, link_issues, resolve_platform
from ..hardware.specs import find_gpu_spec
from ..utils.fileio import atomic_write_bytes
from .definition import (
    DTYPES,
    FORMAT,
    INPUT_PIPELINES,
    OPTIMIZERS,
    PLATFORM_NODE_KINDS,
    REPLICATED,
    ROW_WISE,
    VERSION,
    BlockId,
    BlockKindName,
    Platform,
    Scenario,
)
from .registry import block_kind
from .typecheck import check, short_repr

__all__ = ["FORMAT", "VERSION", "ScenarioError", "Issue", "load_scenario", "read_scenario",
           "migrate_scenario", "save_scenario", "validate_scenario", "validate_platform",
           "scenario_to_json", "model_graph", "MIGRATIONS", "DTYPES", "OPTIMIZERS",
           "INPUT_PIPELINES", "ROW_WISE", "REPLICATED", "PLATFORM_NODE_KINDS"]

_BLOCK_FIELD = re.compile(r"model\.nodes\[(\d+)\]")

# MIGRATIONS[v] upgrades a version-v document to version v + 1.  Version 1 is the first;
# the next format change adds ``MIGRATIONS[1]`` and bumps VERSION.
MIGRATIONS: dict = {}


@dataclass(frozen=True)
class Issue:
    """One problem: the dotted field path, the message, and the model node it concerns."""

    field: str
    message: str
    node_id: str | None = None

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class ScenarioError(ValueError):
    """An invalid scenario.  ``issues`` lists every problem found."""

    def __init__(self, issues: list[Issue], source: str = ""):
        self.issues = list(issues)
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(prefix + "; ".join(str(i) for i in self.issues))


def _migrate(doc: dict, issues: list[Issue]) -> dict:
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        issues.append(Issue("version", f"expected an integer format version, "
                                       f"got {short_repr(version)}"))
        return doc
    if version > VERSION:
        issues.append(Issue("version", f"version {short_repr(version)} is newer than this "
                                       f"program understands ({VERSION}); please upgrade"))
        return doc
    while version < VERSION:
        if version not in MIGRATIONS:
            issues.append(Issue("version", f"no migration from version {version}"))
            return doc
        doc = MIGRATIONS[version](copy.deepcopy(doc))
        version += 1
        doc["version"] = version
    return doc


def _check_model(model, issues: list[Issue]) -> None:
    """The wiring of the model: ids are unique, edges join known blocks without loops,
    duplicates or cycles, every block has the inputs and outputs its kind allows, and
    there is a loss.  Blocks and edges whose ids are of the wrong type are left out (the
    type check reports them); a block of an unknown kind still counts as an id."""
    nodes = model.get("nodes") if isinstance(model, dict) else None
    edges = model.get("edges", []) if isinstance(model, dict) else []
    if not isinstance(nodes, list):
        return
    kinds: dict[str, str | None] = {}  # id -> kind (None: an unknown kind)
    index: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if not (isinstance(node, dict) and _is(node.get("id"), BlockId)):
            continue
        nid = node["id"]
        if nid in kinds:
            issues.append(Issue(f"model.nodes[{i}].id", f"duplicate block id {nid!r}", nid))
            continue
        kinds[nid] = node["kind"] if _is(node.get("kind"), BlockKindName) else None
        index[nid] = i
    graph = nx.DiGraph()
    graph.add_nodes_from(kinds)
    for i, edge in enumerate(edges if isinstance(edges, list) else []):
        where = f"model.edges[{i}]"
        if not (isinstance(edge, dict) and isinstance(edge.get("source"), str)
                and isinstance(edge.get("target"), str)):
            continue
        src, dst = edge["source"], edge["target"]
        missing = [(key, end) for key, end in (("source", src), ("target", dst))
                   if end not in kinds]
        for key, end in missing:
            issues.append(Issue(f"{where}.{key}", f"no block with id {end!r}"))
        if missing:
            continue
        if src == dst:
            issues.append(Issue(where, f"block {src!r} is connected to itself", src))
        elif graph.has_edge(src, dst):
            issues.append(Issue(where, f"duplicate edge {src!r} -> {dst!r}", dst))
        else:
            graph.add_edge(src, dst)
    if graph.number_of_nodes() and not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        path = " -> ".join([cycle[0][0]] + [v for _, v in cycle])
        issues.append(Issue("model.edges", f"the model graph has a cycle: {path}", cycle[0][0]))
    typed = {nid: kind for nid, kind in kinds.items() if kind is not None}
    for nid, name in typed.items():
        kind, where = block_kind(name), f"model.nodes[{index[nid]}]"
        n_in, n_out = graph.in_degree(nid), graph.out_degree(nid)
        if n_in < kind.min_inputs:
            issues.append(Issue(where, f"{kind.label} needs at least {kind.min_inputs} "
                                       f"input(s), has {n_in}", nid))
        if kind.max_inputs is not None and n_in > kind.max_inputs:
            issues.append(Issue(where, f"{kind.label} takes at most {kind.max_inputs} "
                                       f"input(s), has {n_in}", nid))
        if not kind.has_output and n_out:
            issues.append(Issue(where, f"{kind.label} has no output, but feeds {n_out} "
                                       f"block(s)", nid))
    if typed and "loss" not in typed.values():
        issues.append(Issue("model.nodes", "the model has no loss block"))


def _is(value, tp) -> bool:
    """Whether ``value`` is of type ``tp`` (of :mod:`.definition`)."""
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


def _check_platform(platform: Platform, issues: list[Issue]) -> None:
    """What the types of a custom platform graph cannot say: unique device ids, known GPU
    models (a short name or any name in the GPU table), one GPU model, GPUs that divide
    evenly over the hosts, links between devices that exist, no GPU without a link among
    several, link kinds their ends can take, and no host without GPUs."""
    if platform.preset is not UNSET:
        return
    where = "platform"
    ids: set[str] = set()
    models: list[tuple[int, str]] = []
    for i, node in enumerate(platform.nodes):
        if node.id in ids:
            issues.append(Issue(f"{where}.nodes[{i}].id", f"duplicate device id {node.id!r}"))
        ids.add(node.id)
        if node.kind == "gpu":
            model = "a100" if node.params is UNSET or node.params.model is UNSET \
                else node.params.model
            if model not in GPU_MODELS and find_gpu_spec(model) is None:
                issues.append(Issue(f"{where}.nodes[{i}].params.model", f"unknown GPU "
                                    f"{model!r} (known: {', '.join(GPU_MODELS)} or a name in "
                                    f"the GPU table)"))
            models.append((i, model))
    for i, model in models[1:]:
        if model != models[0][1]:
            issues.append(Issue(f"{where}.nodes[{i}].params.model",
                                f"{model!r} differs from the first GPU's {models[0][1]!r}: "
                                "a platform has one GPU model"))
            break
    hosts = sum(1 for n in platform.nodes if n.kind == "node")
    if models and hosts and len(models) % hosts:
        issues.append(Issue(f"{where}.nodes", f"{len(models)} GPUs do not divide evenly over "
                                              f"{hosts} nodes"))
    for i, edge in enumerate(platform.edges or []):
        for key in ("source", "target"):
            if getattr(edge, key) not in ids:
                issues.append(Issue(f"{where}.edges[{i}].{key}", "no device with that id"))
    graph = msgspec.to_builtins(platform)
    linked = {x for e in graph.get("edges") or [] for x in (e["source"], e["target"])}
    for i, node in enumerate(graph["nodes"]):
        if len(models) > 1 and node["kind"] == "gpu" and node["id"] not in linked:
            issues.append(Issue(f"{where}.nodes[{i}]", f"{node['id']} has no link to the "
                                "other GPUs: draw its NVLink/NVSwitch or PCIe link"))
    for i, message in link_issues(graph):
        issues.append(Issue(f"{where}.edges[{i}].kind", message))
    for i, host in hosts_without_gpus(graph):
        issues.append(Issue(f"{where}.nodes[{i}]", f"host {host!r} has no GPUs: every group "
                                                   "of linked GPUs sits on another host (link "
                                                   "GPUs to it, or delete it and its NICs)"))


def _platform_dict(platform: Platform) -> dict:
    """A platform as plain data: a preset (with its threads and ranks), or the custom
    graph."""
    if platform.preset is not UNSET:
        out = {"preset": platform.preset}
        if platform.threads is not UNSET:
            out["threads"] = platform.threads
        if platform.ranks is not UNSET:
            out["ranks"] = platform.ranks
        if platform.host is not UNSET:
            out["host"] = platform.host
        return out
    return msgspec.to_builtins(platform)


def _issues(problems: list[tuple[str, str]], doc: dict) -> list[Issue]:
    """Type problems as issues; those inside a block name the block."""
    nodes = doc["model"].get("nodes") if isinstance(doc.get("model"), dict) else None
    out = []
    for where, message in problems:
        node_id = None
        block = _BLOCK_FIELD.match(where)
        if block and isinstance(nodes, list) and int(block.group(1)) < len(nodes):
            node = nodes[int(block.group(1))]
            node_id = node.get("id") if isinstance(node, dict) else None
        out.append(Issue(where, message, node_id if _is(node_id, BlockId) else None))
    return out


def validate_platform(platform, source: str = "") -> dict:
    """Validate a scenario's ``platform`` section on its own; raise :class:`ScenarioError`."""
    typed, problems = check(platform, Platform, "platform")
    issues = [Issue(where, message) for where, message in problems]
    if typed is not None:
        _check_platform(typed, issues)
    if issues:
        raise ScenarioError(issues, source)
    return _platform_dict(typed)


def validate_scenario(doc, source: str = "") -> dict:
    """Validate and normalize a scenario document; raise :class:`ScenarioError`.

    The format and version come first (an older version is upgraded), then the types of
    every field (:mod:`.definition`), then what types cannot say: the model's wiring, the
    platform graph, the ranks of an explicit embedding sharding."""
    doc = migrate_scenario(doc, source)
    typed, problems = check(doc, Scenario, "")
    issues = _issues(problems, doc)
    _check_model(doc.get("model"), issues)
    platform = typed.platform if typed is not None else check(
        doc.get("platform", {"preset": "local-cpu"}), Platform, "platform")[0]
    if platform is not None:
        _check_platform(platform, issues)
    if issues:
        raise ScenarioError(issues, source)
    out = {
        "format": FORMAT, "version": VERSION, "name": typed.name,
        "model": {"nodes": [{"id": b.id, "kind": b.__struct_config__.tag,
                             "params": msgspec.to_builtins(b.params)} for b in typed.model.nodes],
                  "edges": msgspec.to_builtins(typed.model.edges)},
        "platform": _platform_dict(typed.platform),
        "training": msgspec.to_builtins(typed.training),
        "parallelism": msgspec.to_builtins(typed.parallelism),
        "layout": copy.deepcopy(doc.get("layout", {})),
    }
    _per_gpu_batch(out)
    _check_sharding_ranks(out, issues)
    if issues:
        raise ScenarioError(issues, source)
    return out


def _per_gpu_batch(out: dict) -> None:
    """``training.batch_per_gpu`` sets the global batch from the platform's ranks, so the
    batch stays per rank when the platform changes (``batch_size`` is then derived)."""
    per_gpu = out["training"].get("batch_per_gpu")
    if per_gpu is not None:
        out["training"]["batch_size"] = per_gpu * resolve_platform(out["platform"]).ranks


def _check_sharding_ranks(doc: dict, issues: list[Issue]) -> None:
    """An explicit sharding may only place tables on ranks the platform has."""
    sharding = doc["parallelism"]["embedding_sharding"]
    if not isinstance(sharding, dict):
        return
    platform = resolve_platform(doc["platform"])
    ranks, per_node = platform.ranks, platform.ranks_per_node
    tables = {f"{n['id']}/{j}" for n in doc["model"]["nodes"]
              if n["kind"] == "embedding_tables" for j in range(len(n["params"]["tables"]))}
    dims = {f"{n['id']}/{j}": t["dim"] for n in doc["model"]["nodes"]
            if n["kind"] == "embedding_tables" for j, t in enumerate(n["params"]["tables"])}
    for key, rank in sharding.items():
        if key not in tables:
            some = ", ".join(sorted(tables)[:3]) or "the model has none"
            issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                f"no such table: keys are '<block id>/<table index>' "
                                f"({some})"))
            continue
        if isinstance(rank, dict):
            on = ([rank.get("rank")] if rank.get("kind") == "tw"
                  else rank.get("ranks") if rank.get("kind") in ("cw", "twrw") else [])
        else:
            on = [] if rank in (ROW_WISE, REPLICATED) else [rank]
        if any(r >= ranks for r in on):
            issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                f"expected ranks from 0 to {ranks - 1} (the platform has "
                                f"{ranks}), {ROW_WISE!r} (row-wise over all of them) or "
                                f"{REPLICATED!r} (on every rank), got {rank!r}"))
        elif isinstance(rank, dict) and rank.get("kind") == "twrw":
            if sorted(on) != list(range(on[0] // per_node * per_node,
                                        on[0] // per_node * per_node + per_node)):
                issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                    f"a table-row-wise table's ranks are one node's, all of "
                                    f"them (nodes of {per_node} here: 0-{per_node - 1}, ...), "
                                    f"got {on}"))
        elif isinstance(rank, dict) and rank.get("kind") == "cw":
            if len(set(on)) != len(on):
                issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                    f"a column-wise table's ranks must differ, got {on}"))
            elif dims[key] % len(on):
                issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                    f"the table's dim {dims[key]} does not split into "
                                    f"{len(on)} equal column shards"))


def load_scenario(path: str | os.PathLike) -> dict:
    """Read and validate a scenario file; every error names the file and the field."""
    return validate_scenario(read_scenario(path), str(path))


def migrate_scenario(doc, source: str = "") -> dict:
    """A scenario document of any known version, upgraded to this one but not validated
    (what an editor can open while the user fixes it); :class:`ScenarioError` where it is
    not a scenario at all (not an object, another format, an unknown version)."""
    if not isinstance(doc, dict):
        raise ScenarioError([Issue("(document)", "expected a JSON object")], source)
    if doc.get("format") != FORMAT:
        raise ScenarioError([Issue("format", f"expected {FORMAT!r}, got "
                                             f"{short_repr(doc.get('format'))}")], source)
    issues: list[Issue] = []
    doc = _migrate(doc, issues)
    if issues:
        raise ScenarioError(issues, source)
    return doc


def read_scenario(path: str | os.PathLike):
    """The JSON of a scenario file, not validated; file and JSON errors as
    :class:`ScenarioError` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError([Issue("(file)", exc.strerror or str(exc))], str(path)) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError([Issue("(file)", f"not UTF-8 text (byte {exc.start})")],
                            str(path)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError([Issue("(file)", f"not valid JSON: {exc.msg} at line {exc.lineno}, "
                                             f"column {exc.colno}")], str(path)) from None
    except (ValueError, RecursionError) as exc:  # a number too long, arrays nested too deep
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ScenarioError([Issue("(file)", f"not readable JSON: {why}")], str(path)) from None
    return doc


def scenario_to_json(doc: dict) -> str:
    """The canonical text of a scenario."""
    return json.dumps(doc, indent=2) + "\n"


def save_scenario(doc: dict, path: str | os.PathLike) -> None:
    """Write atomically: a temporary file in the same folder, then a rename."""
    atomic_write_bytes(path, scenario_to_json(doc).encode("utf-8"))


def model_graph(doc: dict) -> nx.DiGraph:
    """The block graph of a validated scenario: nodes carry ``kind`` and ``params``."""
    graph = nx.DiGraph()
    for node in doc["model"]["nodes"]:
        graph.add_node(node["id"], kind=node["kind"], params=node["params"])
    graph.add_edges_from((e["source"], e["target"]) for e in doc["model"]["edges"])
    return graph
