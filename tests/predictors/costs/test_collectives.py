"""The NCCL-style collective model: names, shape of the curves, and recorded runs."""
import importlib.util
import itertools
import math

import pytest
from paths import ROOT, SCENARIOS, SHARED_DATA

from predictors.costs.collectives import (
    CANONICAL,
    CONSTANTS,
    arch_of,
    bus_factor,
    collective_kind,
    collective_options,
    collective_time,
)
from predictors.hardware.platforms import LINK_KINDS

NV2, NV3, NV4, PCIE4 = (LINK_KINDS[k] for k in ("nvlink2", "nvlink3", "nvlink4", "pcie4"))
FABRICS = [(NV2, "volta"), (NV3, "ampere"), (NV4, "hopper"), (PCIE4, "ampere")]


# ------------------------------------------------------------------------------ names
@pytest.mark.parametrize("name, kind", [
    ("allreduce", "all_reduce"), ("all_reduce", "all_reduce"), ("nccl:all_reduce", "all_reduce"),
    ("c10d::allreduce_", "all_reduce"), ("CommType.all_reduce", "all_reduce"),
    ("AllReduce", "all_reduce"), ("_c10d_functional::all_reduce", "all_reduce"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
    ("ncclKernel_AllReduce_TREE_LL_Sum_half", "all_reduce"),
    ("all_gather", "all_gather"), ("_allgather_base", "all_gather"),
    ("nccl:_all_gather_base", "all_gather"), ("all_gather_into_tensor", "all_gather"),
    ("c10d::allgather_into_tensor_coalesced_", "all_gather"), ("CommType.all_gather", "all_gather"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "all_gather"),
    ("reduce_scatter_tensor", "reduce_scatter"), ("_reduce_scatter_base", "reduce_scatter"),
    ("nccl:reduce_scatter", "reduce_scatter"), ("CommType.reduce_scatter", "reduce_scatter"),
    ("ncclKernel_ReduceScatter_RING_LL_Sum_bfloat16", "reduce_scatter"),
    ("all_to_allv", "all_to_all"), ("nccl:all_to_all", "all_to_all"), ("alltoall_base", "all_to_all"),
    ("all_to_all_single", "all_to_all"), ("CommType.all_to_all", "all_to_all"),
    ("ncclKernel_AllToAllPivot_RING_SIMPLE_Sum_int8_t", "all_to_all"),   # RCCL
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
    ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
    ("nccl:send", "send_recv"), ("c10d::recv_", "send_recv"), ("batch_isend_irecv", "send_recv"),
    ("broadcast", "broadcast"), ("nccl:broadcast", "broadcast"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "broadcast"),
    ("reduce", "reduce"), ("ncclKernel_Reduce_RING_LL_Sum_float", "reduce"),
    # not collectives, or not telling which one
    ("reduce_kernel<512, 1>", None), ("void at::native::reduce_kernel<...>", None),
    ("record_param_comms", None), ("barrier", None), ("ncclDevKernel_Generic_4(...)", None),
    ("mscclKernel_Sum_float_LL", None), ("aten::mm", None), ("", None), ("gather", None),
])
def test_collective_kind(name, kind):
    assert collective_kind(name) == kind


def test_every_canonical_kind_maps_to_itself():
    assert all(collective_kind(k) == k for k in CANONICAL)


@pytest.mark.parametrize("device, arch", [
    ("Tesla V100-SXM2-32GB", "volta"), ("Tesla V100-PCIE-16GB", "volta"),
    ("NVIDIA A100-SXM4-40GB", "ampere"), ("NVIDIA PG509-200", "ampere"),
    ("NVIDIA A100-PG509-200", "ampere"), ("NVIDIA A10G", "ampere"),
    ("NVIDIA H100 80GB HBM3", "hopper"), ("NVIDIA H200", "hopper"), ("NVIDIA H100 PCIe", "hopper"),
    ("NVIDIA GeForce RTX 2080 Ti", "turing"), ("Tesla T4", "turing"), ("cpu", "unknown"),
])
def test_arch_of(device, arch):
    assert arch_of(device) == arch


# ------------------------------------------------------------------------------ the model
def test_one_rank_or_empty_message_costs_nothing():
    for kind in CANONICAL:
        est = collective_time(kind, 1 << 20, 1, NV3, "ampere")
        assert est.us == 0.0 and est.bus_bw == 0.0 and est.algorithm == "none"
        assert collective_time(kind, 0, 8, NV3, "ampere").us == 0.0
        assert collective_time(kind, 1, 2, NV3, "ampere").us > 0


def test_any_spelling_of_the_kind_is_accepted():
    a = collective_time("all_reduce", 1 << 20, 8, NV3)
    assert collective_time("allreduce", 1 << 20, 8, NV3) == a
    assert collective_time("ncclKernel_AllReduce_RING_LL_Sum_float(x)", 1 << 20, 8, NV3) == a


@pytest.mark.parametrize("kind", CANONICAL)
@pytest.mark.parametrize("link, arch", FABRICS)
def test_monotone_in_size(kind, link, arch):
    for ranks in (2, 3, 4, 8):
        times = [collective_time(kind, 2.0 ** e, ranks, link, arch).us for e in range(36)]
        assert all(b >= a for a, b in zip(times, times[1:])), (ranks, times)
        assert times[-1] > 100 * times[0]


@pytest.mark.parametrize("kind", CANONICAL)
@pytest.mark.parametrize("link, arch", FABRICS)
def test_monotone_in_ranks(kind, link, arch):
    """Without NVLS; an NVLS all-reduce gets faster with more GPUs (test_nvls_all_reduce)."""
    for e in range(0, 36, 2):
        times = [collective_time(kind, 2.0 ** e, n, link, arch, nvls=False).us
                 for n in range(2, 17)]
        assert all(b >= a for a, b in zip(times, times[1:])), (e, times)


@pytest.mark.parametrize("link, arch", FABRICS)
def test_large_messages_reach_most_of_the_link_bandwidth(link, arch):
    """nccl-tests on one node report bus bandwidths of 75-85 % of the link for large
    messages (e.g. ~230 of 300 GB/s on a DGX A100; on H100 68 % between 32 KiB and 512 MiB,
    the fitted figure); the bus-bandwidth convention makes every kind of ring collective
    reach the same figure (NVLS all-reduces are tested on their own)."""
    kinds = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
    ests = [collective_time(kind, 4 << 30, 8, link, arch, nvls=False) for kind in kinds]
    assert all(est.protocol == "Simple" for est in ests)
    for kind, est in zip(kinds, ests):
        assert 0.65 * link < est.bus_bw < 0.9 * link, (kind, est.bus_bw / link)
        assert est.bus_bw == pytest.approx(ests[0].bus_bw, rel=0.02), kind


def test_nvls_all_reduce():
    """NVLink SHARP on NVSwitch-3 (H100/H200/B200): algbw = link x efficiency x n/(n+1);
    NCCL's ring where that is faster (2 GPUs, small messages); never on A100's NVSwitch."""
    big = 1 << 30
    eight = collective_time("all_reduce", big, 8, NV4, "hopper")
    assert eight.algorithm == "nvls" and eight.protocol == "Simple"
    ring = collective_time("all_reduce", big, 8, NV4, "hopper", nvls=False)
    assert eight.bus_bw > 1.3 * ring.bus_bw
    alg = big / (eight.us * 1e-6)
    assert alg == pytest.approx(NV4 * CONSTANTS["nvls_eff"]["hopper"] * 8 / 9, rel=0.02)
    # more GPUs on the switch: faster per byte (nccl-tests: algbw 207 / 251 / 266 / ~270 GB/s
    # on 2 / 4 / 6 / 8 H100)
    algbws = [big / next(o.us for o in collective_options("all_reduce", big, n, NV4, "hopper")
                         if o.algorithm == "nvls") for n in (2, 4, 6, 8)]
    assert algbws == sorted(algbws)
    assert collective_time("all_reduce", big, 2, NV4, "hopper").algorithm == "ring"
    assert collective_time("all_reduce", 64 << 10, 8, NV4, "hopper").algorithm == "ring"
    assert collective_time("all_reduce", big, 8, NV3, "ampere").algorithm == "ring"
    assert collective_time("all_reduce", big, 8, NV4, "hopper", fabric="pcie").algorithm \
        == "ring"
    # other collectives move the same bytes per link either way: rings
    assert collective_time("all_gather", big, 8, NV4, "hopper").algorithm == "ring"
    # across nodes NVLSTree: each GPU carries 1/8 of its node's buffer over its own NIC
    two = collective_time("all_reduce", 8 * big, 16, NV4, "hopper", nodes=2,
                          inter_bw=LINK_KINDS["nic200"])
    assert two.algorithm == "nvls_tree"
    nic = 8 * LINK_KINDS["nic200"] * CONSTANTS["net_eff"]
    assert 8 * big / (two.us * 1e-6) == pytest.approx(nic, rel=0.02)


def test_an_unknown_generation_is_taken_as_hopper_like():
    for kind, nbytes in itertools.product(("all_reduce", "all_to_all"), (64, 1 << 20, 4 << 30)):
        new = collective_time(kind, nbytes, 8, NV4, "blackwell")
        hopper = collective_time(kind, nbytes, 8, NV4, "hopper")
        assert (new.us, new.bus_bw, new.protocol) == (hopper.us, hopper.bus_bw, hopper.protocol)


def test_bus_bw_follows_the_nccl_tests_convention():
    est = collective_time("all_reduce", 1 << 28, 8, NV3, "ampere")
    assert est.bus_bw == pytest.approx(2 * 7 / 8 * (1 << 28) / (est.us * 1e-6))
    assert bus_factor("all_gather", 4) == 0.75 and bus_factor("broadcast", 4) == 1.0


@pytest.mark.parametrize("link, arch", FABRICS)
def test_small_messages_use_ll_large_ones_simple(link, arch):
    for kind in CANONICAL:
        assert collective_time(kind, 64, 8, link, arch).protocol == "LL", kind
        assert collective_time(kind, 1 << 31, 8, link, arch).protocol == "Simple", kind
    # all-reduce on one node: NCCL's ring beats its tree (the tree's bandwidth is lower)
    assert collective_time("all_reduce", 1 << 31, 8, link, arch, nvls=False).algorithm \
        == "ring"


def test_ll128_in_between_on_nvlink_only():
    protos = {collective_time("all_reduce", 2.0 ** e, 8, NV3, "ampere").protocol for e in range(6, 32)}
    assert protos == {"LL", "LL128", "Simple"}
    protos = {collective_time("all_reduce", 2.0 ** e, 8, PCIE4, "ampere").protocol for e in range(6, 32)}
    assert "LL128" not in protos
    # the same link given as PCIe explicitly
    assert all(o.protocol != "LL128" for o in collective_options("all_gather", 1 << 20, 8, NV3,
                                                                 fabric="pcie"))


def test_ll_bandwidth_is_capped_per_generation():
    """NCCL's llMaxBws: 39 GB/s on Volta; an LL ring never beats it."""
    ll = [o for o in collective_options("all_gather", 1 << 24, 8, NV4, "volta") if o.protocol == "LL"]
    assert ll and ll[0].bus_bw < CONSTANTS["ll_max_bw"]["volta"][0] * 1e9


def test_latency_floor_is_nccl_s():
    """A tiny all-reduce on 8 NVLink GPUs: ring/LL base 6.6 us + 14 hops x 0.6 us."""
    assert collective_time("all_reduce", 8, 8, NV3, "ampere").us == pytest.approx(15.0, abs=0.1)
    assert collective_time("all_to_all", 8, 8, NV3, "ampere").us == pytest.approx(7.2, abs=0.1)


def test_multi_node():
    one = collective_time("all_reduce", 1 << 30, 16, NV4, "hopper")
    two = collective_time("all_reduce", 1 << 30, 16, NV4, "hopper", nodes=2,
                          inter_bw=LINK_KINDS["nic200"], nvls=False)
    assert two.us > one.us
    # the ring crosses each node through its 8 NICs: at most 8 x 25 GB/s x efficiency
    assert two.bus_bw <= 8 * LINK_KINDS["nic200"] * CONSTANTS["net_eff"] * 1.001
    a2a = collective_time("all_to_all", 1 << 30, 16, NV4, "hopper", nodes=2,
                          inter_bw=LINK_KINDS["nic400"])
    # half of what each GPU sends leaves the node through its own NIC
    assert a2a.us * 1e-6 == pytest.approx((1 << 29) / (LINK_KINDS["nic400"] * CONSTANTS["net_eff"]),
                                          rel=0.02)
    # small all-reduces across many nodes: the tree's log2(nodes) latency beats the ring's
    many = collective_time("all_reduce", 1024, 256, NV4, "hopper", nodes=32,
                           inter_bw=LINK_KINDS["nic400"])
    assert many.algorithm == "tree"
    times = [collective_time("all_gather", 1 << 26, 8 * k, NV4, "hopper", nodes=k,
                             inter_bw=LINK_KINDS["nic400"]).us for k in (2, 4, 8, 16)]
    assert times == sorted(times)


@pytest.mark.parametrize("args, kwargs", [
    (("all_reduce", 1024, 0, NV3), {}),
    (("all_reduce", -1, 8, NV3), {}),
    (("all_reduce", math.nan, 8, NV3), {}),
    (("all_reduce", 1024, 8, 0.0), {}),
    (("gemm", 1024, 8, NV3), {}),
    (("all_reduce", 1024, 16, NV3), {"nodes": 2}),            # no inter_bw
    (("all_reduce", 1024, 4, NV3), {"nodes": 8, "inter_bw": 25e9}),
    (("all_reduce", 1024, 4, NV3), {"fabric": "ethernet"}),
])
def test_bad_arguments(args, kwargs):
    with pytest.raises(ValueError):
        collective_time(*args, **kwargs)


# ------------------------------------------------------------------------------ recorded runs
def _bench():
    spec = importlib.util.spec_from_file_location("bench_collectives",
                                                  ROOT / "benchmarks" / "collectives.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


needs_v100 = pytest.mark.skipif(not (SHARED_DATA / "traces" / "param-dlrm-v100-8rank").is_dir(),
                                reason="../shared/data/traces/param-dlrm-v100-8rank is absent")
needs_aicb = pytest.mark.skipif(
    not (SHARED_DATA / "microbench" / "aicb-a100-collectives" / "A100_example.csv").is_file(),
    reason="../shared/data/microbench/aicb-a100-collectives is absent")
needs_hta = pytest.mark.skipif(not (SHARED_DATA / "traces" / "hta-a100-ddp-2rank").is_dir(),
                               reason="../shared/data/traces/hta-a100-ddp-2rank is absent")


@needs_v100
def test_v100_dlrm_collectives():
    """The 8 collectives of one recorded DLRM step on 8 V100s (NVLink2), kernel time = the
    shortest of the 8 ranks' durations.

    Bound: geomean absolute error <= 35 %, every collective within a factor 1.6.  Most of these
    kernels last 7-20 us, and equal-sized all-to-alls in the same step differ by 3 us (10 vs
    7 us): the measurement itself scatters by ~30 %.  The model's constants are NCCL's own,
    not fitted to this trace.  It measures 22 % today; a model that loses NCCL's latency or LL
    bandwidth terms (e.g. a pure bandwidth model, or twice the hop latency) fails.
    """
    b = _bench()
    rows = b.v100_rows(SHARED_DATA)
    assert [r["kind"] for r in rows] == ["all_to_all"] * 4 + ["all_reduce", "all_to_all",
                                                              "all_reduce", "all_reduce"]
    assert [r["nbytes"] for r in rows] == [24576, 192, 1536, 53248, 1576964, 24576, 448, 907840]
    assert [round(r["measured_us"]) for r in rows] == [10, 8, 7, 7, 86, 10, 20, 69]
    for r in rows:
        # the kernel name tells the algorithm (its protocol part is fixed, see docs)
        assert r["algorithm"] == ("p2p" if "SendRecv" in r["kernel"] else "ring"), r
        assert 1 / 1.6 < r["predicted_us"] / r["measured_us"] < 1.6, r
    assert rows[6]["protocol"] == "LL"                      # 448 B all-reduce
    assert all(r["protocol"] == "LL" for r in rows if r["kind"] == "all_to_all")
    assert b.pairs_gmae([(r["predicted_us"], r["measured_us"]) for r in rows]) < 0.35


@needs_aicb
def test_a100_aicb_large_messages():
    """aicb on an 8-A100 node: messages of 1 MiB+ (8 MiB .. 33 GiB), predicted = model + the
    host floor estimated from the <= 64 KiB calls.

    Bound: geomean absolute error <= 35 %, every group within a factor 1.6.  The 2-rank groups
    run at ~150 GB/s bus bandwidth where NCCL's model (and this one) expects ~225: they are
    27 % under; the 4-rank multi-GiB ones 10 %.  Today's figure is 18 %.
    """
    b = _bench()
    res = b.a100_rows(SHARED_DATA)
    assert 50 < res["floor_us"] < 100       # the host-side floor of a timed call
    large = res["large"]
    assert len(large) >= 7
    assert {r["kind"] for r in large} >= {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}
    assert {r["ranks"] for r in large} == {2, 4}
    for r in large:
        assert 1 / 1.6 < r["predicted_us"] / r["measured_us"] < 1.6, r
    big = [r for r in large if r["nbytes"] > 1 << 30]
    assert big and all(abs(r["predicted_us"] / r["measured_us"] - 1) < 0.2 for r in big)
    assert b.pairs_gmae([(r["predicted_us"], r["measured_us"]) for r in large]) < 0.35
    assert [r["group"] for r in res["excluded"]] == ["ep_group"]


@needs_hta
def test_hta_a100_ddp_loose_check():
    """Rank 0 only: durations include waiting for rank 1, so the model must only stay below
    the fastest recorded call (within 25 %); the small start-up broadcast is close."""
    rows = _bench().hta_rows(SHARED_DATA)
    assert {r["kind"] for r in rows} == {"all_reduce", "broadcast"}
    assert all(r["ok"] for r in rows)
    tiny = [r for r in rows if r["nbytes"] < 1024]
    assert tiny and all(r["predicted_us"] == pytest.approx(r["fastest_us"], rel=0.25) for r in tiny)



def test_benchmark_skips_cleanly_without_data(tmp_path, capsys):
    assert _bench().main(["--data", str(tmp_path / "absent")]) == 1
    assert "no data" in capsys.readouterr().out


def test_every_option_is_well_formed():
    for kind, n, e in itertools.product(CANONICAL, (2, 8), (3, 20, 33)):
        for o in collective_options(kind, 2.0 ** e, n, NV4, "hopper"):
            assert o.us > 0 and o.bus_bw > 0 and o.detail.startswith(kind)
            assert o.algorithm in ("ring", "tree", "nvls", "p2p")
            assert o.protocol in ("LL", "LL128", "Simple")


def _collective_cli(capsys, *argv):
    from predictors.cli.commands import main
    rc = main(["collective", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_collective_cli_on_presets(capsys):
    import json
    rc, out, _ = _collective_cli(capsys, "--platform", "dgx-a100", "--op", "all_reduce",
                                 "--bytes", "64M", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["bytes"] == 64 * 2**20 and doc["ranks"] == 8 and doc["nodes"] == 1
    # algbw is bytes / time; all-reduce busbw is 2(n-1)/n of it (nccl-tests convention)
    assert doc["algbw_GBps"] == pytest.approx(doc["bytes"] / (doc["time_ms"] * 1e-3) / 1e9)
    assert doc["busbw_GBps"] == pytest.approx(doc["algbw_GBps"] * 2 * 7 / 8)
    # large messages reach most of NVLink3's 300 GB/s per GPU, never more
    assert 150 < doc["busbw_GBps"] < 300
    rc, out, _ = _collective_cli(capsys, "--platform", "2node-8x-h100", "--op", "all_reduce",
                                 "--bytes", "64M", "--json")
    two = json.loads(out)
    assert two["ranks"] == 16 and two["nodes"] == 2 and two["time_ms"] > doc["time_ms"] / 2
    rc, out, _ = _collective_cli(capsys, "--platform", "2node-8x-h100", "--op", "all_reduce",
                                 "--bytes", "64M", "--ranks", "8", "--json")
    assert json.loads(out)["nodes"] == 1  # 8 ranks fill the first node


def test_collective_cli_on_a_scenario_and_bad_input(capsys, tmp_path):
    import json
    path = SCENARIOS / "mlperf_dlrm_dcnv2.json"  # on dgx-a100
    rc, out, _ = _collective_cli(capsys, "--platform", str(path), "--op", "all_gather",
                                 "--bytes", "1048576", "--json")
    assert rc == 0 and json.loads(out)["platform"] == "dgx-a100"
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"nodes": [{"id": "g", "kind": "gpu"}],
                               "edges": [{"source": "g", "target": "x", "kind": "nvlink3"}]}))
    rc, _, err = _collective_cli(capsys, "--platform", str(bad), "--op", "all_reduce",
                                 "--bytes", "1M")
    assert rc == 2 and "platform.edges[0].target" in err
    rc, _, err = _collective_cli(capsys, "--platform", "dgx-a100", "--op", "all_reduce",
                                 "--bytes", "1M", "--ranks", "9")
    assert rc == 2 and "between 1 and the platform's 8" in err
    rc, _, err = _collective_cli(capsys, "--platform", "local-cpu", "--op", "all_reduce",
                                 "--bytes", "1M")
    assert rc == 2 and "no GPUs" in err
    rc, _, err = _collective_cli(capsys, "--platform", "no-such", "--op", "all_reduce",
                                 "--bytes", "1M")
    assert rc == 2 and "no preset and no file" in err


# ------------------------------------------------------------------------------ public tables
def _public():
    b = _bench()
    return b, b.public_tables()


def test_public_tables_are_sourced_and_split():
    """Every transcribed nccl-tests table names its source; fit and validation tables are
    separate, and no H200 table is among them (held out for an independent check)."""
    import json
    doc = json.loads((ROOT / "resources" / "measurements" / "nccl-tests-public" /
                      "tables.json").read_text())
    assert all(t["url"].startswith("https://") for t in doc["tables"])
    assert {t["role"] for t in doc["tables"]} == {"fit", "validation"}
    assert not any("H200" in t["gpu"] or "H200" in t["system"] for t in doc["tables"])
    b = _bench()
    fitted = {i for _, _, ids, _ in b.FITS for i in ids}
    assert fitted == {t["id"] for t in doc["tables"] if t["role"] == "fit"}


def test_public_tables_bus_bandwidth_error():
    """Bus-bandwidth geomean error, 32 KiB .. 512 MiB (benchmarks/collectives.py prints the
    per-size tables).  Today: 8 H100 all-reduce 1.0 % (fit), two H100 nodes 4.1 %
    (validation), 2/4/6 H100 all-reduce 2.3 / 6.3 / 6.4 %, 4 H100 all-reduce 8.8 %,
    reduce-scatter 6.6 % (validation), 8 A100 all-reduce 16.0 % (validation; its
    1-32 MiB calls run at half of NCCL's own model)."""
    b, entries = _public()
    s = {(k[0][:4], k[1], k[2]): v for k, v in b.public_summaries(entries).items()}
    assert s[("8 x ", "all_reduce", 8)].geomean < 0.05                 # 8 H100, fit
    assert s[("2 no", "all_reduce", 16)].geomean < 0.10                # two nodes
    assert s[("4 of", "reduce_scatter", 4)].geomean < 0.10
    assert s[("4 of", "all_reduce", 4)].geomean < 0.12
    for n in (2, 4, 6):
        assert s[("2, 4", "all_reduce", n)].geomean < 0.10
    a100 = next(v for k, v in b.public_summaries(entries).items() if "A100" in k[0])
    assert a100.geomean < 0.20
    # the 8-H100 all-reduce runs NVLS, the two-node one NVLSTree for large messages
    hows = {e["id"]: b.reported(e)[-1]["how"] for e in entries if b.reported(e)}
    assert hows["h100x8-node005-allreduce"] == "nvls/Simple"
    assert hows["h100x16-xe9680-allreduce"] == "nvls_tree/Simple"


@pytest.mark.slow   # re-derives every fit; `make test-full`
def test_fitted_constants_are_what_the_fit_tables_give():
    """``benchmarks/collectives.py --fit`` re-derives CONSTANTS' fitted entries."""
    b = _bench()
    for name, value in b.fit_constants(b.public_tables()).items():
        key, sub = name[:-1].split("[")
        assert CONSTANTS[key][sub] == pytest.approx(value, abs=0.0051 if value < 1 else 1.0), \
            name
