"""Link lanes: a multi-GPU prediction draws one lane per physical link its collectives
cross (the engine's own routes, predictors/hardware/network.py), with the bytes each
collective puts on it and its utilisation; CPU platforms have none."""
import re

import numpy as np
import pytest
from paths import SCENARIOS

from predictors.engine.predict import predict
from predictors.engine.timeline import CATEGORIES, LINKS_RANK
from predictors.hardware.platforms import preset_graph
from predictors.model.comm_ops import PROFILER_NAMES
from predictors.scenario.format import load_scenario

_UNITS = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _doc(platform: dict) -> dict:
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = platform
    return doc


def _predict(platform: dict):
    return predict(_doc(platform))


@pytest.fixture(scope="module")
def dgx_h100():
    return _predict({"preset": "dgx-h100"})


def _link_bars(tl, name: str) -> np.ndarray:
    lane = next(i for i, l in enumerate(tl.lanes) if l.kind == "link" and l.name == name)
    idx = np.flatnonzero(tl.lane == lane)
    return idx[np.argsort(tl.start_us[idx], kind="stable")]


def _bytes_and_use(detail: str) -> tuple[float, float]:
    m = re.match(r"([\d,.]+) (B|kB|MB|GB) over .*?, ([\d.]+)% of its ([\d,]+) GB/s", detail)
    return float(m[1].replace(",", "")) * _UNITS[m[2]], float(m[3]) / 100


def _collectives(tl, rank: int) -> np.ndarray:
    """The rank's collective kernels on its communication stream, by start."""
    lanes = [i for i in tl.lanes_of(rank, "stream") if "communication" in tl.lanes[i].name]
    idx = np.flatnonzero(np.isin(tl.lane, lanes))
    return idx[np.argsort(tl.start_us[idx], kind="stable")]


def test_a_dgx_h100_dlrm_step_has_a_lane_per_nvlink_port(dgx_h100):
    tl = dgx_h100.timeline
    links = [l for l in tl.lanes if l.kind == "link"]
    assert [l.name for l in links] == [f"NVLink gpu{i}↔nvswitch" for i in range(8)]
    assert {l.rank for l in links} == {LINKS_RANK}
    assert tl.ranks == list(range(8))            # the links are no rank
    assert len(dgx_h100.per_rank) == 8
    # one bar per collective per link, drawn as communication
    bars = _link_bars(tl, "NVLink gpu3↔nvswitch")
    assert len(bars) == len(_collectives(tl, 0))
    assert set(tl.category[bars]) == {CATEGORIES.index("communication")}


def test_link_bars_carry_the_bytes_of_the_rule(dgx_h100):
    """The q-th bar of a link spans the q-th collective's run (the last rank's arrival to
    its end) and carries, on a DGX's NVSwitch, 7/8 of an all-to-all's message and
    2 x 7/8 of a ring all-reduce's (docs/models/collectives.md, "Link lanes")."""
    tl = dgx_h100.timeline
    bars = _link_bars(tl, "NVLink gpu0↔nvswitch")
    per_rank = [_collectives(tl, r) for r in range(8)]
    graphs_bytes = _message_bytes(_doc({"preset": "dgx-h100"}))
    seen = set()
    for q, bar in enumerate(bars):
        ends = [tl.start_us[c[q]] + tl.dur_us[c[q]] for c in per_rank]
        assert tl.start_us[bar] + tl.dur_us[bar] == pytest.approx(max(ends))
        assert tl.start_us[bar] >= max(tl.start_us[c[q]] for c in per_rank) - 1e-6
        name = tl.names[tl.name_id[bar]]
        assert name == tl.names[tl.name_id[per_rank[0][q]]]
        detail = tl.details[tl.detail_id[bar]]
        nbytes, use = _bytes_and_use(detail)
        kind, algorithm = detail.split(" | ")[-1].split(",")[0].split()
        share = {("all_to_all", "p2p"): 7 / 8, ("all_reduce", "ring"): 2 * 7 / 8,
                 ("all_reduce", "nvls"): 9 / 8}[(kind, algorithm)]
        assert nbytes == pytest.approx(share * graphs_bytes[q], rel=2e-3), detail
        assert use == pytest.approx(nbytes / (tl.dur_us[bar] * 1e-6 * 450e9), abs=6e-4)
        seen.add(kind)
    assert seen == {"all_to_all", "all_reduce"}


def _message_bytes(scenario: dict) -> list[float]:
    """Each collective's message in issue order (the largest any rank sends), from the
    ranks' captured graphs, as the prediction prices it."""
    from predictors.engine.parallel import RankGraphs, scenario_plan
    from predictors.engine.predict import prepare

    doc, platform, profile = prepare(scenario, None, None)
    graphs = RankGraphs(doc, platform, profile)
    plan = scenario_plan(graphs)
    ops = [[op for op in graphs.rank_graph(plan, r).ops if op.category == "communication"]
           for r in range(graphs.ranks)]
    return [max(o[q].bytes for o in ops) for q in range(len(ops[0]))]


def test_a_halved_link_is_busier_and_its_collectives_longer():
    """One A100 of a DGX A100 on NVLink2 (half NVLink3): its port carries the same bytes
    at half the bandwidth, so it shows twice its peers' utilisation, and every
    collective (a ring as slow as its slowest route) lasts at least as long as on the
    uniform DGX, the all-reduces longer."""
    uniform = _predict({"preset": "dgx-a100"}).timeline
    graph = preset_graph("dgx-a100")
    for e in graph["edges"]:
        if {e["source"], e["target"]} == {"gpu5", "nvswitch"}:
            e["kind"] = "nvlink2"
    halved = _predict(graph).timeline
    slow = [_bytes_and_use(halved.details[halved.detail_id[i]])
            for i in _link_bars(halved, "NVLink gpu5↔nvswitch")]
    fast = [_bytes_and_use(halved.details[halved.detail_id[i]])
            for i in _link_bars(halved, "NVLink gpu0↔nvswitch")]
    for (b_slow, u_slow), (b_fast, u_fast) in zip(slow, fast):
        assert b_slow == pytest.approx(b_fast)
        assert u_slow == pytest.approx(2 * u_fast, rel=0.1, abs=2e-3)
    before = uniform.dur_us[_link_bars(uniform, "NVLink gpu5↔nvswitch")]
    after = halved.dur_us[_link_bars(halved, "NVLink gpu5↔nvswitch")]
    assert np.all(after >= before - 1e-6) and after.sum() > before.sum()


def test_cpu_ranks_have_no_link_lanes():
    tl = _predict({"preset": "local-cpu", "ranks": 2}).timeline
    assert tl.ranks == [0, 1]
    assert not [l for l in tl.lanes if l.kind == "link"]


def test_the_chrome_trace_puts_the_links_in_a_process_after_the_ranks(dgx_h100):
    trace = dgx_h100.timeline.to_chrome_trace()["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert names[8] == "links" and names[0] == "rank 0"
    assert all(e["pid"] >= 0 for e in trace)
    links = [e for e in trace if e["ph"] == "X" and e["pid"] == 8]
    assert links and all(e["name"] in PROFILER_NAMES.values() for e in links)
