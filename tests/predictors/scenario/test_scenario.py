import copy
import json

import pytest
from paths import SCENARIOS

from predictors.scenario import format as sc
from predictors.scenario.format import (
    ScenarioError,
    load_scenario,
    save_scenario,
    validate_scenario,
)


@pytest.fixture
def doc():
    return json.loads((SCENARIOS / "small_dlrm.json").read_text())


def errors_of(doc) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(doc)
    return [str(i) for i in info.value.issues]


def test_bundled_scenarios_validate():
    names = {p.stem for p in SCENARIOS.glob("*.json")}
    assert {"small_dlrm", "mlperf_dlrm_dcnv2", "bert_base"} <= names
    for path in SCENARIOS.glob("*.json"):
        assert load_scenario(path)["format"] == sc.FORMAT


def test_unknown_kind_names_the_field(doc):
    doc["model"]["nodes"][1]["kind"] = "mlpp"
    errs = errors_of(doc)
    assert any(e.startswith("model.nodes[1].kind: unknown block kind 'mlpp'") for e in errs)


@pytest.mark.parametrize("path,value", [
    (("model", "nodes", 1, "params", "layers", 1), 0),
    (("model", "nodes", 1, "params", "layers", 0), -5),
    (("model", "nodes", 2, "params", "tables", 3, "rows"), 0),
    (("model", "nodes", 0, "params", "features"), -1),
    (("training", "batch_size"), 0),
])
def test_non_positive_sizes_are_rejected(doc, path, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    errs = errors_of(doc)
    field = ".".join(str(k) for k in path[:1]) + "".join(
        f"[{k}]" if isinstance(k, int) else f".{k}" for k in path[1:])
    field = field.replace(".[", "[")
    assert any(e.startswith(field + ": must be") and "positive" in e for e in errs), errs


def test_edge_to_missing_node(doc):
    doc["model"]["edges"].append({"source": "top_mlp", "target": "nowhere"})
    assert any(e.startswith("model.edges[5].target: no block with id 'nowhere'")
               for e in errors_of(doc))


def test_cycle_is_reported_with_its_path(doc):
    doc["model"]["edges"].append({"source": "top_mlp", "target": "interaction"})
    errs = errors_of(doc)
    assert any("cycle" in e and "interaction" in e and "top_mlp" in e for e in errs), errs


def test_model_without_loss(doc):
    doc["model"]["nodes"] = [n for n in doc["model"]["nodes"] if n["kind"] != "loss"]
    doc["model"]["edges"] = [e for e in doc["model"]["edges"] if e["target"] != "loss"]
    assert "model.nodes: the model has no loss block" in errors_of(doc)


def test_format_and_version_are_checked(doc):
    bad = dict(doc, format="something-else")
    assert errors_of(bad)[0].startswith("format:")
    newer = dict(doc, version=sc.VERSION + 1)
    assert "newer than this program" in errors_of(newer)[0]
    assert "integer format version" in errors_of(dict(doc, version="1"))[0]


def test_migrations_run_in_sequence(doc, monkeypatch):
    old = dict(doc, version=0)
    old["model"] = {"blocks": doc["model"]["nodes"], "edges": doc["model"]["edges"]}

    def v0_to_v1(d):
        d["model"]["nodes"] = d["model"].pop("blocks")
        return d

    monkeypatch.setitem(sc.MIGRATIONS, 0, v0_to_v1)
    assert validate_scenario(old)["model"]["nodes"][0]["id"] == "dense"
    monkeypatch.delitem(sc.MIGRATIONS, 0)
    assert "no migration from version 0" in errors_of(old)[0]


def test_defaults_are_filled(doc):
    del doc["model"]["nodes"][1]["params"]["activation"]
    del doc["training"]["lr"]
    out = validate_scenario(doc)
    assert out["model"]["nodes"][1]["params"]["activation"] == "relu"
    assert out["training"]["lr"] > 0


def test_round_trip(tmp_path, doc):
    first = validate_scenario(doc)
    path = tmp_path / "s.json"
    save_scenario(first, path)
    second = load_scenario(path)
    assert second == first
    save_scenario(second, path)
    assert load_scenario(path) == first


def test_failed_save_keeps_the_old_file(tmp_path, doc, monkeypatch):
    path = tmp_path / "s.json"
    save_scenario(validate_scenario(doc), path)
    before = path.read_text()
    bad = copy.deepcopy(validate_scenario(doc))
    bad["name"] = object()  # not JSON serializable: the write fails midway
    with pytest.raises(TypeError):
        save_scenario(bad, path)
    assert path.read_text() == before
    assert list(tmp_path.iterdir()) == [path]


def test_unreadable_and_invalid_json_files(tmp_path):
    with pytest.raises(ScenarioError, match="No such file"):
        load_scenario(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "ml-dse/scenario", ')
    with pytest.raises(ScenarioError, match=r"broken.json: \(file\): not valid JSON"):
        load_scenario(broken)


def test_wiring_errors_name_the_block(doc):
    from predictors.model.workload import build_workload

    doc["model"]["nodes"][1]["params"]["layers"] = [128, 64, 32]  # dot needs 16 = dim
    with pytest.raises(ScenarioError) as info:
        build_workload(validate_scenario(doc))
    issue = info.value.issues[0]
    assert issue.field == "model.nodes[3]" and issue.node_id == "interaction"
    assert "equal widths" in issue.message


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["model"]["nodes"][1].update(kind=["mlp"]), "model.nodes[1].kind"),
    (lambda d: d["model"]["edges"][0].update(source=["x"]), "model.edges[0].source"),
    (lambda d: d.update(platform={"preset": [1]}), "platform.preset"),
    (lambda d: d.update(platform={"nodes": [{"kind": "gpu", "id": ["a"]}]}),
     "platform.nodes[0].id"),
    (lambda d: d.update(platform={"nodes": [{"kind": "gpu", "id": "a"}], "edges": 5}),
     "platform.edges"),
    (lambda d: d.update(parallelism=5), "parallelism"),
    (lambda d: d.update(parallelism={"embedding_sharding": "bogus"}),
     "parallelism.embedding_sharding"),
    (lambda d: d.update(layout=5), "layout"),
    # custom platforms: their links, ids and device parameters
    (lambda d: d.update(platform={"nodes": [{"kind": "gpu", "id": "a"}, {"kind": "gpu",
                                  "id": "b"}], "edges": [{"source": ["a"], "target": "b",
                                                           "kind": "nvlink3"}]}),
     "platform.edges[0].source"),
    (lambda d: d.update(platform={"nodes": [{"kind": "cpu", "id": "c", "params": "zz"}]}),
     "platform.nodes[0].params"),
    (lambda d: d.update(platform={"nodes": [{"kind": "cpu", "id": "c",
                                             "params": {"threads": -4}}]}),
     "platform.nodes[0].params.threads"),
    (lambda d: d.update(platform={"nodes": [{"kind": "gpu", "id": "g",
                                             "params": {"model": "rtx9090"}}]}),
     "platform.nodes[0].params.model"),
    (lambda d: d.update(platform={"nodes": [{"kind": "cpu", "id": "c"},
                                            {"kind": "cpu", "id": "c"}]}),
     "platform.nodes[1].id"),
    (lambda d: d.update(platform={"nodes": [{"kind": "gpu", "id": f"g{i}"} for i in range(3)]
                                  + [{"kind": "node", "id": "n0"}, {"kind": "node", "id": "n1"}]}),
     "platform.nodes"),
    # non-finite numbers and sizes no tensor can have
    (lambda d: d["training"].update(lr=float("nan")), "training.lr"),
    (lambda d: d["training"].update(batch_size=10 ** 20), "training.batch_size"),
    (lambda d: d["model"]["nodes"][2]["params"]["tables"][0].update(
        distribution={"kind": "zipf", "alpha": float("inf")}),
     "model.nodes[2].params.tables[0].distribution.alpha"),
    (lambda d: d["model"]["nodes"][2]["params"]["tables"][0].update(rows=2 ** 62),
     "model.nodes[2].params.tables[0].rows"),
    (lambda d: d.update(parallelism={"embedding_sharding": {"tables": 99}}),
     "parallelism.embedding_sharding.tables"),
])
def test_wrong_types_are_reported_not_raised(doc, mutate, field):
    mutate(doc)
    assert any(e.startswith(field + ":") for e in errors_of(doc))


def test_non_utf8_file(tmp_path):
    bad = tmp_path / "binary.json"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(bad)


def test_huge_layer_counts_and_nan_dropout_are_refused():
    bert = json.loads((SCENARIOS / "bert_base.json").read_text())
    layers = next(n for n in bert["model"]["nodes"] if n["kind"] == "transformer_layer")
    layers["params"]["count"] = 1_000_000  # would build a million layers
    layers["params"]["dropout"] = float("nan")
    errors = errors_of(bert)
    assert any(".params.count:" in e and "<= 512" in e for e in errors)
    assert any(".params.dropout:" in e and "finite" in e for e in errors)


def test_custom_gpu_model_may_be_the_name_the_gpu_reports():
    from predictors.hardware.platforms import resolve_platform

    plat = {"nodes": [{"kind": "gpu", "id": "g", "params": {"model": "nvidia-h100-80gb-hbm3"}}]}
    assert resolve_platform(sc.validate_platform(plat)).device == "NVIDIA H100 80GB HBM3"


def test_optimizers_are_sgd_adam_adamw_and_adagrad(doc):
    for name in ("sgd", "adam", "adamw", "adagrad"):
        doc["training"]["optimizer"] = name
        assert validate_scenario(doc)["training"]["optimizer"] == name
    doc["training"]["optimizer"] = "lamb"
    with pytest.raises(ScenarioError) as err:
        validate_scenario(doc)
    assert "training.optimizer" in str(err.value) and "'adagrad'" in str(err.value)


def test_a_batch_per_gpu_sets_the_global_batch_on_any_platform():
    from predictors.scenario.format import validate_scenario

    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "dgx-a100"}
    doc["training"]["batch_per_gpu"] = 256
    out = validate_scenario(doc)
    assert out["training"]["batch_size"] == 8 * 256
    out["platform"] = {"preset": "pcie-4x-a100"}   # the batch stays per GPU
    assert validate_scenario(out)["training"]["batch_size"] == 4 * 256
