"""``python -m predictors kernels predict``: CSV in, CSV with pred_ms out, one-line errors."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from paths import ROOT

from predictors.cli.commands import main
from predictors.hardware.specs import GPU_SPECS


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_gemm_round_trip_by_reported_name(tmp_path):
    src = _write(tmp_path / "s.csv", ["B", "M", "N", "K", "note"],
                 [[1, 1024, 1024, 1024, "a"], [1, 4096, 4096, 4096, "b"]])
    out = subprocess.run([sys.executable, "-m", "predictors", "kernels", "predict", "--gpu",
                          "NVIDIA H100 80GB HBM3", "--op", "mm", "--in", str(src), "--out",
                          str(tmp_path / "p.csv")], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    rows = _read(tmp_path / "p.csv")
    assert [r["note"] for r in rows] == ["a", "b"]
    small, big = (float(r["pred_ms"]) for r in rows)
    peak = GPU_SPECS["NVIDIA H100 80GB HBM3"].flops("float32")
    assert 2 * 4096 ** 3 / (big * 1e-3) < peak and 2 * 1024 ** 3 / (small * 1e-3) < peak
    assert big > 32 * small  # 64x the FLOPs, both large enough to fill the GPU


@pytest.mark.parametrize("op", ["bmm", "addmm", "baddbmm"])
def test_other_gemm_ops(tmp_path, op):
    """B = 64 products (or rows times 64 for addmm) against one: more work, more time,
    and never faster than the V100's fp32 peak allows."""
    src = _write(tmp_path / "s.csv", ["B", "M", "N", "K"], [[64, 128, 128, 64],
                                                            [1, 128, 128, 64]])
    assert main(["kernels", "predict", "--gpu", "Tesla V100-SXM2-32GB", "--op", op,
                 "--in", str(src), "--out", str(tmp_path / "p.csv")]) == 0
    many, one = (float(r["pred_ms"]) for r in _read(tmp_path / "p.csv"))
    assert many > one
    peak = GPU_SPECS["Tesla V100-SXM2-32GB"].flops("float32")
    assert many * 1e-3 >= 2 * 64 * 128 * 128 * 64 / peak


KERNEL_GPUS = ("NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe",
               "NVIDIA H100 80GB HBM3", "NVIDIA L4", "Tesla P100-PCIE-16GB", "Tesla P4",
               "Tesla T4", "Tesla V100-PCIE-32GB", "NVIDIA L40S", "NVIDIA B200",
               "AMD Instinct MI300X")


@pytest.mark.parametrize("gpu", KERNEL_GPUS)
def test_bmm_and_conv_on_every_listed_gpu(tmp_path, gpu):
    bmm = _write(tmp_path / "b.csv", ["B", "M", "N", "K"], [[512, 32, 32, 64], [8, 32, 32, 64]])
    assert main(["kernels", "predict", "--gpu", gpu, "--op", "bmm", "--in", str(bmm),
                 "--out", str(tmp_path / "pb.csv")]) == 0
    many, few = (float(r["pred_ms"]) for r in _read(tmp_path / "pb.csv"))
    assert many > few > 0
    conv = _write(tmp_path / "c.csv", ["B", "Cin", "Cout", "H", "kernel", "stride", "padding"],
                  [[32, 128, 128, 28, 3, 1, 1], [32, 128, 128, 28, "", "", ""],
                   [32, 128, 128, 28, 1, 1, 0], [32, 3, 64, 224, 7, 2, 3]])
    assert main(["kernels", "predict", "--gpu", gpu, "--op", "conv", "--in", str(conv),
                 "--out", str(tmp_path / "pc.csv")]) == 0
    k3, k3_default, k1, stem = (float(r["pred_ms"]) for r in _read(tmp_path / "pc.csv"))
    assert k3 == k3_default  # 3x3, stride 1, padding 1 by default
    assert k3 > k1 > 0 and stem > 0  # nine taps cost more than one


def test_conv_errors_are_one_line(tmp_path, capsys):
    bad = _write(tmp_path / "c.csv", ["B", "Cin", "H"], [[32, 128, 28]])
    assert main(["kernels", "predict", "--gpu", "L4", "--op", "conv", "--in", str(bad),
                 "--out", str(tmp_path / "o.csv")]) == 2
    assert "missing column(s) Cout (conv columns: B,Cin,Cout,H" in capsys.readouterr().err
    tiny = _write(tmp_path / "t.csv", ["B", "Cin", "Cout", "H", "kernel", "padding"],
                  [[1, 8, 8, 2, 5, 0]])
    assert main(["kernels", "predict", "--gpu", "L4", "--op", "conv", "--in", str(tiny),
                 "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "does not fit a 2x2 image" in err and err.count("\n") == 1


def test_embedding_bag_with_distribution(tmp_path):
    src = _write(tmp_path / "e.csv", ["rows", "dim", "batch", "pooling", "distribution",
                                      "alpha", "backward"],
                 [[10_000_000, 128, 2048, 20, "uniform", "", 0],
                  [10_000_000, 128, 2048, 20, "zipf", 1.2, 0],
                  [10_000_000, 128, 2048, 20, "uniform", "", 1],
                  [10_000_000, 128, 2048, 40, "uniform", "", 1]])
    assert main(["kernels", "predict", "--gpu", "nvidia-a100-sxm4-40gb", "--op",
                 "embedding_bag", "--in", str(src), "--out", str(tmp_path / "p.csv")]) == 0
    uni, zipf, bwd, bwd_twice = (float(r["pred_ms"]) for r in _read(tmp_path / "p.csv"))
    assert 0 < zipf < uni  # hot rows hit in L2
    assert bwd_twice > bwd  # twice the lookups: twice the gradient rows to write


def test_errors_are_one_line(tmp_path, capsys):
    good = _write(tmp_path / "g.csv", ["M", "N", "K"], [[8, 8, 8]])
    assert main(["kernels", "predict", "--gpu", "NVIDIA GeForce 256", "--op", "mm",
                 "--in", str(good), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --gpu: unknown device") and "\n" not in err
    bad = _write(tmp_path / "b.csv", ["M", "N", "K"], [[8, "x", 8]])
    assert main(["kernels", "predict", "--gpu", "NVIDIA H200", "--op", "mm",
                 "--in", str(bad), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 2" in err and "'N'" in err and "\n" not in err
    missing = _write(tmp_path / "m.csv", ["M", "K"], [[8, 8]])
    assert main(["kernels", "predict", "--gpu", "NVIDIA H200", "--op", "bmm",
                 "--in", str(missing), "--out", str(tmp_path / "o.csv")]) == 2
    assert "missing column(s) N, B" in capsys.readouterr().err
    assert main(["kernels", "predict", "--gpu", "NVIDIA H200", "--op", "mm",
                 "--in", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["kernels", "predict", "--gpu", "NVIDIA H200", "--op", "conv3d",
              "--in", str(good), "--out", str(tmp_path / "o.csv")])
    assert exc.value.code == 2


def test_half_precision_gemms_use_the_tensor_core_peak(tmp_path, capsys):
    src = _write(tmp_path / "s.csv", ["M", "N", "K", "dtype"],
                 [[8192, 8192, 8192, "float32"], [8192, 8192, 8192, "bf16"],
                  [8192, 8192, 8192, "float16"], [8192, 8192, 8192, ""]])
    assert main(["kernels", "predict", "--gpu", "NVIDIA H100 80GB HBM3", "--op", "mm",
                 "--in", str(src), "--out", str(tmp_path / "p.csv")]) == 0
    fp32, bf16, fp16, default = (float(r["pred_ms"]) for r in _read(tmp_path / "p.csv"))
    assert default == fp32
    flops = 2 * 8192**3
    assert 20e12 < flops / (fp32 * 1e-3) < 67e12      # CUDA cores: below the 67 TF peak
    assert 300e12 < flops / (bf16 * 1e-3) <= 989e12   # tensor cores: below 989 TF dense
    assert fp16 == pytest.approx(bf16)
    bad = _write(tmp_path / "b.csv", ["M", "N", "K", "dtype"], [[1, 2, 3, "int8"]])
    assert main(["kernels", "predict", "--gpu", "NVIDIA H100 80GB HBM3", "--op", "mm",
                 "--in", str(bad), "--out", str(tmp_path / "q.csv")]) == 2
    assert "'int8' is not one of" in capsys.readouterr().err


def test_the_gpu_is_named_with_gpu_not_device(tmp_path, capsys):
    """``--device`` is cpu/cuda elsewhere; the kernels commands name their GPU with --gpu."""
    src = _write(tmp_path / "s.csv", ["M", "N", "K"], [[256, 256, 256]])
    with pytest.raises(SystemExit) as exc:
        main(["kernels", "predict", "--device", "NVIDIA H200", "--op", "mm",
              "--in", str(src), "--out", str(tmp_path / "p.csv")])
    assert exc.value.code == 2
    assert "--gpu" in capsys.readouterr().err
    assert main(["kernels", "predict", "--gpu", "nvidia-h200-measured", "--op", "addmm",
                 "--in", str(src), "--out", str(tmp_path / "p.csv")]) == 0
    assert "(measured)" in capsys.readouterr().out
    trace = str(ROOT / "resources" / "measurements" / "nvidia-h200-2026-11-29"
                / "scenario00.json.gz")
    with pytest.raises(SystemExit) as exc:
        main(["kernels", "validate-traces", trace, "--device", "NVIDIA H200"])
    assert exc.value.code == 2
    capsys.readouterr()
    assert main(["kernels", "validate-traces", trace, "--gpu", "NVIDIA GeForce 256"]) == 2
    assert capsys.readouterr().err.startswith("error: --gpu: ")
    assert main(["kernels", "validate-traces", trace, "--gpu", "nvidia-h200-measured",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"] == "NVIDIA H200"
