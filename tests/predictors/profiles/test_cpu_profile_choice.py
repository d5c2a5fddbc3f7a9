"""The local CPU's default profile is the one calibrated on this kind of CPU."""
import pytest
from paths import SCENARIOS

import predictors.hardware.specs as specs
from predictors import profiles
from predictors.engine.predict import predict
from predictors.profiles import default_profile, other_cpu_note
from predictors.scenario.format import load_scenario

ZEN3 = "AuthenticAMD family 25 model 1, avx2"
ZEN4 = "AuthenticAMD family 25 model 17, avx512"


def pretend_host(monkeypatch, signature: str) -> None:
    """This host's CPU reads as ``signature`` wherever the core asks for it."""
    fake = lambda: signature  # noqa: E731
    for module in (specs, profiles):
        monkeypatch.setattr(module, "cpu_signature", fake)


def test_this_cpu_has_a_signature():
    import platform

    sig = specs.cpu_signature()
    assert sig.rsplit(", ", 1)[-1] in ("avx512", "avx2", "sse", platform.machine())


@pytest.mark.parametrize("host,expected", [
    (ZEN3, ZEN3), (ZEN4, ZEN4),
    ("GenuineIntel family 6 model 143, avx512", ZEN4),   # same vector ISA
    ("GenuineIntel family 6 model 85, avx2", ZEN3),
])
def test_the_default_cpu_profile_follows_the_host(monkeypatch, host, expected):
    pretend_host(monkeypatch, host)
    prof = default_profile("cpu", "cpu", 1)
    assert prof.provenance["cpu_signature"] == expected
    note = other_cpu_note(prof)
    assert (note is None) == (host == expected)
    if note:
        assert expected in note and host in note and "calibrate" in note


def test_a_prediction_says_when_its_profile_is_another_cpus(monkeypatch):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu"}
    doc["training"]["batch_size"] = 16
    pretend_host(monkeypatch, "GenuineIntel family 6 model 85, sse")
    result = predict(doc)
    assert any("calibrated on another CPU" in n for n in result.notes)
    pretend_host(monkeypatch, ZEN4)
    result = predict(doc)
    assert not any("another CPU" in n for n in result.notes)
    assert "Zen 4" in result.profile


def test_gpu_profiles_carry_no_cpu_note():
    gpu = default_profile("NVIDIA H200", "gpu")
    assert gpu.device.name == "NVIDIA H200" and other_cpu_note(gpu) is None
    assert profiles.other_cpu_note(None) is None


def test_a_profile_that_does_not_record_its_cpu_gets_no_claim(monkeypatch):
    import dataclasses

    prof = default_profile("cpu", "cpu", 1)
    unknown = dataclasses.replace(prof, provenance={
        k: v for k, v in prof.provenance.items() if k != "cpu_signature"})
    pretend_host(monkeypatch, ZEN3)
    assert other_cpu_note(unknown) is None


def test_the_exact_cpu_wins_over_one_with_the_same_vector_isa(monkeypatch, tmp_path):
    """Two profiles for AVX-512 CPUs, an unsigned one first: the host's own is chosen."""
    import json
    import shutil

    src = default_profile("cpu", "cpu", 1)
    path = profiles.profile_file(src)
    copies = []
    for name, signature in (("a-unsigned", None), ("b-intel", "GenuineIntel family 6 "
                                                   "model 143, avx512"), ("c-zen4", ZEN4)):
        doc = json.loads(path.read_text())
        doc["name"] = name
        doc["provenance"].pop("cpu_signature", None)
        if signature:
            doc["provenance"]["cpu_signature"] = signature
        doc["arrays"] = f"{name}.npz"
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        shutil.copy(path.with_suffix(".npz"), tmp_path / f"{name}.npz")
        copies.append(tmp_path / f"{name}.json")
    monkeypatch.setattr(profiles, "bundled_profiles", lambda: copies)
    for host, expected in ((ZEN4, "c-zen4"),
                           ("GenuineIntel family 6 model 143, avx512", "b-intel"),
                           ("GenuineIntel family 6 model 207, avx512", "b-intel"),
                           ("GenuineIntel family 6 model 85, avx2", "b-intel")):
        pretend_host(monkeypatch, host)
        assert default_profile("cpu", "cpu", 1).name == expected, host
