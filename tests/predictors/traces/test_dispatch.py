"""The recorded ops a dispatch-level capture sees, on a real H200 trace."""
import numpy as np
from paths import ROOT

from predictors.traces.dispatch import (
    dispatch_level_ops,
    dispatched_names,
    fused_token,
    nest,
)
from predictors.traces.kineto import Kind
from predictors.traces.overhead_tables import trace_overheads
from predictors.traces.recording import load_recording

LM_TRACE = (ROOT / "resources" / "measurements" / "nvidia-h200-2026-11-29-seed11"
            / "scenario03.json.gz")  # random LM 4x128, fp32, dropout


def test_composite_ops_are_not_dispatched():
    names = {"aten::linear", "aten::addmm", "aten::layer_norm", "aten::native_layer_norm",
             "aten::dropout", "aten::native_dropout", "aten::to", "aten::_to_copy",
             "aten::matmul", "aten::bmm", "ProfilerStep#0", "autograd::engine::x"}
    assert dispatched_names(names) == {"aten::addmm", "aten::native_layer_norm",
                                       "aten::native_dropout", "aten::_to_copy", "aten::bmm"}
    assert fused_token("aten::_scaled_dot_product_cudnn_attention") == fused_token(
        "aten::_scaled_dot_product_efficient_attention") == "attention"


def test_dispatch_level_ops_of_a_real_trace():
    tr = load_recording([str(LM_TRACE)]).traces[0]
    cpu = np.flatnonzero(tr.kind == Kind.CPU_OP)
    order, parent = nest(tr, cpu)
    all_names = {tr.names[tr.name_id[i]] for i in cpu}
    picked = dispatch_level_ops(tr, order, parent, dispatched_names(all_names))
    names = [tr.names[tr.name_id[i]] for i in picked]
    assert {"aten::native_layer_norm", "aten::addmm", "aten::native_dropout",
            "aten::_foreach_add_"} <= set(names)
    # wrappers, views and what runs inside a dispatched op are not
    assert not {"aten::linear", "aten::layer_norm", "aten::dropout", "aten::empty",
                "aten::view", "aten::as_strided"} & set(names)
    assert "aten::empty" in all_names and "aten::layer_norm" in all_names
    starts = tr.ts[picked]
    assert np.all(np.diff(starts) >= 0)
    # none of them encloses another
    for i in picked:
        p = parent[i]
        while p >= 0:
            assert p not in set(picked)
            p = parent[p]


def test_trace_overheads_are_keyed_by_dispatched_ops():
    table, _, info = trace_overheads([load_recording([str(LM_TRACE)])])
    assert "aten::native_layer_norm" in table.per_op
    ln = table.per_op["aten::native_layer_norm"]
    # seconds, of a traced host: a kernel launch of a few microseconds (5.9 here), a gap
    # before the op of tens (24 here, the profiler's own cost included)
    assert 1e-6 < ln.t4 < 20e-6 and 1e-6 < ln.t1 < 100e-6
    view = table.for_op("aten::view")
    assert (view.t1, view.t5) == (0.0, 0.0)  # views run inside the gaps
    assert info["ops"] > 100
