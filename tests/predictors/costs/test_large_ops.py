"""CPU ops larger than calibration measured: first-touch page faults of fresh large
outputs, GEMMs beyond a learned model's range, DRAM-bound ops beyond it."""
import dataclasses

import numpy as np
import pytest

from predictors.costs.large_ops import (
    DEFAULT_PAGE_FAULT_NS,
    MMAP_THRESHOLD_BYTES,
    first_touch_s,
    fresh_bytes,
    gemm_flops_of,
    shrunk_gemm,
)
from predictors.costs.op_costs import kernel_seconds
from predictors.hardware.specs import device_spec
from predictors.profiles import DeviceProfile, OpOverheads, OverheadTable

ROWS, VOCAB, HIDDEN = 1024, 30_000, 512   # batch 8 x seq 128, a BERT-sized vocabulary


def _node(name, ins, outs, phase="forward"):
    return {"name": name, "input_shapes": [tuple(s) for s in ins],
            "input_dtypes": ["float32"] * len(ins), "input_nnz": [None] * len(ins),
            "output_shapes": [tuple(s) for s in outs],
            "output_dtypes": ["float32"] * len(outs), "output_nnz": [None] * len(outs),
            "phase": phase, "thread": "main"}


def _cpu(**kw):
    return dataclasses.replace(device_spec("cpu", 1), **kw)


def test_fresh_outputs_above_the_mmap_threshold_fault_on_every_page():
    logits = _node("aten::_log_softmax", [(ROWS, VOCAB)], [(ROWS, VOCAB)])
    assert fresh_bytes(logits) == ROWS * VOCAB * 4
    # in place, a view, a small output, an allocation nobody writes: no fresh pages
    assert fresh_bytes(_node("aten::add_", [(VOCAB, HIDDEN)] * 2, [(VOCAB, HIDDEN)])) == 0
    assert fresh_bytes(_node("aten::view", [(ROWS, VOCAB)], [(8, 128, VOCAB)])) == 0
    assert fresh_bytes(_node("aten::empty", [], [(ROWS, VOCAB)])) == 0
    small = MMAP_THRESHOLD_BYTES // 4 - 1024
    assert fresh_bytes(_node("aten::mul", [(small,)] * 2, [(small,)])) == 0
    cpu = _cpu(page_fault_ns=1000.0)
    pages = ROWS * VOCAB * 4 / 4096
    assert first_touch_s(logits, cpu) == pytest.approx(pages * 1e-6)
    assert first_touch_s(logits, _cpu()) == pytest.approx(pages * DEFAULT_PAGE_FAULT_NS * 1e-9)
    assert first_touch_s(logits, device_spec("H100")) == 0.0


def test_the_measured_fault_cost_moves_the_op_by_its_pages():
    logits = _node("aten::_log_softmax", [(ROWS, VOCAB)], [(ROWS, VOCAB)])
    fast = kernel_seconds([logits], _cpu(page_fault_ns=500.0))
    slow = kernel_seconds([logits], _cpu(page_fault_ns=1500.0))
    pages = ROWS * VOCAB * 4 / 4096
    assert slow[1][0] - fast[1][0] == pytest.approx(pages * 1e-6, rel=1e-6)
    assert "first touch of 123 MB" in fast[2][0]
    # the same op writing into memory that exists pays none
    inplace = _node("aten::add_", [(ROWS, VOCAB)] * 2, [(ROWS, VOCAB)])
    assert kernel_seconds([inplace], _cpu(page_fault_ns=500.0))[1] == kernel_seconds(
        [inplace], _cpu(page_fault_ns=1500.0))[1]


def test_a_gemm_beyond_the_range_is_cut_along_its_longest_dimension():
    head = _node("aten::mm", [(ROWS, VOCAB), (VOCAB, HIDDEN)], [(ROWS, HIDDEN)])
    cut, factor = shrunk_gemm(head, 4e9)
    (m, k), (k2, n) = cut["input_shapes"]
    assert (m, n) == (ROWS, HIDDEN) and k == k2 and k < VOCAB
    assert k % 16 == 0                           # 30,000 is a multiple of 16; so is the cut
    assert gemm_flops_of(cut) <= 4e9 and gemm_flops_of(cut) > 0.99 * 4e9 - 2 * m * n * 16
    assert factor == pytest.approx(gemm_flops_of(head) / gemm_flops_of(cut))
    assert cut["output_shapes"] == [(ROWS, HIDDEN)]
    assert shrunk_gemm(_node("aten::mm", [(64, 64), (64, 64)], [(64, 64)]), 4e9) is None
    addmm = _node("aten::addmm", [(VOCAB,), (ROWS, HIDDEN), (HIDDEN, VOCAB)], [(ROWS, VOCAB)])
    cut, _ = shrunk_gemm(addmm, 4e9)
    assert cut["input_shapes"][0] == (cut["input_shapes"][2][1],)   # the bias follows n


class _SaturatedModel:
    """A learned model that, like a tree ensemble, predicts its largest sample's time
    for anything larger: 100 GFLOP/s up to 4 GFLOP, flat beyond."""

    op_class = "gemm"

    def __init__(self):
        self.metrics = {"max_flops": 4e9}

    def predict_ms(self, nodes):
        return np.array([min(gemm_flops_of(n), 4e9) / 1e11 * 1e3 for n in nodes])


class _FlatElementwise:
    op_class = "elementwise"

    def __init__(self, ms):
        self.ms, self.metrics = ms, {"max_bytes": 50e6}

    def predict_ms(self, nodes):
        return np.array([self.ms for _ in nodes])   # whatever the size


def _profile(model, **device):
    table = OverheadTable(OpOverheads(0, 0, 0, 0, 0), {}, 0.0, "test")
    return DeviceProfile("test", "measured", _cpu(**device), table, {},
                         {model.op_class: model})


def test_a_gemm_beyond_the_range_runs_at_the_throughput_of_its_largest_size():
    head = _node("aten::mm", [(ROWS, VOCAB), (VOCAB, HIDDEN)], [(ROWS, HIDDEN)])
    inside = _node("aten::mm", [(1024, 2048), (2048, 512)], [(1024, 512)])
    _, seconds, models = kernel_seconds([head, inside], device_spec("cpu", 1),
                                        _profile(_SaturatedModel()))
    # 31.5 GFLOP at the 100 GFLOP/s the model predicts at its edge, not its flat 40 ms
    assert seconds[0] == pytest.approx(gemm_flops_of(head) / 1e11, rel=0.01)
    assert "beyond its range" in models[0]
    assert seconds[1] == pytest.approx(gemm_flops_of(inside) / 1e11)   # in range: as is
    assert "beyond" not in models[1]


@pytest.mark.parametrize("model_ms", [0.5, 500.0])   # extrapolating low, and high
def test_a_memory_bound_op_beyond_the_range_streams_at_dram_bandwidth(model_ms):
    update = _node("aten::add_", [(VOCAB, HIDDEN)] * 2, [(VOCAB, HIDDEN)], "optimizer")
    small = _node("aten::add_", [(512, 512)] * 2, [(512, 512)], "optimizer")
    _, seconds, models = kernel_seconds([update, small], device_spec("cpu", 1),
                                        _profile(_FlatElementwise(model_ms), stream_bytes_per_s=10e9))
    nbytes = 3 * VOCAB * HIDDEN * 4
    assert seconds[0] == pytest.approx(nbytes / 10e9)
    assert "DRAM bandwidth" in models[0]
    assert seconds[1] == pytest.approx(model_ms * 1e-3)   # in range: the model's
    # a faster DRAM, a faster op: the bandwidth is the feature
    faster = kernel_seconds([update], device_spec("cpu", 1),
                            _profile(_FlatElementwise(model_ms), stream_bytes_per_s=20e9))[1][0]
    assert faster == pytest.approx(seconds[0] / 2)


def test_a_gemm_beyond_the_range_runs_no_faster_than_its_fastest_large_samples():
    from predictors.costs.learned_models import fitted_range

    # samples of 0.5-4 GFLOP measured at 100 GFLOP/s, a few smaller ones faster
    nodes = [_node("aten::mm", [(1024, k), (k, 1024)], [(1024, 1024)])
             for k in (256, 512, 1024, 1536, 2048)] + [
        _node("aten::mm", [(64, 64), (64, 64)], [(64, 64)])]
    ms = [2 * 1024 * 1024 * k / 1e11 * 1e3 for k in (256, 512, 1024, 1536, 2048)] + [1e-3]
    top = fitted_range(nodes, device_spec("cpu", 1), ms)
    assert top["max_flops"] == pytest.approx(2 * 1024 * 1024 * 2048)
    assert top["top_flops_per_s"] == pytest.approx(1e11)

    class Optimistic(_SaturatedModel):   # its edge predicted at 400 GFLOP/s
        def __init__(self):
            self.metrics = {"max_flops": 4e9, "top_flops_per_s": 1e11}

        def predict_ms(self, nodes):
            return np.array([gemm_flops_of(n) / 4e11 * 1e3 for n in nodes])

    head = _node("aten::mm", [(ROWS, VOCAB), (VOCAB, HIDDEN)], [(ROWS, HIDDEN)])
    seconds = kernel_seconds([head], device_spec("cpu", 1), _profile(Optimistic()))[1]
    assert seconds[0] == pytest.approx(gemm_flops_of(head) / 1e11)


def test_a_sparse_gradient_maps_its_values_afresh():
    """An embedding's sparse gradient holds [nnz, dim] values, not [rows, dim]: a small
    table looked up 95 times a sample at batch 2,048 writes 50 MB of them every step."""
    def grad(rows, nnz):
        node = _node("aten::_embedding_bag_backward", [(2048, 64), (nnz,)], [(rows, 64)],
                     phase="backward")
        node["output_nnz"] = [nnz]
        return node

    assert fresh_bytes(grad(9_595, 194_560)) == 194_560 * 64 * 4
    assert fresh_bytes(grad(10_000_000, 2_048)) == 0   # a huge table, few lookups
