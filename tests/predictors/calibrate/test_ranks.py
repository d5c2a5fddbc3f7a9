"""CPU ranks of local-cpu: real gloo runs of a sharded DLRM, and their prediction."""
import json
import subprocess
import sys
import textwrap

import pytest
from paths import ROOT

from predictors.costs.gloo import gloo_time_us
from predictors.engine.predict import predict
from predictors.scenario.format import ScenarioError, validate_scenario


def _two_rank_dlrm(ranks=2, sharding="auto"):
    tables = [{"rows": 10_000, "dim": 16, "pooling": 4, "distribution": {"kind": "uniform"}},
              {"rows": 50_000, "dim": 16, "pooling": 8,
               "distribution": {"kind": "zipf", "alpha": 1.1}},
              {"rows": 2_000, "dim": 16, "pooling": 2, "distribution": {"kind": "uniform"}},
              {"rows": 5_000, "dim": 16, "pooling": 3, "distribution": {"kind": "uniform"}}]
    nodes = [{"id": "dense", "kind": "dense_input", "params": {"features": 13}},
             {"id": "bot", "kind": "mlp", "params": {"layers": [64, 16], "final": "relu"}},
             {"id": "tables", "kind": "embedding_tables", "params": {"tables": tables}},
             {"id": "inter", "kind": "interaction", "params": {"op": "dot"}},
             {"id": "top", "kind": "mlp", "params": {"layers": [32, 1], "final": None}},
             {"id": "loss", "kind": "loss", "params": {"kind": "bce"}}]
    edges = [("dense", "bot"), ("bot", "inter"), ("tables", "inter"), ("inter", "top"),
             ("top", "loss")]
    return {"format": "ml-dse/scenario", "version": 1, "name": "two CPU ranks",
            "model": {"nodes": nodes, "edges": [{"source": a, "target": b}
                                                for a, b in edges]},
            "platform": {"preset": "local-cpu", "threads": 1, "ranks": ranks},
            "training": {"batch_size": 256, "optimizer": "sgd", "dtype": "float32"},
            "parallelism": {"embedding_sharding": sharding}}


def test_measure_trains_two_gloo_ranks_for_real(tmp_path):
    path = tmp_path / "ranks.json"
    plan = {"tables/0": 0, "tables/1": "dp", "tables/2": "rw",   # every kind of table
            "tables/3": {"kind": "cw", "ranks": [1, 0]}}
    path.write_text(json.dumps(_two_rank_dlrm(sharding=plan)))
    out = subprocess.run([sys.executable, "-m", "predictors", "measure", str(path),
                          "--iters", "3", "--warmup", "1", "--json", "--trace",
                          str(tmp_path / "step.json")], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    for r, trace in enumerate(result["traces"]):   # one recorded step per rank
        assert trace.endswith(f"step.plan0.rank{r}.json")
        events = json.loads(open(trace).read())["traceEvents"]
        assert any(e.get("name") == "mldse::all_to_all" for e in events)
    assert result["ranks"] == 2 and len(result["per_rank_ms"]) == 2
    assert result["iteration_ms"] == max(result["per_rank_ms"]) > 0
    assert result["assignment"] == plan
    # the time each rank spends in each exchange a step, within its step
    exchanges = result["exchange_ms"]
    assert {"all_to_all", "all_to_all_backward", "reduce_scatter", "all_gather",
            "all_reduce_wait"} <= set(exchanges)
    for r in range(2):
        inside = sum(ms[r] for ms in exchanges.values())
        assert 0 < inside < result["per_rank_ms"][r]


@pytest.mark.slow   # two more processes; `make test-full`
def test_the_real_exchange_hands_each_rank_its_samples(tmp_path):
    """The gloo all-to-all, its backward, the reduce-scatter and the all-gather on known
    tensors: every rank gets its samples of every table, and gradients go home."""
    script = tmp_path / "exchange.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, tempfile
        sys.path.insert(0, {str(ROOT)!r})
        import torch, torch.distributed as dist, torch.multiprocessing as mp
        from predictors.model.comm_ops import all_to_all, reduce_scatter, exchange_anchor

        def run(rank, store):
            dist.init_process_group("gloo", init_method=f"file://{{store}}", rank=rank,
                                    world_size=2)
            owners = [0, 1, 0]           # tables 0 and 2 on rank 0, table 1 on rank 1
            widths = [2, 3, 1]
            mine = [t for t, o in enumerate(owners) if o == rank]
            # pooled [global batch 4, width]: value = 100 * table + sample
            pooled = [(100.0 * t + torch.arange(4.0)).unsqueeze(1).repeat(1, widths[t])
                      .requires_grad_() for t in mine]
            got = all_to_all(pooled, exchange_anchor(torch.float32, "cpu"), 2, widths,
                             owners)
            for t, g in enumerate(got):   # this rank's samples 2*rank, 2*rank+1
                want = 100.0 * t + torch.arange(2.0 * rank, 2.0 * rank + 2)
                assert torch.equal(g[:, 0], want), (rank, t, g)
            sum(g.sum() * (rank + 1) for g in got).backward()
            for p in pooled:   # each sample's gradient is its rank's weight
                assert p.grad[:, 0].tolist() == [1.0, 1.0, 2.0, 2.0], p.grad
            partial = [torch.full((4, 2), float(rank + 1), requires_grad=True)]
            summed = reduce_scatter(partial, 2)
            assert summed[0].tolist() == [[3.0, 3.0]] * 2
            (summed[0].sum() * (rank + 1)).backward()
            assert partial[0].grad[:, 0].tolist() == [1.0, 1.0, 2.0, 2.0]
            dist.barrier()
            dist.destroy_process_group()

        if __name__ == "__main__":
            store = os.path.join(tempfile.mkdtemp(), "store")
            mp.start_processes(run, args=(store,), nprocs=2, start_method="spawn")
            print("ok")
        """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_cpu_ranks_wait_for_exchanges_not_for_ddp_all_reduces():
    result = predict(_two_rank_dlrm())
    assert len(result.per_rank) == 2
    assert any("gloo's default model" in n for n in result.notes)
    tl = result.timeline
    bars = [(tl.lanes[tl.lane[i]].rank, tl.lanes[tl.lane[i]].kind, tl.names[tl.name_id[i]],
             tl.start_us[i], tl.start_us[i] + tl.dur_us[i]) for i in range(len(tl.start_us))]
    comm = [b for b in bars if b[1] == "stream"]
    assert {b[2] for b in comm} == {"nccl:all_to_all", "nccl:all_reduce"}
    for rank, _, name, start, end in comm:
        cpu = [b for b in bars if b[0] == rank and b[1] == "cpu"]
        during = [b for b in cpu if start + 1e-6 < b[3] < end - 1e-6]
        if name == "nccl:all_to_all":   # the calling thread returns when it ends
            assert not during
        else:   # backward goes on; the gradients' copy back waits for it
            copies = [b for b in cpu if b[2] == "aten::copy_" and b[3] > start]
            assert copies and all(b[4] >= end - 1e-6 for b in copies)


def test_gloo_collectives_read_measured_points_and_grow_with_size():
    measured = {"2": {"all_reduce": [[1024, 300.0], [1 << 20, 800.0], [1 << 24, 16000.0]],
                      "all_to_all": [[1024, 150.0], [1 << 24, 11000.0]]}}
    us, how = gloo_time_us("all_reduce", 1 << 20, 2, measured)
    assert us == pytest.approx(800.0) and "measured" in how
    beyond, _ = gloo_time_us("all_reduce", 1 << 25, 2, measured)
    assert beyond > 16000.0
    # a reduce-scatter runs as an all-reduce of the buffer; a missing count: the default
    assert gloo_time_us("reduce_scatter", 1 << 20, 2, measured)[0] == pytest.approx(800.0)
    # measured as the ranks run it (its copies included): its own points
    measured["2"]["reduce_scatter"] = [[1024, 350.0], [1 << 20, 900.0]]
    assert gloo_time_us("reduce_scatter", 1 << 20, 2, measured)[0] == pytest.approx(900.0)
    small, how = gloo_time_us("all_reduce", 1024, 3, measured)
    large, _ = gloo_time_us("all_reduce", 1 << 24, 3, measured)
    assert "default" in how and large > small > 0


def test_ranks_are_for_the_local_cpu_only():
    doc = _two_rank_dlrm()
    doc["platform"] = {"preset": "dgx-a100", "ranks": 2}
    with pytest.raises(ScenarioError, match="only the local-cpu preset"):
        validate_scenario(doc)


def test_ranks_bind_to_cores_of_their_own():
    """Each measured rank computes on its own cores, as the predictor models it; without
    enough cores for every rank nothing is bound."""
    import os

    from predictors.calibrate.ranks import bind_cores

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    before = os.sched_getaffinity(0)
    try:
        assert not bind_cores(0, len(before) + 1, 1)
        assert os.sched_getaffinity(0) == before
        assert bind_cores(len(before) - 1, len(before), 1)
        assert os.sched_getaffinity(0) == {sorted(before)[-1]}
    finally:
        os.sched_setaffinity(0, before)


def test_a_larger_gloo_message_never_takes_less_time():
    """A sweep that caught a stall at one size (loopback TCP) does not make the next
    size cheaper than that one."""
    measured = {"2": {"all_to_all": [[1 << 15, 950.0], [1 << 16, 500.0], [1 << 17, 580.0],
                                     [1 << 18, 850.0]]}}
    sizes = [1 << 15, 3 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 19]
    times = [gloo_time_us("all_to_all", s, 2, measured)[0] for s in sizes]
    assert all(b >= a for a, b in zip(times, times[1:])), times
    assert times[-1] == pytest.approx(2 * times[-2])   # beyond the largest: at its rate
