"""Corrupt device-profile files: a clear ProfileError naming the file and field, never a
traceback, a hang or a silent NaN (copies of the bundled profiles, one edit each)."""
import json
import shutil

import numpy as np
import pytest
from paths import ROOT, SCENARIOS

from predictors.cli.commands import main
from predictors.engine.predict import predict
from predictors.profiles import ProfileError, load_profile
from predictors.scenario.format import load_scenario

CPU = ROOT / "resources" / "profiles" / "cpu" / "local-cpu-1t.json"
GPU = ROOT / "resources" / "profiles" / "gpu" / "nvidia-h200.json"


def copy_profile(src, tmp_path, edit_json=None, edit_arrays=None):
    dst = tmp_path / src.name
    doc = json.loads(src.read_text())
    if edit_json:
        edit_json(doc)
    dst.write_text(json.dumps(doc))
    npz = src.with_suffix(".npz")
    if edit_arrays:
        arrays = dict(np.load(npz))
        edit_arrays(arrays)
        np.savez(dst.with_suffix(".npz"), **arrays)
    else:
        shutil.copy(npz, dst.with_suffix(".npz"))
    return dst


@pytest.mark.parametrize("src,edit_json,edit_arrays,fragment", [
    (CPU, lambda d: d["device"].update(mem_bw=0), None, "device.mem_bw"),
    (CPU, lambda d: d["device"].update(kernel_floor_s="x"), None, "device.kernel_floor_s"),
    (CPU, lambda d: d["device"].update(kind="tpu"), None, "device.kind"),
    (GPU, lambda d: d["overheads"]["default"].update(t1=float("nan")), None, "t1"),
    (GPU, lambda d: d["overheads"]["default"].update(t1=-1.0), None, "t1"),
    (GPU, lambda d: d["kernel_models"]["other"]["peaks"].update(dram_bw=0), None, "dram_bw"),
    (CPU, lambda d: d.update(provenance="x"), None, "provenance"),
    (CPU, None, lambda a: a.update({"gemm/left": np.zeros_like(a["gemm/left"]),
                                     "gemm/right": np.zeros_like(a["gemm/right"])}),
     "child"),  # a tree walk that would never end
    (CPU, None, lambda a: a.update({"gemm/value": a["gemm/value"] * np.nan}), "non-finite"),
    (CPU, None, lambda a: a.pop("elementwise/baseline"), "missing"),
    (GPU, None, lambda a: a.update({k: v[: len(v) // 2] for k, v in a.items()
                                     if k.startswith("gemm/c0.")}), "malformed"),
])
def test_corrupt_profiles_are_named_errors(tmp_path, src, edit_json, edit_arrays, fragment):
    path = copy_profile(src, tmp_path, edit_json, edit_arrays)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(path) in str(info.value) and fragment in str(info.value)


def test_truncated_npz(tmp_path):
    path = copy_profile(CPU, tmp_path)
    npz = path.with_suffix(".npz")
    npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    with pytest.raises(ProfileError, match="malformed profile"):
        load_profile(path)


def test_a_profile_of_the_other_device_kind_is_refused(capsys):
    gpu_scenario = load_scenario(SCENARIOS / "small_dlrm.json")  # a100-1
    with pytest.raises(ProfileError, match="describes a CPU"):
        predict(gpu_scenario, profile=str(CPU))
    assert main(["predict", str(SCENARIOS / "small_dlrm.json"), "--profile", str(CPU)]) == 2
    assert "describes a CPU" in capsys.readouterr().err
    assert main(["validate", "--profile", str(GPU), "--n", "1"]) == 2  # before measuring
    assert "needs a CPU profile" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["measure", "S", "--iters", "0"],
                                  ["measure", "S", "--threads", "-2"],
                                  ["validate", "--n", "0"]])
def test_counts_below_one_are_usage_errors(argv, capsys):
    argv = [str(SCENARIOS / "small_dlrm.json") if a == "S" else a for a in argv]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and "must be at least 1" in capsys.readouterr().err
