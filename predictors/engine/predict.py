"""The prediction pipeline: scenario -> module -> captured op graph -> costs -> Timeline."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..costs.datasheet import datasheet_default, with_measured_sibling
from ..hardware.platforms import resolve_platform
from ..hardware.specs import device_spec
from ..model.footprint import footprint_note, step_footprint
from ..model.op_classes import ITEMSIZE
from ..model.sharding import PlanError
from ..profiles import (
    DeviceProfile,
    ProfileError,
    default_profile,
    on_this_host,
    other_cpu_note,
    resolve_profile,
    unsteady_note,
)
from ..scenario.format import Issue, ScenarioError, validate_scenario
from ..utils.progress import check_cancelled
from .timeline import Timeline
from .uncertainty import range_remark, stated_range
from .verdict import step_verdict

__all__ = ["Prediction", "predict"]


@dataclass
class Prediction:
    """One predicted training iteration."""

    scenario_name: str
    platform: str
    device: str
    timeline: Timeline
    iteration_ms: float
    per_rank: list[dict]
    num_ops: int
    top_ops: list[dict]
    notes: list[str] = field(default_factory=list)
    profile: str = "roofline"
    elapsed_s: float = 0.0
    sharding: dict | None = None  # the embedding plan of a multi-GPU step
    verdict: dict | None = None   # what bounds the step (engine/verdict.py)
    # where 80 % of measured steps fall (engine/uncertainty.py); None: no validation says
    iteration_ms_low: float | None = None
    iteration_ms_high: float | None = None

    def to_json(self) -> dict:
        out = {"scenario": self.scenario_name, "platform": self.platform,
               "device": self.device, "profile": self.profile,
               "iteration_ms": self.iteration_ms, "per_rank": self.per_rank,
               "num_ops": self.num_ops, "num_events": len(self.timeline),
               "top_ops": self.top_ops, "notes": self.notes,
               "elapsed_s": round(self.elapsed_s, 4)}
        if self.sharding is not None:
            out["sharding"] = self.sharding
        if self.verdict is not None:
            out["verdict"] = self.verdict
        out["iteration_ms_low"] = self.iteration_ms_low
        out["iteration_ms_high"] = self.iteration_ms_high
        return out


def rank_figures(timeline: Timeline, memories=(), device_bytes: float = 0.0) -> list[dict]:
    """Per rank: iteration (its span), device active and idle, exposed communication, ms;
    with ``memories`` (each rank's :class:`~predictors.model.memory.StepMemory`), its peak
    memory and whether that fits ``device_bytes``."""
    from ..model.memory import rank_memory  # deferred: imports torch

    out = []
    memories = list(memories)
    for i, rank in enumerate(timeline.ranks):
        iteration = timeline.span_ms(rank)
        active = timeline.device_active_ms(rank)
        out.append({"rank": rank, "iteration_ms": iteration, "device_active_ms": active,
                    "device_idle_ms": max(0.0, iteration - active),
                    "exposed_comm_ms": timeline.exposed_comm_ms(rank),
                    **rank_memory(memories[i] if i < len(memories) else None,
                                  device_bytes)})
    return out


def _starts_us(starts_ms, ranks: int) -> list[float] | None:
    """``rank_starts_ms`` checked and in microseconds (None: together)."""
    if starts_ms is None:
        return None
    starts = [float(x) for x in starts_ms]
    if len(starts) != ranks or not all(0.0 <= x < math.inf for x in starts):
        raise ValueError(f"rank_starts_ms: expected {ranks} start times (ms, 0 or more), "
                         f"one per rank, got {list(starts_ms)!r}")
    return [x * 1e3 for x in starts]


def _predict_ranks(doc, platform, profile, overheads, step, cancelled, notes,
                   starts_us=None):
    """Every rank of a multi-GPU platform: ``(timeline, ops, device, sharding,
    memories)``."""
    from .parallel import RankGraphs, scenario_plan  # deferred: imports torch

    graphs = RankGraphs(doc, platform, profile, overheads, cancelled)
    ranks = graphs.ranks
    step(0.1, "planning the embedding sharding")
    try:
        plan = scenario_plan(graphs)
    except PlanError as exc:
        raise ScenarioError([Issue("parallelism.embedding_sharding", str(exc))]) from None

    def captured(rank):
        step(0.2 + 0.6 * (rank + 1) / ranks, f"capturing rank {rank + 1} of {ranks}")

    timeline = graphs.simulate(plan, doc["name"] or "prediction", cancelled, captured,
                               starts_us)
    node_wise = len(plan.row_groups)
    rowwise, replicated = len(plan.rowwise) - node_wise, len(plan.replicated)
    kinds = [f"{n} of them {kind}" for n, kind in ((rowwise, "row-wise"),
                                                    (node_wise, "table-row-wise"),
                                                    (replicated, "data-parallel")) if n]
    how = (f"; tables sharded row-wise ({plan.name})" if rowwise == len(graphs.tables) else
           f"; tables sharded table-wise{', ' if kinds else ''}{', '.join(kinds)} "
           f"({plan.name})")
    notes.append(graphs.batch_note() + (how if graphs.tables else "; data parallel"))
    notes.extend(plan.notes + graphs.notes)
    costed = [graphs.rank_graph(plan, r) for r in range(ranks)]
    num_ops = sum(len(c.ops) for c in costed)
    sharding = None
    if graphs.tables:
        sharding = dict(plan.to_json(), rank_bytes=plan.rank_bytes(graphs.tables))
    return timeline, num_ops, costed[0].device.name, sharding, [c.memory for c in costed]


def device_memory(platform) -> float:
    """One device's memory in bytes on ``platform`` (0: unknown): a GPU's datasheet
    memory, or on the CPU this host's physical memory (other processes use some too)."""

    try:
        return device_spec(platform.device, platform.threads).memory_bytes
    except KeyError:
        return 0.0


def check_fits(doc: dict, platform) -> None:
    """Raise :class:`~predictors.scenario.format.ScenarioError` when the embedding tables'
    weights alone exceed the memory of all the platform's devices together (no placement
    can hold them), naming the largest table; unknown memory sizes are not checked."""

    try:
        memory = device_spec(platform.device, platform.threads).memory_bytes
    except KeyError:
        return
    memory *= max(1, platform.ranks) if platform.device != "cpu" else 1
    itemsize = ITEMSIZE.get(doc["training"]["dtype"], 4)
    tables = [(t["rows"] * t["dim"] * itemsize, f"model.nodes[{i}].params.tables[{j}]", n["id"])
              for i, n in enumerate(doc["model"]["nodes"]) if n["kind"] == "embedding_tables"
              for j, t in enumerate(n["params"]["tables"])]
    total = sum(t[0] for t in tables)
    if memory > 0 and total > memory:
        largest, where, node_id = max(tables)
        raise ScenarioError([Issue(where, f"the embedding tables need {total / 1e9:,.1f} GB "
                                          f"(this one {largest / 1e9:,.1f} GB), more than "
                                          f"the {memory / 1e9:,.0f} GB of {platform.name}",
                                   node_id)])


@contextmanager
def torch_errors_as_scenario_errors():
    """Sizes torch cannot hold (overflow, out of memory, a tensor too big for its index
    type) become a :class:`~predictors.scenario.format.ScenarioError` on ``model``."""

    try:
        yield
    except (RuntimeError, OverflowError, MemoryError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScenarioError([Issue("model", f"torch cannot build this model: {first}")]) \
            from None


def progress_stepper(progress, cancelled):
    """``step(fraction, stage)``: report progress, and raise :class:`Cancelled` when asked."""
    def step(fraction: float, stage: str) -> None:
        check_cancelled(cancelled, stage)
        if progress is not None:
            progress(fraction, stage)
    return step


def prepare(scenario: dict, profile=None, host: str | None = None):
    """Validate ``scenario`` and pick its profile (as :func:`predict` documents):
    ``(doc, platform, profile or None)``.  A profile of the other device kind is a
    :class:`~predictors.profiles.ProfileError`.

    On a GPU platform the bundled profile's CPU overheads are the host's
    (:mod:`predictors.costs.host_overheads`): ``host``, else the scenario's
    ``platform.host``, else the default host, with the launch cost of the GPU's
    generation.  A profile given by the caller keeps its own overheads unless a host is
    named."""

    doc = validate_scenario(scenario)
    platform = resolve_platform(doc["platform"])
    named_host = host or doc["platform"].get("host")
    by_default = profile is None
    if profile is None:
        profile = default_profile(platform.device, "cpu" if platform.device == "cpu"
                                  else "gpu", platform.threads)
        if platform.device == "cpu":  # another CPU's: scaled by this host's check
            profile = on_this_host(profile, platform.threads)
        if profile is None and platform.device != "cpu":  # a GPU without a bundled one
            profile = datasheet_default(platform.device)
        if platform.device != "cpu":     # unmeasured: a measured twin's GEMMs, if any
            profile = with_measured_sibling(profile)
    elif profile == "roofline":
        profile = None
    elif isinstance(profile, str):
        profile = resolve_profile(profile)
    wanted = "cpu" if platform.device == "cpu" else "gpu"
    if profile is not None and profile.device.kind != wanted:
        raise ProfileError(f"profile {profile.name!r} describes a {profile.device.kind.upper()} "
                           f"({profile.device.name}); platform {platform.name} runs on "
                           f"{'the CPU' if wanted == 'cpu' else platform.device}")
    if (by_default or named_host) and isinstance(profile, DeviceProfile) \
            and profile.device.kind == "gpu" and platform.device != "cpu":
        profile = _on_host(profile, named_host)
    check_fits(doc, platform)
    return doc, platform, profile


def _on_host(profile: DeviceProfile, name: str | None) -> DeviceProfile:
    """``profile`` with host ``name``'s overheads (the default host without a name); an
    unknown host is a :class:`~predictors.scenario.format.ScenarioError` on
    ``platform.host``."""
    from ..costs.host_overheads import load_host, profile_on_host

    try:
        return profile_on_host(profile, load_host(name))
    except ProfileError as exc:
        raise ScenarioError([Issue("platform.host", str(exc))]) from None


def predict(scenario: dict, *, profile=None, overheads=None, host: str | None = None,
            rank_starts_ms: Sequence[float] | None = None,
            progress: Callable[[float, str], None] | None = None,
            cancelled: Callable[[], bool] | None = None) -> Prediction:
    """Predict one training iteration of ``scenario`` (a scenario document).

    ``profile`` is a :class:`~predictors.profiles.DeviceProfile`, a profile name or path,
    ``"roofline"`` (datasheet figures only) or None: the bundled profile of the platform's
    device when there is one.  ``overheads`` (an
    :class:`~predictors.profiles.OverheadTable`, e.g. measured from the user's own trace
    by :func:`predictors.traces.overhead_tables.trace_overheads`) replaces the profile's.
    ``host`` names the host of the catalogue whose CPU overheads a GPU step pays
    (:mod:`predictors.costs.host_overheads`; default: the scenario's ``platform.host``,
    else the default host).  ``rank_starts_ms`` says when each rank of a multi-rank
    platform starts its step (a straggler, or the skew of a recording; default: all at
    0); a rank's iteration runs from its own start, an early one's waits included.
    ``progress(fraction, stage)`` is called between stages;
    ``cancelled()`` is polled and, when it returns True, :class:`Cancelled` is raised.
    Invalid scenarios raise :class:`predictors.scenario.format.ScenarioError`.
    """
    from ..costs.op_costs import cost_op_graph  # deferred: imports torch
    from ..model.capture import capture_scenario  # deferred: imports torch
    from ..model.memory import memory_note  # deferred: imports torch
    from .simulate import simulate_rank  # deferred: imports torch

    t0 = time.perf_counter()
    step = progress_stepper(progress, cancelled)
    step(0.0, "validating")
    doc, platform, profile = prepare(scenario, profile, host)
    title = doc["name"] or "prediction"
    notes = [f"profile: {profile.name} ({profile.kind})" if profile is not None
             else "profile: datasheet roofline (no calibrated profile for this device)"]
    if profile is not None and profile.provenance.get("gemm_sibling"):
        notes.append(profile.provenance["gemm_sibling"])
    if profile is not None and profile.provenance.get("power_cap"):
        notes.append(profile.provenance["power_cap"] + ", and the 80 % range does not "
                     "allow for it")
    if profile is not None and overheads is None and profile.provenance.get("host_overheads"):
        notes.append(f"host: {profile.provenance['host_overheads']}")
    if doc["training"].get("input_pipeline") == "torchrec":
        sends = platform.ranks > 1 and any(n["kind"] == "embedding_tables"
                                           for n in doc["model"]["nodes"])
        notes.append("input pipeline: TorchRec's applies to GPUs; this CPU step is resident"
                     if platform.device == "cpu" else
                     "input pipeline: TorchRec's (each step copies the next batch to the GPU"
                     + (" and sends its sparse features to their tables' ranks)" if sends
                        else ")"))
    if platform.device == "cpu":
        notes.extend(filter(None, [other_cpu_note(profile), unsteady_note(profile), (
            profile.provenance.get("host_scaling") or {}).get("note")
            if profile is not None else None]))
    sharding = None
    starts_us = _starts_us(rank_starts_ms, platform.ranks)
    with torch_errors_as_scenario_errors():
        if platform.ranks > 1:
            timeline, num_ops, device_name, sharding, memories = _predict_ranks(
                doc, platform, profile, overheads, step, cancelled, notes, starts_us)
        else:
            step(0.1, "capturing the training step")
            graph = capture_scenario(doc, gpu=platform.device != "cpu")
            step(0.6, "costing kernels")
            costed = cost_op_graph(graph, platform, profile, overheads)
            notes.extend(filter(None, [footprint_note(costed.footprint_scale,
                                                      step_footprint(graph))]))
            step(0.8, "simulating")
            timeline = simulate_rank(costed, title=title, cancelled=cancelled)
            num_ops, device_name = graph.number_of_nodes(), costed.device.name
            memories = [costed.memory]
    step(0.95, "analyzing")
    per_rank = rank_figures(timeline, memories, device_memory(platform))
    note = memory_note(per_rank, platform.device)
    if note:
        notes.insert(0, note)
    iteration_ms = max(r["iteration_ms"] for r in per_rank)
    if (profile is not None and platform.device != "cpu"
            and profile.device.name != platform.device):
        notes.append(f"the profile describes {profile.device.name}, the platform "
                     f"{platform.device}: its figures are used")
    if overheads is not None:
        notes.append(f"overheads: {overheads.source}")
    if platform.nodes > 1:  # the Gantt groups the ranks per node
        timeline.meta["gpus_per_node"] = platform.gpus
    if profile is not None and profile.provenance.get("cpu_signature"):
        timeline.meta["profile_cpu"] = profile.provenance["cpu_signature"]  # for Compare
    slowest = max(per_rank, key=lambda r: r["iteration_ms"])["rank"]
    device_lanes = timeline.lanes_of(slowest, "stream") or timeline.lanes_of(slowest, "cpu")
    result = Prediction(doc["name"], platform.name, device_name, timeline,
                        iteration_ms, per_rank, num_ops,
                        timeline.top_ops(10, device_lanes), notes,
                        profile=profile.name if profile is not None else "roofline",
                        sharding=sharding,
                        verdict=step_verdict(timeline, per_rank, num_ops,
                                             platform.device, doc))
    band = stated_range(iteration_ms, profile, platform.device, result.verdict["bound"])
    if band is not None:
        result.iteration_ms_low = band["iteration_ms_low"]
        result.iteration_ms_high = band["iteration_ms_high"]
        remark = range_remark(iteration_ms, band["iteration_ms_low"],
                              band["iteration_ms_high"])
        notes.append(f"80 % range {band['iteration_ms_low']:,.3f}–"
                     f"{band['iteration_ms_high']:,.3f} ms, from {band['basis']}"
                     + (f"; {remark}, so the range leaves out the prediction" if remark
                        else ""))
    else:
        notes.append("no range: no validation of this profile's steps")
    result.elapsed_s = time.perf_counter() - t0
    step(1.0, "done")
    return result
