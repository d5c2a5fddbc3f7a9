"""Scenario files (format ``ml-dse/scenario``): load, validate, migrate and save.

A scenario is kept as plain JSON-like data.  :func:`validate_scenario` returns a normalized
copy (defaults filled in) or raises :class:`ScenarioError`, whose ``issues`` each name the
field at fault, e.g. ``model.nodes[2].params.layers[1]: must be positive, got 0``.
"""
from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from ..hardware.platforms import (
    GPU_MODELS,
    LINK_KINDS,
    PLATFORM_PRESETS,
    resolve_platform,
)
from ..hardware.specs import find_gpu_spec
from ..utils.fileio import atomic_write_bytes
from .registry import BLOCK_KINDS, MAX_SIZE, block_kind, validate_params

__all__ = ["FORMAT", "VERSION", "ScenarioError", "Issue", "load_scenario", "read_scenario",
           "migrate_scenario", "save_scenario", "validate_scenario", "validate_platform",
           "scenario_to_json", "model_graph", "MIGRATIONS", "DTYPES", "OPTIMIZERS", "ROW_WISE"]

FORMAT = "ml-dse/scenario"
VERSION = 1
DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("sgd", "adam", "adamw")
ROW_WISE = "rw"   # an embedding_sharding value: the table's rows split over every rank
PLATFORM_NODE_KINDS = ("cpu", "gpu", "node", "nvswitch", "nic", "pcie_switch")

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
        issues.append(Issue("version", f"expected an integer format version, got {version!r}"))
        return doc
    if version > VERSION:
        issues.append(Issue("version", f"version {version} is newer than this program "
                                       f"understands ({VERSION}); please upgrade"))
        return doc
    while version < VERSION:
        if version not in MIGRATIONS:
            issues.append(Issue("version", f"no migration from version {version}"))
            return doc
        doc = MIGRATIONS[version](copy.deepcopy(doc))
        version += 1
        doc["version"] = version
    return doc


def _validate_model(model, issues: list[Issue]) -> dict:
    if not isinstance(model, dict):
        issues.append(Issue("model", "expected an object with 'nodes' and 'edges'"))
        return {"nodes": [], "edges": []}
    nodes_in, edges_in = model.get("nodes"), model.get("edges", [])
    if not isinstance(nodes_in, list) or not nodes_in:
        issues.append(Issue("model.nodes", "expected a non-empty list of blocks"))
        nodes_in = []
    if not isinstance(edges_in, list):
        issues.append(Issue("model.edges", "expected a list of edges"))
        edges_in = []
    nodes, kinds, index = [], {}, {}
    for i, node in enumerate(nodes_in):
        where = f"model.nodes[{i}]"
        if not isinstance(node, dict):
            issues.append(Issue(where, f"expected an object, got {node!r}"))
            continue
        nid, kind = node.get("id"), node.get("kind")
        if not isinstance(nid, str) or not nid:
            issues.append(Issue(f"{where}.id", f"expected a non-empty string, got {nid!r}"))
            continue
        if nid in kinds:
            issues.append(Issue(f"{where}.id", f"duplicate block id {nid!r}", nid))
            continue
        if not isinstance(kind, str) or kind not in BLOCK_KINDS:
            issues.append(Issue(f"{where}.kind", f"unknown block kind {kind!r} (known: "
                                                 f"{', '.join(BLOCK_KINDS)})", nid))
            kinds[nid] = None
            continue
        params, errs = validate_params(kind, node.get("params", {}), f"{where}.params")
        issues.extend(Issue(f, m, nid) for f, m in errs)
        kinds[nid] = kind
        index[nid] = i
        nodes.append({"id": nid, "kind": kind, "params": params})
    edges, graph = [], nx.DiGraph()
    graph.add_nodes_from(kinds)
    for i, edge in enumerate(edges_in):
        where = f"model.edges[{i}]"
        if not isinstance(edge, dict):
            issues.append(Issue(where, f"expected an object, got {edge!r}"))
            continue
        src, dst = edge.get("source"), edge.get("target")
        bad = False
        for key, end in (("source", src), ("target", dst)):
            if not isinstance(end, str) or end not in kinds:
                issues.append(Issue(f"{where}.{key}", f"no block with id {end!r}"))
                bad = True
        if bad:
            continue
        if src == dst:
            issues.append(Issue(where, f"block {src!r} is connected to itself", src))
            continue
        if graph.has_edge(src, dst):
            issues.append(Issue(where, f"duplicate edge {src!r} -> {dst!r}", dst))
            continue
        graph.add_edge(src, dst)
        edges.append({"source": src, "target": dst})
    if graph.number_of_nodes() and not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        path = " -> ".join([cycle[0][0]] + [v for _, v in cycle])
        issues.append(Issue("model.edges", f"the model graph has a cycle: {path}", cycle[0][0]))
    for node in nodes:
        kind, nid = block_kind(node["kind"]), node["id"]
        where = f"model.nodes[{index[nid]}]"
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
    if nodes and not any(n["kind"] == "loss" for n in nodes):
        issues.append(Issue("model.nodes", "the model has no loss block"))
    return {"nodes": nodes, "edges": edges}


def _validate_platform(platform, issues: list[Issue]) -> dict:
    if not isinstance(platform, dict):
        issues.append(Issue("platform", "expected {'preset': NAME} or {'nodes', 'edges'}"))
        return {"preset": "local-cpu"}
    if "preset" in platform:
        out = {"preset": platform["preset"]}
        if not isinstance(platform["preset"], str) or platform["preset"] not in PLATFORM_PRESETS:
            issues.append(Issue("platform.preset", f"unknown preset {platform['preset']!r} "
                                                   f"(known: {', '.join(PLATFORM_PRESETS)})"))
        if "threads" in platform:
            t = platform["threads"]
            if isinstance(t, bool) or not isinstance(t, int) or t < 1:
                issues.append(Issue("platform.threads", f"must be a positive integer, got {t!r}"))
            out["threads"] = t
        return out
    nodes = platform.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        issues.append(Issue("platform.nodes", "expected a non-empty list of devices"))
        return {"preset": "local-cpu"}
    ids = set()
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or node.get("kind") not in PLATFORM_NODE_KINDS:
            issues.append(Issue(f"platform.nodes[{i}].kind", f"expected one of "
                                f"{list(PLATFORM_NODE_KINDS)}, got {node!r}"))
            continue
        if not isinstance(node.get("id"), str) or not node["id"]:
            issues.append(Issue(f"platform.nodes[{i}].id", f"expected a non-empty string, "
                                                           f"got {node.get('id')!r}"))
            continue
        if node["id"] in ids:
            issues.append(Issue(f"platform.nodes[{i}].id", f"duplicate device id "
                                                           f"{node['id']!r}"))
        ids.add(node["id"])
        _validate_device_params(node, f"platform.nodes[{i}].params", issues)
    models = [(i, (n.get("params") or {}).get("model", "a100")) for i, n in enumerate(nodes)
              if isinstance(n, dict) and n.get("kind") == "gpu"
              and isinstance(n.get("params", {}), dict)]
    for i, model in models[1:]:
        if model != models[0][1]:
            issues.append(Issue(f"platform.nodes[{i}].params.model",
                                f"{model!r} differs from the first GPU's {models[0][1]!r}: "
                                "a platform has one GPU model"))
            break
    gpus = sum(1 for n in nodes if isinstance(n, dict) and n.get("kind") == "gpu")
    hosts = sum(1 for n in nodes if isinstance(n, dict) and n.get("kind") == "node")
    if gpus and hosts and gpus % hosts:
        issues.append(Issue("platform.nodes", f"{gpus} GPUs do not divide evenly over "
                                              f"{hosts} nodes"))
    edges = platform.get("edges", [])
    if not isinstance(edges, list):
        issues.append(Issue("platform.edges", f"expected a list of links, got {edges!r}"))
        edges = []
    for i, edge in enumerate(edges):
        for key in ("source", "target"):
            if not isinstance(edge, dict) or not isinstance(edge.get(key), str) \
                    or edge[key] not in ids:
                issues.append(Issue(f"platform.edges[{i}].{key}", "no device with that id"))
        kind = edge.get("kind") if isinstance(edge, dict) else None
        if isinstance(edge, dict) and (not isinstance(kind, str) or kind not in LINK_KINDS):
            issues.append(Issue(f"platform.edges[{i}].kind", f"unknown link kind "
                                f"{edge.get('kind')!r} (known: {', '.join(LINK_KINDS)})"))
    return copy.deepcopy(platform)


def _validate_device_params(node: dict, where: str, issues: list[Issue]) -> None:
    """A custom platform device's ``params``: a CPU's ``threads``, a GPU's ``model``."""
    params = node.get("params", {})
    if not isinstance(params, dict):
        issues.append(Issue(where, f"expected an object, got {params!r}"))
        return
    if node["kind"] == "cpu" and "threads" in params:
        t = params["threads"]
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            issues.append(Issue(f"{where}.threads", f"must be a positive integer, got {t!r}"))
    if node["kind"] == "gpu" and "model" in params:
        model = params["model"]
        if not isinstance(model, str) or (model not in GPU_MODELS
                                          and find_gpu_spec(model) is None):
            issues.append(Issue(f"{where}.model", f"unknown GPU {model!r} (known: "
                                f"{', '.join(GPU_MODELS)} or a name in the GPU table)"))


def _validate_training(training, issues: list[Issue]) -> dict:
    out = {"batch_size": 128, "optimizer": "sgd", "dtype": "float32", "lr": 0.01}
    if training is None:
        return out
    if not isinstance(training, dict):
        issues.append(Issue("training", f"expected an object, got {training!r}"))
        return out
    out.update(training)
    bs = out["batch_size"]
    if isinstance(bs, bool) or not isinstance(bs, int) or not 1 <= bs <= MAX_SIZE:
        issues.append(Issue("training.batch_size", f"must be a positive integer up to "
                                                   f"{MAX_SIZE:,}, got {bs!r}"))
    if out["optimizer"] not in OPTIMIZERS:
        issues.append(Issue("training.optimizer", f"expected one of {list(OPTIMIZERS)}, "
                                                  f"got {out['optimizer']!r}"))
    if out["dtype"] not in DTYPES:
        issues.append(Issue("training.dtype", f"expected one of {list(DTYPES)}, "
                                              f"got {out['dtype']!r}"))
    lr = out["lr"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf:
        issues.append(Issue("training.lr", f"must be a positive number, got {lr!r}"))
    for key in set(out) - {"batch_size", "optimizer", "dtype", "lr"}:
        issues.append(Issue(f"training.{key}", "unknown training setting"))
    return out


def _validate_parallelism(parallelism, issues: list[Issue]) -> dict:
    if parallelism is None:
        return {"embedding_sharding": "auto"}
    if not isinstance(parallelism, dict):
        issues.append(Issue("parallelism", f"expected an object, got {parallelism!r}"))
        return {"embedding_sharding": "auto"}
    sharding = parallelism.get("embedding_sharding", "auto")
    if sharding != "auto" and not isinstance(sharding, dict):
        issues.append(Issue("parallelism.embedding_sharding",
                            f"expected 'auto' or an object mapping tables to ranks, "
                            f"got {sharding!r}"))
    for key in sorted(set(parallelism) - {"embedding_sharding"}, key=str):
        issues.append(Issue(f"parallelism.{key}", "unknown parallelism setting (known: "
                                                  "embedding_sharding)"))
    return copy.deepcopy(parallelism)


def validate_platform(platform, source: str = "") -> dict:
    """Validate a scenario's ``platform`` section on its own; raise :class:`ScenarioError`."""
    issues: list[Issue] = []
    out = _validate_platform(platform, issues)
    if issues:
        raise ScenarioError(issues, source)
    return out


def validate_scenario(doc, source: str = "") -> dict:
    """Validate and normalize a scenario document; raise :class:`ScenarioError`."""
    issues: list[Issue] = []
    if not isinstance(doc, dict):
        raise ScenarioError([Issue("(document)", "expected a JSON object")], source)
    if doc.get("format") != FORMAT:
        raise ScenarioError([Issue("format", f"expected {FORMAT!r}, got "
                                             f"{doc.get('format')!r}")], source)
    doc = _migrate(doc, issues)
    if issues:
        raise ScenarioError(issues, source)
    name = doc.get("name", "")
    if not isinstance(name, str):
        issues.append(Issue("name", f"expected a string, got {name!r}"))
    out = {
        "format": FORMAT, "version": VERSION, "name": name if isinstance(name, str) else "",
        "model": _validate_model(doc.get("model"), issues),
        "platform": _validate_platform(doc.get("platform", {"preset": "local-cpu"}), issues),
        "training": _validate_training(doc.get("training"), issues),
        "parallelism": _validate_parallelism(doc.get("parallelism"), issues),
        "layout": copy.deepcopy(doc.get("layout", {})),
    }
    if not isinstance(out["layout"], dict):
        issues.append(Issue("layout", f"expected an object of canvas positions, "
                                      f"got {out['layout']!r}"))
    if issues:
        raise ScenarioError(issues, source)
    _check_sharding_ranks(out, issues)
    if issues:
        raise ScenarioError(issues, source)
    return out


def _check_sharding_ranks(doc: dict, issues: list[Issue]) -> None:
    """An explicit sharding may only place tables on ranks the platform has."""
    sharding = doc["parallelism"].get("embedding_sharding", "auto")
    if not isinstance(sharding, dict):
        return
    ranks = resolve_platform(doc["platform"]).ranks
    tables = {f"{n['id']}/{j}" for n in doc["model"]["nodes"]
              if n["kind"] == "embedding_tables" for j in range(len(n["params"]["tables"]))}
    for key, rank in sharding.items():
        if key not in tables:
            some = ", ".join(sorted(tables)[:3]) or "the model has none"
            issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                f"no such table: keys are '<block id>/<table index>' "
                                f"({some})"))
        elif rank == ROW_WISE:
            continue   # its rows split over every rank
        elif isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < ranks:
            issues.append(Issue(f"parallelism.embedding_sharding.{key}",
                                f"expected a rank from 0 to {ranks - 1} (the platform has "
                                f"{ranks}) or {ROW_WISE!r} (row-wise over all of them), "
                                f"got {rank!r}"))


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
                                             f"{doc.get('format')!r}")], source)
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
