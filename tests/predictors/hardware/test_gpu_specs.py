"""The GPUs a user can pick: datasheet specs, the names that find them, single-GPU presets,
predictions ordered by the GPUs' figures, and one-line errors that list the known GPUs."""
from __future__ import annotations

import copy
import json
import math
import re

import pytest
from paths import SCENARIOS, SHARED_DATA

from predictors.calibrate.gpu_profiles import (
    PROFILE_DIR,
    datasheet_profile,
    profile_for_device,
)
from predictors.cli.commands import main
from predictors.engine.predict import predict
from predictors.hardware.platforms import (
    GPU_MODELS,
    PLATFORM_PRESETS,
    preset_graph,
    resolve_platform,
)
from predictors.hardware.specs import (
    GPU_SPECS,
    device_spec,
    find_gpu_spec,
    profile_slug,
)
from predictors.profiles import load_profile
from predictors.scenario.format import ScenarioError, load_scenario, validate_scenario

DEVICE_CONFIGS = SHARED_DATA / "microbench" / "neusight-gemm" / "device_configs"
# every GPU of NeuSight's device_configs, plus the rented ones they lack
NEUSIGHT_GPUS = ("NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe",
                 "NVIDIA H100 80GB HBM3", "NVIDIA L4", "Tesla P100-PCIE-16GB", "Tesla P4",
                 "Tesla T4", "Tesla V100-PCIE-32GB")
LISTED_GPUS = NEUSIGHT_GPUS + ("NVIDIA L40S", "NVIDIA B200", "AMD Instinct MI300X")
NEW_PRESETS = {"l4-1": "NVIDIA L4", "l40s-1": "NVIDIA L40S", "b200-1": "NVIDIA B200",
               "mi300x-1": "AMD Instinct MI300X"}
SINGLE = ("l4-1", "a100-1", "l40s-1", "h100-1", "mi300x-1", "b200-1")

# what users type -> the GPU it names
TYPED = {
    "NVIDIA L4": "NVIDIA L4", "L4": "NVIDIA L4", "l4": "NVIDIA L4", "nvidia-l4": "NVIDIA L4",
    "NVIDIA L40S": "NVIDIA L40S", "L40S": "NVIDIA L40S", "l40s": "NVIDIA L40S",
    "NVIDIA B200": "NVIDIA B200", "B200": "NVIDIA B200",
    "AMD Instinct MI300X": "AMD Instinct MI300X", "MI300X": "AMD Instinct MI300X",
    "amd_instinct_mi300x": "AMD Instinct MI300X",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 80GB HBM3", "H100": "NVIDIA H100 80GB HBM3",
    "nvidia-h100-80gb-hbm3": "NVIDIA H100 80GB HBM3", "H100 PCIe": "NVIDIA H100 PCIe",
    "A100": "NVIDIA A100-SXM4-40GB", "A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
    "NVIDIA_A100_80GB_PCIe": "NVIDIA A100 80GB PCIe", "H200": "NVIDIA H200",
    "T4": "Tesla T4", "Tesla T4": "Tesla T4", "P4": "Tesla P4", "P100": "Tesla P100-PCIE-16GB",
    "V100-PCIE-32GB": "Tesla V100-PCIE-32GB", "V100": "Tesla V100-SXM2-32GB",
}


@pytest.mark.parametrize("name", LISTED_GPUS)
def test_listed_gpu_has_a_datasheet_spec(name):
    spec = GPU_SPECS[name]
    assert spec.kind == "gpu" and spec.source
    assert min(spec.memory_bytes, spec.mem_bw, spec.l2_bytes, spec.sms, spec.clock_mhz,
               spec.cores_per_sm, spec.vector_flops) > 0
    fp32 = spec.flops("float32")
    assert spec.flops("bfloat16") >= fp32 and spec.flops("float16") >= fp32
    # the FP32 figure is SMs x lanes x 2 (FMA) x boost clock, as the GEMM features assume
    assert spec.sms * spec.cores_per_sm * 2 * spec.clock_mhz * 1e6 == pytest.approx(fp32, rel=0.05)


def test_datasheet_figures_of_the_new_gpus():
    l4, l40s = GPU_SPECS["NVIDIA L4"], GPU_SPECS["NVIDIA L40S"]
    b200, mi300x = GPU_SPECS["NVIDIA B200"], GPU_SPECS["AMD Instinct MI300X"]
    assert (l4.flops("float32"), l4.flops("bfloat16"), l4.mem_bw, l4.memory_bytes) == \
        pytest.approx((30.3e12, 121e12, 300e9, 24e9))
    assert (l40s.flops("float32"), l40s.flops("bfloat16"), l40s.mem_bw, l40s.memory_bytes) == \
        pytest.approx((91.6e12, 362e12, 864e9, 48e9))
    assert (b200.flops("bfloat16"), b200.mem_bw, b200.memory_bytes) == \
        pytest.approx((2250e12, 8000e9, 180e9))
    assert (mi300x.flops("float32"), mi300x.flops("bfloat16"), mi300x.mem_bw,
            mi300x.memory_bytes, mi300x.sms, mi300x.l2_bytes) == \
        pytest.approx((163.4e12, 1307.4e12, 5300e9, 192e9, 304, 256e6))


@pytest.mark.skipif(not DEVICE_CONFIGS.is_dir(), reason="no ../shared/data")
def test_every_neusight_gpu_resolves():
    configs = sorted(DEVICE_CONFIGS.glob("*.json"))
    assert configs
    for path in configs:
        cfg = json.loads(path.read_text())
        spec = find_gpu_spec(cfg["Device"])
        assert spec is not None, cfg["Device"]
        assert find_gpu_spec(path.stem) is spec  # the file name's spelling
        assert spec.mem_bw == pytest.approx(cfg["Mem_Bw"] * 1e9, rel=0.05)
        assert spec.l2_bytes == pytest.approx(cfg["L2Cache"] * 1e6, rel=0.01)
    assert set(NEUSIGHT_GPUS) <= {json.loads(p.read_text())["Device"] for p in configs}


@pytest.mark.parametrize("typed, name", TYPED.items())
def test_names_users_type(typed, name):
    assert find_gpu_spec(typed).name == name
    assert device_spec(typed).name == name


def test_unknown_name_is_none_and_short_models_resolve():
    assert find_gpu_spec("NVIDIA GeForce 256") is None
    assert find_gpu_spec("") is None
    assert all(find_gpu_spec(k).name == v for k, v in GPU_MODELS.items())


def test_presets_and_short_models():
    for preset, device in NEW_PRESETS.items():
        p = PLATFORM_PRESETS[preset]
        assert (p.device, p.gpus, p.nodes, p.intra_link, p.inter_link) == (device, 1, 1, None, None)
    assert {"l4", "l40s", "b200", "mi300x"} <= set(GPU_MODELS)
    assert set(GPU_MODELS.values()) <= set(GPU_SPECS)
    for p in PLATFORM_PRESETS.values():
        assert p.device == "cpu" or p.device in GPU_SPECS
    # the platform canvas' graph of a preset comes back as the same device
    for preset, device in NEW_PRESETS.items():
        graph = preset_graph(preset)
        assert resolve_platform(graph).device == device


@pytest.mark.parametrize("model, device", [("l4", "NVIDIA L4"), ("NVIDIA L4", "NVIDIA L4"),
                                           ("MI300X", "AMD Instinct MI300X"),
                                           ("b200", "NVIDIA B200")])
def test_custom_platform_model(model, device):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"nodes": [{"id": "g0", "kind": "gpu", "params": {"model": model}}],
                       "edges": []}
    assert resolve_platform(validate_scenario(doc)["platform"]).device == device


def _one_line_listing_gpus(message: str) -> None:
    assert "\n" not in message
    for name in ("NVIDIA L4", "NVIDIA L40S", "NVIDIA B200", "AMD Instinct MI300X",
                 "NVIDIA H100 80GB HBM3"):
        assert name in message


def test_unknown_gpu_messages_list_the_known_ones(tmp_path, capsys):
    with pytest.raises(KeyError) as exc:
        device_spec("NVIDIA GeForce 256")
    assert exc.value.args[0].startswith("unknown device 'NVIDIA GeForce 256'")
    _one_line_listing_gpus(exc.value.args[0])
    assert "cpu" in exc.value.args[0]
    with pytest.raises(KeyError) as exc:
        profile_for_device("NVIDIA GeForce 256")
    _one_line_listing_gpus(exc.value.args[0])
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,N,K\n8,8,8\n")
    assert main(["kernels", "predict", "--gpu", "NVIDIA GeForce 256", "--op", "mm",
                 "--in", str(shapes), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --gpu: unknown device 'NVIDIA GeForce 256'")
    _one_line_listing_gpus(err)
    # a custom platform's unknown model: the short names, the new GPUs among them
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"nodes": [{"id": "g0", "kind": "gpu", "params": {"model": "rtx9090"}}],
                       "edges": []}
    with pytest.raises(ScenarioError) as exc:
        validate_scenario(doc)
    assert "rtx9090" in str(exc.value) and "\n" not in str(exc.value)
    assert all(k in str(exc.value) for k in ("l4", "l40s", "b200", "mi300x"))


def test_kernels_predict_by_short_name(tmp_path, capsys):
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,N,K\n4096,4096,4096\n")
    ms = {}
    for gpu in ("L4", "B200", "MI300X"):
        out = tmp_path / f"{gpu}.csv"
        assert main(["kernels", "predict", "--gpu", gpu, "--op", "mm", "--in", str(shapes),
                     "--out", str(out)]) == 0
        ms[gpu] = float(out.read_text().splitlines()[1].split(",")[-1])
        assert profile_for_device(gpu).kind == "datasheet"
        # only the 72 W board is warned of its power cap
        assert ("note: power: the NVIDIA L4 is a 72 W board" in capsys.readouterr().out) \
            == (gpu == "L4")
    # a 4096^3 fp32 product is compute-bound: L4's 30 TFLOPS against B200's 75
    assert ms["L4"] > ms["B200"] > 0


@pytest.fixture(scope="module")
def template():
    return load_profile(min(PROFILE_DIR.glob("*.json")))


def _datasheet(preset, template):
    return datasheet_profile(device_spec(PLATFORM_PRESETS[preset].device), template)


@pytest.fixture(scope="module")
def dlrm_runs(template):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    out = {}
    for preset in SINGLE:
        doc["platform"] = {"preset": preset}
        out[preset] = (predict(copy.deepcopy(doc)),
                       predict(copy.deepcopy(doc), profile=_datasheet(preset, template)))
    return out


def test_small_dlrm_on_every_single_gpu_preset(dlrm_runs):
    for preset, (default, datasheet) in dlrm_runs.items():
        for r in (default, datasheet):
            assert r.device == PLATFORM_PRESETS[preset].device
            assert math.isfinite(r.iteration_ms) and r.iteration_ms > 0
            assert r.per_rank[0]["peak_memory_bytes"] < device_spec(r.device).memory_bytes
    # device time at the datasheet profile follows the GPUs' bandwidth and peaks (the
    # iteration itself is CPU-bound, the same on every GPU)
    active = {p: r[1].per_rank[0]["device_active_ms"] for p, r in dlrm_runs.items()}
    assert active["l4-1"] > active["a100-1"] > active["h100-1"] > active["b200-1"]
    assert active["l4-1"] > active["l40s-1"]
    assert active["h100-1"] > active["mi300x-1"]


@pytest.fixture(scope="module")
def bert_runs(template):
    doc = load_scenario(SCENARIOS / "bert_base.json")
    out = {}
    for dtype in ("float32", "bfloat16"):
        doc["training"]["dtype"] = dtype
        for preset in SINGLE:
            doc["platform"] = {"preset": preset}
            out[dtype, preset] = predict(copy.deepcopy(doc), profile=_datasheet(preset, template))
    return out


def test_bert_base_ordered_by_the_gpus_peaks(bert_runs):
    """A compute-bound BERT-base step at the datasheet profile: a GPU with more of every
    figure (FLOP/s, bandwidth, SMs) is faster.  L40S against A100 and MI300X against B200
    trade figures, so neither pair is asserted."""
    for dtype in ("float32", "bfloat16"):
        t = {p: bert_runs[dtype, p].per_rank[0]["device_active_ms"] for p in SINGLE}
        assert t["l4-1"] > t["a100-1"] > t["h100-1"] > t["b200-1"], (dtype, t)
        assert t["l4-1"] > t["l40s-1"], (dtype, t)
        assert t["h100-1"] > t["mi300x-1"], (dtype, t)
    it = {p: bert_runs["float32", p].iteration_ms for p in SINGLE}
    assert it["l4-1"] > it["a100-1"] > it["h100-1"] > it["b200-1"]


def test_profile_slugs_are_unique():
    slugs = [profile_slug(n) for n in GPU_SPECS]
    assert len(slugs) == len(set(slugs))


def test_a_gpu_without_a_bundled_profile_predicts_with_the_public_profiles_overheads():
    """An L4 has no bundled profile: its datasheet profile prices the kernels and the CPU
    overheads are the public profiles' (the same host-bound DLRM step as on an A100, not
    the bare defaults)."""
    from paths import SCENARIOS

    from predictors import load_scenario, predict

    steps = {}
    for preset in ("a100-1", "l4-1"):
        doc = load_scenario(SCENARIOS / "small_dlrm.json")
        doc["platform"] = {"preset": preset}
        result = predict(doc)
        steps[preset] = result
    assert steps["l4-1"].profile == "NVIDIA L4"
    a100, l4 = steps["a100-1"], steps["l4-1"]
    assert l4.iteration_ms == pytest.approx(a100.iteration_ms, rel=0.05)  # host-bound
    assert l4.per_rank[0]["device_active_ms"] > a100.per_rank[0]["device_active_ms"]


def _dgx_h100_graph(extra_gpu_link: bool | None):
    """The DGX H100 preset as a graph, with a 9th GPU linked to the NVSwitch (True), on a
    PCIe 4.0 switch under the host's CPU (False: it reaches the others through the CPU),
    or not at all (None)."""
    from predictors.hardware.platforms import preset_graph

    graph = preset_graph("dgx-h100")
    graph["nodes"].append({"id": "gpu8", "kind": "gpu", "params": {"model": "h100"}})
    switch = next(n["id"] for n in graph["nodes"] if n["kind"] == "nvswitch")
    cpu = next(n["id"] for n in graph["nodes"] if n["kind"] == "cpu")
    if extra_gpu_link:
        graph["edges"].append({"source": "gpu8", "target": switch, "kind": "nvlink4"})
    elif extra_gpu_link is False:
        graph["nodes"].append({"id": "psw", "kind": "pcie_switch"})
        graph["edges"] += [{"source": "gpu8", "target": "psw", "kind": "pcie4"},
                           {"source": "psw", "target": cpu, "kind": "pcie4"}]
    return graph


def test_the_drawn_links_set_the_gpus_fabric():
    """The slowest link on the GPUs' routes sets their fabric, and a GPU without any link
    cannot take part: the prediction is an error that names it.  A data-parallel step's
    all-reduce shows the slow link."""
    from predictors.hardware.platforms import resolve_platform

    linked, slow, unlinked = (resolve_platform(_dgx_h100_graph(x)) for x in (True, False,
                                                                            None))
    assert (linked.intra_link, slow.intra_link) == ("nvlink4", "pcie4")
    assert "gpu8 without a GPU link" in unlinked.description

    def all_reduce_ms(graph):
        from predictors.engine.timeline import CATEGORIES

        doc = load_scenario(SCENARIOS / "bert_base.json")
        doc["platform"] = graph
        tl = predict(doc).timeline
        comm = (tl.category == CATEGORIES.index("communication")) & (tl.rank == 0)
        return float(tl.dur_us[comm].sum()) / 1e3

    # the step itself is host-bound here; its gradients' all-reduce is not
    assert all_reduce_ms(_dgx_h100_graph(False)) > 2 * all_reduce_ms(_dgx_h100_graph(True))
    with pytest.raises(ScenarioError, match="gpu8 has no link"):
        all_reduce_ms(_dgx_h100_graph(None))


def test_a_low_power_board_outside_the_gemm_data_carries_a_power_note():
    """The L4 (72 W) is priced from its datasheet clock; the note quotes the measured
    low-power boards' shares as the model reproduces them.  Boards in the data, and
    full-power boards, carry none."""
    from predictors.costs.datasheet import LOW_POWER_WATTS, power_cap_note

    gemm = profile_for_device("NVIDIA H100 80GB HBM3").kernel_models["gemm"]
    assert all(s.board_watts > 0 for s in GPU_SPECS.values() if s.kind == "gpu")
    low = {n for n, s in GPU_SPECS.items() if 0 < s.board_watts <= LOW_POWER_WATTS}
    assert low == {"Tesla T4", "Tesla P4", "NVIDIA L4"}
    note = power_cap_note(GPU_SPECS["NVIDIA L4"], gemm)
    assert note is not None and "72 W" in note
    assert "Tesla T4, 70 W" in note and "Tesla P4, 75 W" in note
    shares = [float(v) for v in re.findall(r"(\d+)%", note)]
    # the L4's predicted share and then the P4's and T4's: the model prices the measured
    # low-power boards far below the share the datasheet figures give the L4
    assert len(shares) == 3 and shares[0] > max(shares[1:]) > 0
    assert power_cap_note(GPU_SPECS["Tesla T4"], gemm) is None  # measured
    assert power_cap_note(GPU_SPECS["NVIDIA L40S"], gemm) is None  # 350 W
    assert GPU_SPECS["NVIDIA L40S"].board_watts > LOW_POWER_WATTS
    assert profile_for_device("NVIDIA L4").provenance["power_cap"] == note


def test_a_prediction_on_the_l4_carries_the_power_note(dlrm_runs):
    notes = {p: run[0].notes for p, run in dlrm_runs.items()}
    assert any(n.startswith("power: the NVIDIA L4") and n.endswith("does not allow for it")
               for n in notes["l4-1"])
    assert not any(n.startswith("power:") for p, ns in notes.items() if p != "l4-1"
                   for n in ns)
