"""The gap before an op grows with the data around it until the caches are evicted."""
import json

import numpy as np
import pytest

from predictors.calibrate.calibrate import saturating_line
from predictors.profiles import OpOverheads


def test_a_saturating_gap_keeps_the_small_steps_intercept():
    # 25 us + 25 us per MB up to 7 MB, flat beyond (what a dropout's gap does on a VM)
    rng = np.random.default_rng(0)
    mb = np.geomspace(0.1, 60.0, 40)
    gap = 25.0 + 25.0 * np.minimum(mb, 7.0) + rng.normal(0, 2.0, len(mb))
    a, b, cap = saturating_line(mb, gap)
    assert a == pytest.approx(25.0, abs=6.0)
    assert 3.0 < cap < 15.0
    oh = OpOverheads(a * 1e-6, 0, 0, 0, 0, len(mb), b * 1e-12, cap * 1e6)
    # the smallest steps' gaps: near the intercept, where a straight line lifts them
    assert oh.t1_at(0.1e6) * 1e6 == pytest.approx(27.5, abs=6.0)
    assert oh.t1_at(500e6) == oh.t1_at(cap * 1e6)
    from predictors.calibrate.calibrate import _robust_line
    plain_a, _ = _robust_line(mb, gap)
    assert plain_a > a + 20.0
    again = OpOverheads.from_json(json.loads(json.dumps(oh.to_json())))
    assert again == oh


def test_a_straight_gap_stays_a_line():
    mb = np.geomspace(0.1, 60.0, 30)
    a, b, cap = saturating_line(mb, 5.0 + 10.0 * mb)
    assert cap == 0.0 and a == pytest.approx(5.0, rel=0.05) and b == pytest.approx(10.0, rel=0.05)
    assert OpOverheads(a, 0, 0, 0, 0, 1, b).t1_at(1e9) == pytest.approx(a + b * 1e9)


def _step(gap_us: float, written_mb: float, n_ops: int = 6):
    """A profiled step of ``n_ops`` identical small mm ops whose gaps are ``gap_us``, in
    a step that writes ``written_mb``."""
    import networkx as nx

    from predictors.calibrate.profiling import StepProfile

    node = {"name": "aten::mm", "phase": "backward", "input_shapes": [(64, 64), (64, 64)],
            "input_dtypes": ["float32"] * 2, "input_nnz": [None, None],
            "output_shapes": [(64, 64)], "output_dtypes": ["float32"], "output_nnz": [None]}
    records = [{"node": node, "dur_raw": (10.0, 1), "gap_raw": (gap_us, 0)}
               for _ in range(n_ops)]
    s = StepProfile("fake", 1, 0.0, 0.0, 0.0, records=records, events=n_ops)
    s.tail_raw = (100.0, 0)
    s.remove_profiler_cost(0.0)
    s.step_us = s.covered_us
    s.graph = nx.DiGraph(written_bytes=written_mb * 1e6)
    return s


def test_a_small_steps_gaps_are_shorter_when_the_fit_sees_the_steps_footprint():
    from predictors.calibrate.calibrate import gap_overheads

    # the same op beside the same bytes: 10 us a gap in a step writing 10 MB, 30 us at
    # 200 MB (the dispatcher's path evicted by the step's data)
    steps = [_step(10.0 + 0.1 * mb, mb) for mb in (10, 20, 50, 100, 150, 200)]
    with_step = gap_overheads(steps)
    op_only = gap_overheads(steps, with_step=False)
    assert with_step.gap_bytes == "op+step" and op_only.gap_bytes == "op"
    oh = with_step.for_op("aten::mm", "backward", "aten::mm")
    flat = op_only.for_op("aten::mm", "backward", "aten::mm")
    around = 3 * 64 * 64 * 4 * 2                 # the op's and the op before's bytes
    assert oh.t1_at(around + 10e6) * 1e6 == pytest.approx(11.0, abs=1.0)
    assert oh.t1_at(around + 200e6) * 1e6 == pytest.approx(30.0, abs=1.5)
    # without the step's bytes every op sits at one size: one median for all steps
    assert flat.t1_per_byte == 0.0 and flat.t1 * 1e6 == pytest.approx(17.5, abs=5.0)
    from predictors.profiles import OverheadTable
    again = OverheadTable.from_json(json.loads(json.dumps(with_step.to_json())))
    assert again.gap_bytes == "op+step"
    assert OverheadTable.from_json(op_only.to_json()).gap_bytes == "op"


def test_the_costing_adds_the_steps_footprint_to_a_gap_fitted_with_it():
    import networkx as nx

    from predictors.costs.op_costs import cost_op_graph
    from predictors.hardware.platforms import resolve_platform
    from predictors.profiles import OverheadTable

    node = {"name": "aten::mm", "phase": "backward", "input_shapes": [(64, 64), (64, 64)],
            "input_dtypes": ["float32"] * 2, "input_nnz": [None, None],
            "output_shapes": [(64, 64)], "output_dtypes": ["float32"], "output_nnz": [None],
            "thread": "main", "block": "b", "grad_fn": ""}
    oh = OpOverheads(10e-6, 0, 0, 0, 0, 8, 0.1e-12)   # 0.1 us per MB
    platform = resolve_platform({"preset": "local-cpu", "threads": 1})

    def gaps(table, written):
        g = nx.DiGraph(written_bytes=written)
        g.add_node(0, **node)
        return cost_op_graph(g, platform, overheads=table).ops[0].overheads.t1

    step = OverheadTable(oh, {}, 0.0, "", 0.0, "op+step")
    ops = OverheadTable(oh, {}, 0.0, "", 0.0, "op")
    assert gaps(step, 200e6) - gaps(step, 10e6) == pytest.approx(19e-6, rel=1e-6)
    assert gaps(ops, 200e6) == gaps(ops, 10e6)


def test_the_training_loops_time_grows_with_the_parameters_it_walks():
    from predictors.calibrate.calibrate import gap_overheads

    steps = []
    for updates in (15, 15, 27, 39, 51, 51):
        s = _step(10.0, 50.0)
        s.records += [{"node": dict(s.records[0]["node"], phase="optimizer"),
                       "dur_us": 1.0, "gap_us": 1.0} for _ in range(updates)]
        s.tail_us = 40.0 + 9.0 * updates          # zero_grad and the optimizer's loop
        steps.append(s)
    table = gap_overheads(steps)
    assert table.step_s * 1e6 == pytest.approx(40.0, abs=2.0)
    assert table.step_s_per_update * 1e6 == pytest.approx(9.0, rel=0.05)
    assert table.step_tail_s(15) * 1e6 == pytest.approx(175.0, rel=0.03)
    from predictors.profiles import OverheadTable
    assert OverheadTable.from_json(json.loads(json.dumps(table.to_json()))) == table


def test_the_costing_charges_each_step_its_own_training_loop():
    import networkx as nx

    from predictors.costs.op_costs import cost_op_graph
    from predictors.hardware.platforms import resolve_platform
    from predictors.profiles import OverheadTable

    def graph(updates):
        g = nx.DiGraph(written_bytes=1e6)
        for i in range(updates):
            g.add_node(i, name="aten::add_", phase="optimizer", thread="main", block="w",
                       grad_fn="", input_shapes=[(64,), (64,)],
                       input_dtypes=["float32"] * 2, input_nnz=[None, None],
                       output_shapes=[(64,)], output_dtypes=["float32"],
                       output_nnz=[None])
        return g

    platform = resolve_platform({"preset": "local-cpu", "threads": 1})
    table = OverheadTable(OpOverheads(1e-6, 0, 0, 0, 0), {}, 0.0, "", 40e-6, "op", 9e-6)
    small = cost_op_graph(graph(15), platform, overheads=table).overheads.step_s
    large = cost_op_graph(graph(51), platform, overheads=table).overheads.step_s
    assert small == pytest.approx(40e-6 + 15 * 9e-6)
    assert large - small == pytest.approx(36 * 9e-6)
