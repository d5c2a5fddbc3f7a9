"""GPU overheads per captured op, from the bundled H200 traces."""
import pytest
from paths import ROOT
from cpu_scenarios import small_transformer

from predictors.calibrate.cuda_overheads import (
    aligned_overheads,
    aligned_step,
    dispatch_us,
    fit_profiler_cost,
    launch_bound,
)
from predictors.calibrate.cuda_profile import _recordings, load_measurements
from predictors.costs.roofline import kernel_cost
from predictors.hardware.specs import device_spec
from predictors.model.capture import capture_training_step, op_sequence
from predictors.model.workload import build_workload

SEED11 = ROOT / "resources" / "measurements" / "nvidia-h200-2026-11-29-seed11"


@pytest.fixture(scope="module")
def steps():
    doc = load_measurements(SEED11)
    recs = _recordings(doc)
    return {r["index"]: (r, aligned_step(r["doc"], recs[r["index"]],
                                         r["measure"]["iteration_ms"]))
            for r in doc["scenarios"] if r.get("measure") and r["index"] in recs}


def test_every_captured_op_finds_its_recorded_twin(steps):
    """A DLRM (sparse SGD, one add_ per parameter), an fp32 LM (dropout, efficient
    attention, the multi-tensor SGD step) and a bf16 LM (cuDNN attention): every compute
    op of the GPU capture is paired, and the pairs, their gaps and the step's tail
    account for the whole traced step."""
    for index in (0, 3, 15):
        row, step = steps[index]
        assert step.unaligned == 0 and len(step.records) > 50, row["doc"]["name"]
        raw, events = step.raw_us()
        assert raw == pytest.approx(step.profiled_step_us, rel=0.01)
        assert 0 < events <= step.events
    names = {r["node"]["name"] for r in steps[3][1].records}
    assert {"aten::native_dropout", "aten::_foreach_add_"} <= names
    assert "aten::bernoulli_" not in names


def test_launch_bound_steps_are_told_from_gpu_bound_ones(steps):
    assert launch_bound(steps[3][1])  # a small LM: the GPU idles
    assert not launch_bound(steps[14][1])  # 12 x 2048 bf16 LM: 78 of 82 ms busy


@pytest.mark.slow   # `make test-full`
def test_profiler_cost_is_recovered(steps):
    """Unprofiled times made from a known cost: the fit finds it again."""
    import copy

    from predictors.calibrate.cuda_overheads import _table

    pool = [copy.deepcopy(s) for _, s in steps.values()]
    truth = _table(pool, 1.5)
    for s in pool:
        if launch_bound(s):
            s.step_us = dispatch_us(truth, s)
    assert fit_profiler_cost(pool) == pytest.approx(1.5, abs=0.05)


@pytest.mark.slow   # every op of 16 steps; `make test-full`
def test_table_is_keyed_by_the_ops_the_simulator_walks(steps):
    table, info = aligned_overheads([s for _, s in steps.values()], "H200 test")
    assert 0.3 < info["profiler_us_per_event"] < 4.0  # ~2 us on this host
    assert info["unaligned_ops"] == 0
    # a composite op the capture sees whole, not its inner aten::empty
    ln = table.for_op("aten::native_layer_norm", "forward")
    assert ln is not table.default and 1e-6 < ln.t4 < 20e-6  # a launch: microseconds (6)
    assert table.for_op("aten::view").t1 == 0.0  # views run inside the gaps
    assert 0 < table.step_s < 2e-3


def test_gpu_capture_records_the_multi_tensor_sgd_step_and_fused_dropout():
    doc = small_transformer()
    doc["model"]["nodes"][1]["params"]["dropout"] = 0.1
    gpu = op_sequence(capture_training_step(build_workload(doc), gpu=True))
    cpu = op_sequence(capture_training_step(build_workload(doc)))
    assert gpu.count("aten::_foreach_add_") == 1 and "aten::_foreach_add_" not in cpu
    assert cpu.count("aten::add_") > gpu.count("aten::add_")
    assert "aten::bernoulli_" in cpu and "aten::bernoulli_" not in gpu
    # attention's own dropout runs inside the fused attention kernel
    layers = doc["model"]["nodes"][1]["params"]["count"]
    assert gpu.count("aten::native_dropout") == cpu.count("aten::bernoulli_") - layers
    assert gpu.count("aten::native_dropout_backward") == gpu.count("aten::native_dropout")


def test_gpu_capture_takes_the_math_path_for_unaligned_heads():
    """Head dim 6 (fp32 needs a multiple of 4): torch runs its math attention on the GPU
    (seen on the H200 for head dim 38), with a fused dropout."""
    doc = small_transformer()
    doc["model"]["nodes"][1]["params"].update(hidden=24, heads=4, dropout=0.1)
    gpu = op_sequence(capture_training_step(build_workload(doc), gpu=True))
    assert not any("scaled_dot_product" in n for n in gpu)
    assert gpu.count("aten::_safe_softmax") == 2 and "aten::bernoulli_" not in gpu
    assert gpu.count("aten::native_dropout") == 2 * 4  # 3 per layer + the attention's


def test_foreach_update_reads_both_lists_and_writes_the_first():
    node = {"name": "aten::_foreach_add_", "input_shapes": [(1000,), (10, 10), (1000,),
                                                            (10, 10)],
            "input_dtypes": ["float32"] * 4, "input_nnz": [None] * 4,
            "output_shapes": [], "output_dtypes": [], "output_nnz": []}
    cost = kernel_cost(node, device_spec("NVIDIA H200"))
    assert cost.bytes == 3 * 1100 * 4 and cost.flops == 1100


def test_several_traced_steps_give_per_op_medians(tmp_path):
    """`measure(trace_steps=3)` (what `calibrate --device cuda` records) writes three
    step spans; the alignment pairs each step and keeps every op's median.  On the CPU
    here: the same code, with the capture of a CPU run."""
    from cpu_scenarios import tiny_dlrm

    from predictors.calibrate.measure import measure
    from predictors.traces.recording import load_recording

    path = tmp_path / "steps.json.gz"
    doc = tiny_dlrm()
    out = measure(doc, iters=3, warmup=1, trace=path, trace_steps=3)
    rec = load_recording([str(path)])
    assert len(rec.traces[0].steps()) == 3
    step = aligned_step(doc, rec, out["iteration_ms"], gpu=False)
    assert step.profiled_steps == 3 and step.unaligned == 0 and len(step.records) > 20
    assert all(r["launch_raw"] is None for r in step.records)  # a CPU run launches nothing
    raw, _ = step.raw_us()  # medians: within the spread of the three steps
    spans = sorted(d for _, _, d in rec.traces[0].steps())
    assert 0.5 * spans[0] < raw < 1.5 * spans[-1]
