"""Multi-GPU steps: rank graphs with collectives, sharding plans, ranks walked together."""
import copy
import json
import math

import networkx as nx
import numpy as np
import pytest
import torch
from paths import SCENARIOS

from predictors.costs.collectives import platform_collective
from predictors.engine.parallel import RankGraphs
from predictors.engine.predict import predict
from predictors.engine.timeline import CATEGORIES
from predictors.hardware.platforms import resolve_platform
from predictors.model.capture import capture_training_step
from predictors.model.comm_ops import BUCKET_BYTES, FIRST_BUCKET_BYTES, GradientBuckets
from predictors.model.sharding import (
    Plan,
    PlanError,
    TableRef,
    candidate_plans,
    greedy_plan,
    tables_of,
)
from predictors.model.workload import RankShard, build_workload
from predictors.plan.rank_sharding import rank_shardings
from predictors.plan.torchrec_plans import from_torchrec
from predictors.scenario.format import ScenarioError, load_scenario, validate_scenario


@pytest.fixture
def dlrm():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "dgx-a100"}
    return validate_scenario(doc)


def _nodes(graph, prefix):
    return [graph.nodes[i] for i in sorted(graph.nodes) if graph.nodes[i]["name"]
            .startswith(prefix)]


def test_a_rank_looks_up_its_own_tables_for_the_global_batch(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    shard = RankShard(0, 8, frozenset(keys[:3]), 64, 512)
    graph = capture_training_step(build_workload(dlrm, shard=shard), gpu=True)
    bags = _nodes(graph, "aten::_embedding_bag")
    forward = [n for n in bags if n["phase"] == "forward"]
    assert sorted(n["lookup"]["table"] for n in forward) == sorted(keys[:3])
    assert all(n["output_shapes"][0][0] == 512 for n in forward)  # every sample
    (a2a,) = _nodes(graph, "mldse::all_to_all")[:1]
    assert [s[0] for s in a2a["input_shapes"]] == [512] * 3 + [0]  # and the anchor
    assert a2a["output_shapes"] == [(64, 16)] * len(keys)  # its share of every table
    (back,) = _nodes(graph, "mldse::all_to_all_backward")
    assert back["thread"] == "autograd" and back["output_shapes"] == [(512, 16)] * 3
    # the dense part sees the local batch
    dense = next(n for n in _nodes(graph, "aten::addmm") if n["phase"] == "forward")
    assert dense["input_shapes"][1][0] == 64
    # every backward of a local table waits for the reverse exchange
    idx = {id(graph.nodes[i]): i for i in graph.nodes}
    back_i = idx[id(back)]
    for n in bags:
        if n["phase"] == "backward":
            assert back_i in graph.predecessors(idx[id(n)])


def test_dense_gradients_are_all_reduced_in_ddp_buckets(dlrm):
    workload = build_workload(dlrm, shard=RankShard(1, 8, frozenset(), 64, 512))
    graph = capture_training_step(workload, gpu=True)
    reduced = sum(math.prod(n["input_shapes"][0]) for n in _nodes(graph, "mldse::all_reduce"))
    dense = sum(p.numel() for nid, b in workload.module.blocks.items()
                if workload.module.kinds[nid] != "embedding_tables" for p in b.parameters())
    assert reduced == dense
    # the optimizer reads the averaged gradients: its update waits for the last bucket
    last = max(i for i in graph.nodes if graph.nodes[i]["name"] == "mldse::all_reduce")
    update = next(i for i in graph.nodes if graph.nodes[i]["phase"] == "optimizer"
                  and graph.nodes[i]["name"].startswith("aten::_foreach_add"))
    assert nx.has_path(graph, last, update)


def test_buckets_follow_ddp_sizes():
    sizes = [300_000] * 30 + [5_000_000, 10, 7_000_000]  # float32
    params = [torch.nn.Parameter(torch.empty(n, device="meta")) for n in sizes]
    buckets = GradientBuckets(params, 8)
    assert buckets.buckets[0][0] is params[-1]  # reverse registration order
    index = {id(p): i for i, p in enumerate(params)}
    got = [[index[id(p)] for p in b] for b in buckets.buckets]
    assert sum(len(b) for b in got) == len(params)
    # torch's own rule, as DDP applies it once it has rebuilt its buckets in the order the
    # gradients became ready (reverse registration order here)
    dist = pytest.importorskip("torch.distributed")
    if not hasattr(dist, "_compute_bucket_assignment_by_size"):
        pytest.skip("this torch build has no distributed bucketing")
    order = list(reversed(range(len(params))))
    want, _ = dist._compute_bucket_assignment_by_size(
        [torch.empty(sizes[i]) for i in order], [FIRST_BUCKET_BYTES, BUCKET_BYTES],
        [False] * len(order))
    assert got == [[order[i] for i in b] for b in want]


def test_an_unused_dense_branch_does_not_stop_the_all_reduce(dlrm):
    dlrm["model"]["nodes"].append({"id": "side", "kind": "mlp", "params": {
        "layers": [32, 16], "activation": "relu", "final": None}})
    dlrm["model"]["edges"].append({"source": "dense", "target": "side"})
    doc = validate_scenario(dlrm)
    workload = build_workload(doc, shard=RankShard(0, 8, frozenset(), 64, 512))
    graph = capture_training_step(workload, gpu=True)
    reduced = sum(math.prod(n["input_shapes"][0]) for n in _nodes(graph, "mldse::all_reduce"))
    dense = sum(p.numel() for nid, b in workload.module.blocks.items()
                if workload.module.kinds[nid] != "embedding_tables" for p in b.parameters())
    assert reduced == dense  # DDP with find_unused_parameters reduces every bucket


def test_transformers_on_many_gpus_are_data_parallel():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    doc["platform"] = {"preset": "dgx-h100"}
    result = predict(doc)
    out = result.to_json()
    assert len(out["per_rank"]) == 8 and "sharding" not in out
    assert any("data parallel" in n for n in out["notes"])
    # the gradients' all-reduce overlaps the backward but its last bucket cannot: some of
    # it is exposed, never more than all of it
    tl = result.timeline
    comm = tl.category == CATEGORIES.index("communication")
    for r in out["per_rank"]:
        starts, ends = tl.busy_intervals(tl.lanes_of(r["rank"], "stream"), mask=comm)
        assert 0 < r["exposed_comm_ms"] <= (ends - starts).sum() / 1e3 + 1e-9


def test_ranks_meet_in_every_collective(dlrm):
    result = predict(dlrm)
    tl = result.timeline
    assert tl.ranks == list(range(8)) and len(result.per_rank) == 8
    comm = tl.category == CATEGORIES.index("communication")
    ends = {}
    for rank in range(8):
        lanes = [i for i in tl.lanes_of(rank, "stream")]
        sel = np.flatnonzero(comm & np.isin(tl.lane, lanes))
        ends[rank] = np.sort(tl.start_us[sel] + tl.dur_us[sel])
    for rank in range(1, 8):  # one end per collective, the same on every rank
        np.testing.assert_allclose(ends[rank], ends[0])
    assert result.iteration_ms == max(r["iteration_ms"] for r in result.per_rank)
    assert result.sharding["assignment"] and len(result.sharding["rank_bytes"]) == 8


def test_the_last_rank_to_arrive_runs_the_modelled_collective(dlrm):
    result = predict(dlrm)
    tl = result.timeline
    comm = np.flatnonzero(tl.category == CATEGORIES.index("communication"))
    first = {}
    for i in comm:
        name = tl.names[tl.name_id[i]]
        if name == "nccl:all_to_all" and "forward" in tl.details[tl.detail_id[i]]:
            first.setdefault(tl.lanes[tl.lane[i]].rank, (tl.dur_us[i], tl.details[tl.detail_id[i]]))
    shortest = min(d for d, _ in first.values())
    platform = resolve_platform(dlrm["platform"])
    graphs = RankGraphs(dlrm, platform)
    plan = Plan("p", 8, result.sharding["assignment"])
    nbytes = max(next(op.bytes for op in graphs.costed(plan.local(r)).ops
                      if op.name == "mldse::all_to_all") for r in range(8))
    est = platform_collective("all_to_all", nbytes, platform)[0]
    assert shortest == pytest.approx(est.us, rel=1e-3)


def test_an_unbalanced_plan_is_slower(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    balanced = copy.deepcopy(dlrm)
    balanced["parallelism"] = {"embedding_sharding": {k: i % 8 for i, k in enumerate(keys)}}
    piled = copy.deepcopy(dlrm)
    piled["parallelism"] = {"embedding_sharding": {k: 0 for k in keys}}
    fast, slow = predict(balanced), predict(piled)
    assert slow.iteration_ms > fast.iteration_ms
    tl = slow.timeline
    compute = [tl.busy_ms([i for i in tl.lanes_of(r, "stream")
                           if "compute" in tl.lanes[i].name]) for r in range(8)]
    assert int(np.argmax(compute)) == 0
    # the others wait in the exchange for rank 0's lookups
    waits = [tl.details[tl.detail_id[i]] for i in np.flatnonzero(np.isin(
        tl.lane, tl.lanes_of(1, "stream"))) if tl.names[tl.name_id[i]] == "nccl:all_to_all"]
    assert waits and "for rank 0" in waits[0]


def test_sharding_keys_and_memory_are_checked(dlrm):
    bad = copy.deepcopy(dlrm)
    bad["parallelism"] = {"embedding_sharding": {"tables/99": 0}}
    with pytest.raises(ScenarioError) as info:
        validate_scenario(bad)
    assert info.value.issues[0].field == "parallelism.embedding_sharding.tables/99"
    big = copy.deepcopy(dlrm)
    tables = next(n for n in big["model"]["nodes"] if n["kind"] == "embedding_tables")
    for t in tables["params"]["tables"]:
        t.update(rows=100_000_000, dim=32)  # 12.8 GB each: two do not fit on a 40 GB GPU
    keys = [t.key for t in tables_of(validate_scenario(big))]
    big["parallelism"] = {"embedding_sharding": {k: 0 for k in keys}}
    with pytest.raises(ScenarioError, match="rank 0 would hold") as info:
        predict(big)
    assert info.value.issues[0].field == "parallelism.embedding_sharding"


def _refs(sizes):
    return [TableRef(f"e/{i}", "e", i, rows, 16, 1, {"kind": "uniform"}, 4)
            for i, rows in enumerate(sizes)]


def test_greedy_balances_and_respects_memory():
    tables = _refs([100, 90, 60, 50, 40])
    plan = greedy_plan("size", tables, 2, lambda t: t.bytes)
    assert plan.rank_bytes(tables) == [(100 + 50 + 40) * 64.0, (90 + 60) * 64.0]
    with pytest.raises(PlanError, match="fits on no rank"):
        greedy_plan("size", tables, 2, lambda t: t.bytes, memory_bytes=150 * 64)
    plans, refused = candidate_plans(tables, 2, 128, memory_bytes=0)
    assert len({p.signature(tables) for p in plans}) == len(plans)  # distinct
    assert not refused


def test_plan_signature_ignores_rank_order():
    tables = _refs([10, 20])
    a = Plan("a", 2, {"e/0": 0, "e/1": 1})
    b = Plan("b", 2, {"e/0": 1, "e/1": 0})
    assert a.signature(tables) == b.signature(tables)


def test_rank_graphs_are_reused_across_plans(dlrm):
    platform = resolve_platform(dlrm["platform"])
    graphs = RankGraphs(dlrm, platform)
    keys = frozenset(t.key for t in graphs.tables[:2])
    assert graphs.costed(keys) is graphs.costed(keys)
    seconds = graphs.table_seconds()
    assert set(seconds) == {t.key for t in graphs.tables} and min(seconds.values()) > 0


def test_rank_shardings_best_first(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    dlrm["parallelism"] = {"embedding_sharding": {k: 0 for k in keys}}
    stages = []
    ranking = rank_shardings(dlrm, budget_s=1, progress=lambda f, s: stages.append(f))
    ms = [p.iteration_ms for p in ranking.plans]
    assert ms == sorted(ms) and len(ms) >= 2
    assert any(p.plan.name == "the scenario's plan" for p in ranking.plans)
    # all on rank 0 loses to every table-wise planner (row-wise, small tables: its
    # collectives and the lookups on every rank cost more here)
    own = next(p for p in ranking.plans if p.plan.name == "the scenario's plan")
    greedy = [p for p in ranking.plans if p.plan.name.startswith("greedy")]
    assert greedy and all(own.iteration_ms > p.iteration_ms for p in greedy)
    assert stages == sorted(stages) and stages[-1] == 1.0
    assert len(rank_shardings(dlrm, top=1, budget_s=0.5).plans) == 1


def test_rank_shardings_needs_ranks_and_tables():
    single = load_scenario(SCENARIOS / "small_dlrm.json")
    with pytest.raises(ScenarioError, match="nothing to shard"):
        rank_shardings(single)
    bert = load_scenario(SCENARIOS / "bert_base.json")
    bert["platform"] = {"preset": "dgx-h100"}
    with pytest.raises(ScenarioError, match="no embedding tables"):
        rank_shardings(bert)


def test_rank_sharding_cli_contract(tmp_path, dlrm, capsys):
    from predictors.cli import main

    path = tmp_path / "dlrm8.json"
    path.write_text(json.dumps(dlrm))
    torchrec = tmp_path / "best.json"
    code = main(["rank-sharding", str(path), "--top", "2", "--budget-s", "1", "--json",
                 "--torchrec-out", str(torchrec), "--csv", str(tmp_path / "plans.csv")])
    out = capsys.readouterr()
    assert code == 0, out.err
    ranking = json.loads(out.out)
    plans = ranking["plans"]
    assert 1 <= len(plans) <= 2 and ranking["evaluated"] >= len(plans)
    assert {"plan", "iteration_ms", "per_rank", "tie", "imbalance",
            "exposed_all_to_all_ms"} <= set(plans[0])
    assert len(plans[0]["per_rank"]) == 8
    best = from_torchrec(json.loads(torchrec.read_text()), tables_of(dlrm), 8)
    assert best.assignment == plans[0]["assignment"]
    rows = (tmp_path / "plans.csv").read_text().splitlines()
    assert len(rows) == len(plans) + 1 and rows[0].startswith("position,plan,iteration_ms")


def test_topologies_collectives_cannot_cross_are_named(dlrm):
    """GPUs drawn without links are an error that names them, not a guess; so are hosts
    without NICs."""
    gpus = [{"id": f"g{i}", "kind": "gpu", "params": {"model": "h100"}} for i in range(4)]
    dlrm["platform"] = {"nodes": gpus, "edges": []}
    with pytest.raises(ScenarioError, match="g0 has no link") as info:
        predict(dlrm)
    assert [i.field for i in info.value.issues] == [f"platform.nodes[{i}]" for i in range(4)]
    switches = [{"id": f"s{h}", "kind": "pcie_switch"} for h in range(2)]
    dlrm["platform"] = {"nodes": gpus + switches + [{"id": "n0", "kind": "node"},
                                                    {"id": "n1", "kind": "node"}],
                        "edges": [{"source": f"g{i}", "target": f"s{i // 2}", "kind": "pcie5"}
                                  for i in range(4)]}
    with pytest.raises(ScenarioError, match="no NIC") as info:
        predict(dlrm)
    assert info.value.issues[0].field == "platform"


def test_a_batch_that_does_not_divide_is_padded_and_said(dlrm):
    dlrm["training"]["batch_size"] = 12
    result = predict(dlrm)
    assert any("ceil(12/8)" in n for n in result.notes)
    assert len(result.per_rank) == 8


def test_rank_sharding_refuses_a_scenario_plan_that_overfills_a_rank(dlrm):
    tables = next(n for n in dlrm["model"]["nodes"] if n["kind"] == "embedding_tables")
    for t in tables["params"]["tables"][:2]:
        t.update(rows=400_000_000, dim=16)  # 25.6 GB each
    dlrm["parallelism"] = {"embedding_sharding": {"tables/0": 0, "tables/1": 0}}
    ranking = rank_shardings(dlrm, budget_s=0.5)
    assert all(p.plan.name != "the scenario's plan" for p in ranking.plans)
    assert ranking.refused[0][0] == "the scenario's plan"
    assert "rank 0 would hold" in ranking.refused[0][1]


def test_plans_that_swap_tables_between_blocks_differ():
    a = [TableRef(f"x/{i}", "x", i, 10, 16, 1, {"kind": "uniform"}, 4) for i in range(2)]
    b = [TableRef(f"y/{i}", "y", i, 10, 16, 1, {"kind": "uniform"}, 4) for i in range(2)]
    tables = a + b
    blockwise = Plan("p", 2, {"x/0": 0, "x/1": 0, "y/0": 1, "y/1": 1})
    mixed = Plan("q", 2, {"x/0": 0, "x/1": 1, "y/0": 0, "y/1": 1})
    assert blockwise.signature(tables) != mixed.signature(tables)


def test_torch_errors_in_a_ranking_are_scenario_errors(dlrm):
    tables = next(n for n in dlrm["model"]["nodes"] if n["kind"] == "embedding_tables")
    tables["params"]["tables"][0]["pooling"] = 10 ** 12
    dlrm["training"]["batch_size"] = 10 ** 12
    with pytest.raises(ScenarioError, match="torch cannot build"):
        rank_shardings(dlrm)


def test_sharded_lookups_keep_their_block(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    graph = capture_training_step(build_workload(
        dlrm, shard=RankShard(0, 8, frozenset(keys[:2]), 64, 512)), gpu=True)
    assert {n["block"] for n in _nodes(graph, "aten::_embedding_bag")
            if n["phase"] == "forward"} == {"tables"}
    assert _nodes(graph, "mldse::all_to_all")[0]["block"] == "tables"


def test_unknown_parallelism_settings_are_named(dlrm):
    dlrm["parallelism"] = {"embeding_sharding": {}}
    with pytest.raises(ScenarioError) as info:
        validate_scenario(dlrm)
    assert info.value.issues[0].field == "parallelism.embeding_sharding"


def test_every_preset_as_a_graph_resolves_to_the_preset():
    from predictors.hardware.platforms import PLATFORM_PRESETS, preset_graph
    from predictors.scenario.format import validate_platform
    for name, p in PLATFORM_PRESETS.items():
        r = resolve_platform(validate_platform(preset_graph(name)))
        assert (r.device, r.gpus, r.nodes, r.intra_link, r.inter_link) == \
            (p.device, p.gpus, p.nodes, p.intra_link, p.inter_link), name


# --- row-wise sharding ---------------------------------------------------------------

def test_a_row_wise_rank_looks_up_its_block_and_reduce_scatters(dlrm):
    from predictors.model.index_law import index_cdf

    tables = tables_of(dlrm)
    rw = frozenset(t.key for t in tables[:2])   # table 0: Zipf 1.05, table 1: uniform
    spec0 = dlrm["model"]["nodes"][2]["params"]["tables"][0]
    lookups = {}
    for rank in (0, 7):
        shard = RankShard(rank, 8, frozenset(), 64, 512, rowwise=rw)
        graph = capture_training_step(build_workload(dlrm, shard=shard), gpu=True)
        bags = [n for n in _nodes(graph, "aten::_embedding_bag") if n["phase"] == "forward"]
        assert sorted(n["lookup"]["table"] for n in bags) == sorted(rw)
        assert all(n["output_shapes"][0] == (512, 16) for n in bags)   # partial bags
        (rs,) = _nodes(graph, "mldse::reduce_scatter")
        assert rs["input_shapes"] == [(512, 16)] * 2 and rs["output_shapes"] == [(64, 16)] * 2
        (ag,) = _nodes(graph, "mldse::all_gather")
        assert ag["thread"] == "autograd" and ag["output_shapes"] == [(512, 16)] * 2
        zipf = next(n for n in bags if n["lookup"]["table"] == tables[0].key)
        lookups[rank] = zipf["input_shapes"][1][0]
        block = math.ceil(spec0["rows"] / 8)
        assert zipf["input_shapes"][0][0] == block   # its rows only
        memory = graph.graph["memory"]
        assert memory.resident["parameters"] < sum(t.bytes for t in tables) / 2
    # a Zipf table's hot rows are all in rank 0's block
    block = math.ceil(spec0["rows"] / 8)
    assert lookups[0] == round(512 * spec0["pooling"]
                               * index_cdf(spec0["rows"], spec0["distribution"], block))
    assert lookups[0] > 5 * lookups[7]


def test_index_cdf_is_the_distribution_the_batches_draw():
    from predictors.model.embedding_blocks import bag_input as _bag_input
    from predictors.model.index_law import index_cdf

    gen = torch.Generator().manual_seed(0)
    for dist in ({"kind": "uniform"}, {"kind": "zipf", "alpha": 1.05},
                 {"kind": "zipf", "alpha": 1.0}):
        table = {"rows": 10_000, "pooling": 50, "distribution": dist}
        indices, _ = _bag_input(table, 4000, "cpu", gen)
        for k in (1, 10, 2500, 9999):
            assert (indices < k).double().mean().item() == pytest.approx(
                index_cdf(table["rows"], dist, k), abs=0.005)


def test_a_table_bigger_than_a_gpu_goes_row_wise(dlrm):
    doc = copy.deepcopy(dlrm)
    doc["platform"] = {"preset": "pcie-4x-a100"}
    doc["model"]["nodes"][2]["params"]["tables"][0]["rows"] = 781_000_000   # 50 GB
    result = predict(doc)
    assert result.sharding["assignment"]["tables/0"] == "rw"
    assert sum(v == "rw" for v in result.sharding["assignment"].values()) == 1
    assert all(r["memory"]["fits"] for r in result.per_rank)
    assert "1 of them row-wise" in " ".join(result.notes)
    names = {result.timeline.names[i] for i in np.unique(result.timeline.name_id)}
    assert {"nccl:reduce_scatter", "nccl:all_gather", "nccl:all_to_all"} <= names


def test_row_wise_plans_place_bytes_on_every_rank():
    tables = [TableRef(f"t/{i}", "t", i, rows, 16, 4, {"kind": "uniform"}, 4)
              for i, rows in enumerate([1000, 10, 1_000_000])]
    plan = Plan("p", 4, {"t/0": 1, "t/1": 1, "t/2": "rw"})
    assert plan.local(1) == frozenset({"t/0", "t/1"}) and plan.rowwise == {"t/2"}
    assert plan.rank_bytes(tables) == [1_000_000 / 4 * 64] * 1 + [
        (1010 + 250_000) * 64] + [1_000_000 / 4 * 64] * 2
    other = Plan("q", 4, {"t/0": 2, "t/1": 2, "t/2": "rw"})
    assert plan.signature(tables) == other.signature(tables)
    assert plan.signature(tables) != Plan("r", 4, {"t/0": 1, "t/1": 1, "t/2": 3}
                                          ).signature(tables)


def test_the_scenario_may_place_a_table_row_wise(dlrm):
    doc = copy.deepcopy(dlrm)
    doc["parallelism"] = {"embedding_sharding": {"tables/0": "rw", "tables/1": 3}}
    validate_scenario(doc)
    doc["parallelism"] = {"embedding_sharding": {"tables/0": "rows"}}
    with pytest.raises(ScenarioError, match="'rw'"):
        validate_scenario(doc)


def test_row_wise_plans_know_which_rank_is_hot():
    from predictors.model.sharding import greedy_with_rowwise

    zipf = {"kind": "zipf", "alpha": 1.05}
    tables = [TableRef("t/0", "t", 0, 781_000_000, 16, 4, zipf, 4)] + [
        TableRef(f"t/{i}", "t", i, 1000, 16, 4, {"kind": "uniform"}, 4) for i in (1, 2)]
    plan = greedy_with_rowwise("p", tables, 4, lambda t: float(t.rows), 40e9)
    assert plan.assignment["t/0"] == "rw"
    # rank 0 does 96 % of the row-wise table's lookups: the table-wise ones go elsewhere
    assert plan.assignment["t/1"] != 0 and plan.assignment["t/2"] != 0
    # with row-wise tables the ranks are not interchangeable
    a = Plan("a", 4, {"t/0": "rw", "t/1": 0, "t/2": 1})
    b = Plan("b", 4, {"t/0": "rw", "t/1": 3, "t/2": 1})
    assert a.signature(tables) != b.signature(tables)
    # nothing left to place and it still does not fit: refused, not returned
    with pytest.raises(PlanError):
        greedy_with_rowwise("q", tables, 4, lambda t: 1.0, 10e9)


@pytest.mark.parametrize("name,preset", [("mlperf_dlrm_dcnv2.json", None),
                                         ("bert_base.json", "dgx-h100"),
                                         ("small_dlrm.json", "dgx-a100")])
def test_rank_spans_are_the_timelines_spans(name, preset):
    """The search's figures (no Timeline drawn) are the prediction's, rank by rank."""
    from predictors.engine.parallel import RankGraphs
    from predictors.engine.predict import prepare
    from predictors.model.sharding import round_robin_plan

    doc = load_scenario(SCENARIOS / name)
    if preset:
        doc["platform"] = {"preset": preset}
    doc, platform, profile = prepare(doc)
    graphs = RankGraphs(doc, platform, profile)
    plan = round_robin_plan(graphs.tables, graphs.ranks)
    timeline = graphs.simulate(plan)
    spans = graphs.rank_spans_ms(plan)
    assert spans == pytest.approx([timeline.span_ms(r) for r in range(graphs.ranks)],
                                  rel=1e-12)
    assert len(set(spans)) > 1 or name != "mlperf_dlrm_dcnv2.json"  # ranks differ there


def test_a_late_rank_makes_the_others_wait_from_their_own_start(dlrm):
    together = predict(dlrm)
    late = predict(dlrm, rank_starts_ms=[0.0] * 7 + [3.0])
    spans = [r["iteration_ms"] for r in late.per_rank]
    alone = [r["iteration_ms"] for r in together.per_rank]
    # the early ranks wait for rank 7 at the first collective (their host goes on
    # issuing meanwhile, so they lose up to its 3 ms); rank 7's own step does not change
    assert all(1.0 < s - a <= 3.0 + 1e-6 for s, a in zip(spans[:7], alone[:7]))
    assert spans[7] == pytest.approx(alone[7], rel=1e-6)
    # rank 7's bars start at 3 ms on the Timeline's clock
    tl = late.timeline
    lanes = [i for i, ln in enumerate(tl.lanes) if ln.rank == 7 and ln.kind != "counter"]
    assert tl.start_us[np.isin(tl.lane, lanes)].min() >= 3000.0
    with pytest.raises(ValueError, match="rank_starts_ms: expected 8 start times"):
        predict(dlrm, rank_starts_ms=[0.0, 1.0])
