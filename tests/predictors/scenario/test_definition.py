"""The typed definition of the scenario format: its JSON Schema and document, the typed
decoder on the bundled scenarios, and error wording for bad input of every kind."""
import copy
import json
import re

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT, SCENARIOS

from predictors.scenario import definition, schema
from predictors.scenario.format import (
    ScenarioError,
    validate_platform,
    validate_scenario,
)
from predictors.scenario.registry import BLOCK_KINDS, default_params

DOC = ROOT / "docs" / "scenario-format.md"


def small() -> dict:
    return json.loads((SCENARIOS / "small_dlrm.json").read_text())


def errors_of(doc) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(doc)
    return [str(i) for i in info.value.issues]


# ---- the schema and its document -------------------------------------------------------

def test_the_schema_in_the_doc_is_up_to_date():
    text = DOC.read_text(encoding="utf-8")
    assert schema.render_doc(text) == text, \
        "docs/scenario-format.md is out of date: run python -m predictors.scenario.schema"
    assert schema.main([str(DOC), "--check"]) == 0
    generated = text[text.index(schema.BEGIN):text.index(schema.END)]
    body = generated[generated.index("```json") + len("```json"):generated.rindex("```")]
    assert json.loads(body) == schema.json_schema()


def test_the_check_reports_a_stale_doc(tmp_path, capsys):
    stale = tmp_path / "format.md"
    stale.write_text(f"intro\n{schema.BEGIN}\nold\n{schema.END}\nmore\n")
    assert schema.main([str(stale), "--check"]) == 1
    assert schema.main([str(stale)]) == 0
    text = stale.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{schema.END}\nmore\n")
    assert schema.main([str(stale), "--check"]) == 0
    (tmp_path / "none.md").write_text("no markers")
    assert schema.main([str(tmp_path / "none.md")]) == 2
    assert "markers" in capsys.readouterr().err


def test_the_doc_example_is_a_valid_scenario():
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"```json\n(.*?)```", text[:text.index(schema.BEGIN)], re.DOTALL).group(1)
    doc = validate_scenario(json.loads(example))
    assert doc["model"]["nodes"][1]["params"]["activation"] == "relu"  # a default filled in


def test_the_schema_lists_every_block_kind_with_its_parameters():
    s = schema.json_schema()
    defs = s["$defs"]
    kinds = {defs[ref["$ref"].split("/")[-1]]["properties"]["kind"]["enum"][0]
             for ref in defs["Model"]["properties"]["nodes"]["items"]["anyOf"]}
    assert kinds == set(BLOCK_KINDS)
    for name, kind in BLOCK_KINDS.items():
        params = defs[definition.PARAMS_TYPES[name].__name__]
        assert list(params["properties"]) == [p.name for p in kind.params]
        assert params["additionalProperties"] is False
    count = defs["TransformerLayerParams"]["properties"]["count"]
    assert count["minimum"] == 1 and count["maximum"] == 512


def test_parameter_types_are_made_from_the_param_specs():
    for name in BLOCK_KINDS:
        assert msgspec.to_builtins(definition.PARAMS_TYPES[name]()) == default_params(name)


# ---- the typed decoder on the bundled scenarios ----------------------------------------

@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.json")), ids=lambda p: p.stem)
def test_bundled_scenarios_decode_with_the_typed_decoder(path):
    typed = definition.SCENARIO_DECODER.decode(path.read_bytes())
    assert isinstance(typed, definition.Scenario) and typed.format == definition.FORMAT
    raw = json.loads(path.read_text())
    assert [b.id for b in typed.model.nodes] == [n["id"] for n in raw["model"]["nodes"]]
    out = validate_scenario(raw)
    assert out["training"] == msgspec.to_builtins(typed.training)
    assert [n["params"] for n in out["model"]["nodes"]] == \
        [msgspec.to_builtins(b.params) for b in typed.model.nodes]


# ---- wording ----------------------------------------------------------------------------

def test_every_problem_is_reported_at_once():
    doc = small()
    doc["name"] = 5
    doc["model"]["nodes"][1]["params"].update(layers=[0], activation="swish")
    doc["model"]["nodes"][4]["params"]["layers"] = "wide"
    doc["training"].update(lr=-1, momentum=0.9)
    doc["layout"] = []
    errs = errors_of(doc)
    assert errs == [
        "name: expected a string, got 5",
        "model.nodes[1].params.layers[0]: must be positive, got 0",
        ("model.nodes[1].params.activation: expected one of ['relu', 'gelu', 'sigmoid', "
         "'tanh'], got 'swish'"),
        "model.nodes[4].params.layers: expected a non-empty list of integers, got 'wide'",
        ("training.momentum: unknown training setting (known: batch_size, batch_per_gpu, optimizer, "
         "dtype, lr, input_pipeline)"),
        "training.lr: must be positive, got -1",
        "layout: expected an object of canvas positions, got []",
    ]


def test_problems_inside_a_block_name_the_block():
    doc = small()
    doc["model"]["nodes"][2]["params"]["tables"][0]["distribution"] = {"kind": "pareto"}
    doc["model"]["nodes"][2]["params"]["mode"] = "max"
    with pytest.raises(ScenarioError) as info:
        validate_scenario(doc)
    assert {i.node_id for i in info.value.issues} == {"tables"}
    assert str(info.value.issues[0]) == (
        "model.nodes[2].params.tables[0].distribution: expected {'kind': 'uniform'} or "
        "{'kind': 'zipf', 'alpha': a}, got {'kind': 'pareto'}")


@pytest.mark.parametrize("mutate,line", [
    (lambda d: d["model"]["nodes"][0].pop("id"),
     "model.nodes[0].id: missing (expected a non-empty string)"),
    (lambda d: d["model"].pop("nodes"),
     "model.nodes: missing (expected a non-empty list of blocks)"),
    (lambda d: d["model"]["nodes"].__setitem__(0, 7), "model.nodes[0]: expected an object, got 7"),
    (lambda d: d["model"]["nodes"][5].update(params={"kind": "hinge"}),
     "model.nodes[5].params.kind: expected one of ['bce', 'mse', 'cross_entropy'], got 'hinge'"),
    (lambda d: d["model"]["nodes"][5].update(params={"weight": 2}),
     "model.nodes[5].params.weight: unknown parameter of loss (known: kind)"),
    (lambda d: d.update(platform={"preset": "dgx-b300"}),
     ("platform.preset: unknown preset 'dgx-b300' (known: local-cpu, v100-1, a100-1, h100-1, "
      "h200-1, l4-1, l40s-1, b200-1, mi300x-1, dgx1-v100, dgx-a100, dgx-h100, dgx-h200, "
      "dgx-b200, pcie-4x-a100, 2node-8x-h100)")),
    (lambda d: d.update(platform={"nodes": [{"id": "g", "kind": "tpu"}]}),
     ("platform.nodes[0].kind: expected one of ['cpu', 'gpu', 'node', 'nvswitch', 'nic', "
      "'pcie_switch'], got 'tpu'")),
    (lambda d: d.update(platform={}),
     "platform: expected {'preset': NAME} or {'nodes': [...], 'edges': [...]}"),
    (lambda d: d["training"].update(batch_size=2 ** 50),
     "training.batch_size: must be <= 1,099,511,627,776, got 1,125,899,906,842,624"),
    (lambda d: d["training"].update(batch_size=10 ** 400),
     "training.batch_size: must be <= 1,099,511,627,776, got <1329-bit integer>"),
    (lambda d: d["training"].update({"a\nb": 1}),
     "training['a\\nb']: unknown training setting (known: batch_size, batch_per_gpu, optimizer, "
     "dtype, lr, input_pipeline)"),
    (lambda d: d.update(parallelism={"embedding_sharding": {"tables/0": "x"}}),
     "parallelism.embedding_sharding.tables/0: expected a rank (0, 1, ...), 'rw', 'dp' or {'kind': 'tw'|'rw'|'dp'|'cw'|'twrw', ...}, got 'x'"),
    (lambda d: d.update(version=10 ** 5000),
     ("version: version <16610-bit integer> is newer than this program understands (1); "
      "please upgrade")),
])
def test_one_line_naming_the_field(mutate, line):
    doc = small()
    mutate(doc)
    assert line in errors_of(doc)


def test_a_platform_alone_is_checked_the_same_way():
    with pytest.raises(ScenarioError) as info:
        validate_platform({"nodes": [{"id": "g", "kind": "gpu", "params": {"model": 7}}],
                           "edges": [{"source": "g", "target": "h", "kind": "pcie9"}]})
    assert [str(i) for i in info.value.issues] == [
        "platform.nodes[0].params.model: expected a string, got 7",
        ("platform.edges[0].kind: unknown link kind 'pcie9' (known: nvlink2, nvlink3, "
         "nvlink4, nvlink5, pcie4, pcie5, nic400, nic200)"),
    ]
    assert validate_platform({"preset": "local-cpu", "threads": 4}) == \
        {"preset": "local-cpu", "threads": 4}


# ---- fuzz: wrong types anywhere give a ScenarioError, never a traceback -----------------

def _paths(value, path=()):
    """Every place in a document: each object member and list item, at every depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield path + (key,)
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield path + (i,)
            yield from _paths(item, path + (i,))


def _set(doc, path, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value


_DELETE = object()
_BASE = small()
_PATHS = [p for p in _paths(_BASE) if p[0] != "layout"] + [("layout",)]
_WRONG = [None, True, -1, 0, 2.5, float("nan"), float("inf"), 10 ** 30, "", "x",
          [], [1], {}, {"kind": 1}, _DELETE]


def _assert_reported(doc) -> None:
    try:
        validate_scenario(doc)
    except ScenarioError as exc:
        assert exc.issues and "\n" not in str(exc)
        assert all(i.field and i.message and "\n" not in i.message for i in exc.issues)


def test_wrong_types_in_every_field_are_scenario_errors():
    for path in _PATHS:
        for value in _WRONG:
            doc = copy.deepcopy(_BASE)
            _set(doc, path, value)
            _assert_reported(doc)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(_PATHS), _json | st.just(_DELETE)),
                      min_size=1, max_size=4))
def test_fuzzed_scenarios_give_scenario_errors(edits):
    doc = copy.deepcopy(_BASE)
    for path, value in edits:
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced what this path runs through
    _assert_reported(doc)
    try:
        text = json.dumps(doc, allow_nan=False).encode()
    except ValueError:
        return  # NaN or infinity: not JSON
    try:
        definition.SCENARIO_DECODER.decode(text)
    except msgspec.ValidationError:
        pass
