"""Plans evaluated on worker processes give the search's serial answer."""
import pytest
from paths import SCENARIOS

from predictors.plan.rank_sharding import rank_shardings
from predictors.scenario.format import ScenarioError, load_scenario

TWO_GPUS = {"nodes": [{"id": "g0", "kind": "gpu", "params": {"model": "a100"}},
                      {"id": "g1", "kind": "gpu", "params": {"model": "a100"}}],
            "edges": [{"source": "g0", "target": "g1", "kind": "nvlink3"}]}


@pytest.fixture(scope="module")
def scenario():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = TWO_GPUS
    return doc


@pytest.fixture(scope="module")
def serial(scenario):
    return rank_shardings(scenario, budget_s=120, top=5)


def _answer(ranking):
    return (ranking.evaluated, ranking.exhaustive,
            [(p.plan.to_json()["assignment"], p.iteration_ms) for p in ranking.plans])


@pytest.mark.slow   # two more processes that import torch; `make test-full`
def test_local_workers_find_what_one_process_finds(scenario, serial):
    assert serial.exhaustive   # every placement and every other kind: no clock in it
    pooled = rank_shardings(scenario, budget_s=120, top=5, workers=2)
    assert _answer(pooled) == _answer(serial)
    assert any("2 worker process(es)" in n for n in pooled.notes)


@pytest.mark.slow   # a cluster of two more processes; `make test-full`
def test_a_local_dask_cluster_finds_what_one_process_finds(scenario, serial):
    distributed = pytest.importorskip("distributed", reason="the cluster extra is not "
                                                            "installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        pooled = rank_shardings(scenario, budget_s=120, top=5, dask=cluster.scheduler_address)
    assert _answer(pooled) == _answer(serial)
    assert any("Dask cluster" in n for n in pooled.notes)
    with pytest.raises(ScenarioError, match="cannot reach the Dask scheduler"):
        rank_shardings(scenario, budget_s=1, dask="tcp://127.0.0.1:9")


def test_bad_worker_settings_are_named(scenario):
    with pytest.raises(ScenarioError, match="workers must be 1 or more"):
        rank_shardings(scenario, budget_s=1, workers=-1)
