"""A search over embedding sharding plans within a time budget.

The planners' plans (:func:`~predictors.model.sharding.candidate_plans`) are the seeds.
From the best plan found so far the search tries batches of moves (a table to another
rank, two tables of different ranks swapped), most of them taken from the slowest rank,
and goes to the best plan of a batch when it is faster (steepest descent).  When no move
of a batch helps, it kicks the best plan and descends again (iterated local search): by a
few random moves, or, every other kick, by changing one table's kind (table-wise,
row-wise, column-wise over the least loaded ranks, data-parallel), taken from the
slowest rank or among the tables not placed whole.  A new set of kinds costs a new
template rank (:class:`~predictors.engine.plan_evaluator.PlanEvaluator`), so kinds change
at local optima only.  The search goes on until the budget is spent, kicks stop finding
better plans, or it is cancelled; a cancelled search keeps what it found.  Small cases are enumerated instead
(:func:`enumerate_plans`): every table-wise placement, one per placement of the ranks'
table sets up to renaming identical ranks.

Plans are compared by their iteration (the slowest rank's), then by the ranks' mean: on a
plateau where the slowest rank is bound by what a move cannot change, the mean still
says which way is better.  Every rank's memory is a hard constraint
(``fits(plan)``); a plan that does not fit is never simulated.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..model.sharding import (
    REPLICATED,
    ROW_WISE,
    ColumnWise,
    Plan,
    TableRef,
    TableRowWise,
    is_rank,
)
from ..utils.progress import Cancelled

__all__ = ["SearchResult", "search_plans", "enumerate_plans", "EXHAUSTIVE_LIMIT",
           "SLOW_EXHAUSTIVE_LIMIT"]

EXHAUSTIVE_LIMIT = 20_000  # table-wise placements enumerated rather than searched
SLOW_EXHAUSTIVE_LIMIT = 256  # the same, when each plan is simulated from captured graphs

Evaluate = Callable[[list[Plan]], np.ndarray]   # plans -> each rank's iteration (ms)


@dataclass
class SearchResult:
    """Every distinct plan evaluated, with each rank's iteration (ms)."""

    plans: list[Plan] = field(default_factory=list)
    spans: list[np.ndarray] = field(default_factory=list)
    evaluated: int = 0          # plans simulated
    rejected: int = 0           # plans that did not fit and were never simulated
    exhaustive: bool = False    # every placement was evaluated
    cancelled: bool = False
    elapsed_s: float = 0.0

    def best_first(self) -> list[tuple[Plan, np.ndarray]]:
        order = sorted(range(len(self.plans)), key=lambda i: _score(self.spans[i]))
        return [(self.plans[i], self.spans[i]) for i in order]


def _score(spans: np.ndarray) -> tuple[float, float]:
    return float(spans.max()), float(spans.mean())


def placements(tables: int, ranks: int) -> int:
    """How many table-wise placements :func:`enumerate_plans` would visit (upper bound)."""
    return ranks ** tables


def enumerate_plans(tables: list[TableRef], ranks: int, rowwise: frozenset = frozenset()):
    """Every table-wise placement of the tables not in ``rowwise``, once per relabelling
    of the ranks (rank 0 gets the first table, a new rank is opened in order): ranks are
    told apart only by what they hold."""
    keys = [t.key for t in tables if t.key not in rowwise]

    def place(i: int, used: int, current: list[int]):
        if i == len(keys):
            yield list(current)
            return
        for r in range(min(used + 1, ranks)):
            current.append(r)
            yield from place(i + 1, max(used, r + 1), current)
            current.pop()

    for combo in place(0, 0, []):
        assignment: dict = {k: ROW_WISE for k in rowwise}
        assignment.update(zip(keys, combo))
        yield Plan("enumerated", ranks, assignment, "every table-wise placement tried")


def search_plans(tables: list[TableRef], ranks: int, evaluate: Evaluate,
                 seeds: list[Plan], *, budget_s: float = 10.0,
                 fits: Callable[[Plan], bool] = lambda p: True, batch: int = 64,
                 patience: int = 25, seed: int = 0,
                 exhaustive_limit: int = EXHAUSTIVE_LIMIT, kinds: bool = True,
                 node_size: int = 0,
                 cancelled: Callable[[], bool] | None = None,
                 progress: Callable[[float, str], None] | None = None) -> SearchResult:
    """Search the plans around ``seeds`` for ``budget_s`` seconds, or until ``patience``
    kicks in a row found nothing better (see the module); ``batch`` moves are tried at
    a time; ``kinds``: kicks also change tables' sharding kinds (table-row-wise over a
    node of ``node_size`` ranks too, on a platform of several).  Up to
    ``exhaustive_limit`` table-wise placements are enumerated instead, within the budget
    too (``exhaustive`` says whether they all were)."""
    t0 = time.perf_counter()
    res = SearchResult()
    seen: dict[tuple, int] = {}
    rng = random.Random(seed)

    def stop() -> bool:
        return time.perf_counter() - t0 >= budget_s or bool(cancelled and cancelled())

    def run(plans: list[Plan]) -> list[int]:
        """Evaluate the plans not seen yet; their positions in ``res``."""
        fresh, out = [], []
        for p in plans:
            sig = p.signature(tables)
            if sig in seen:
                out.append(seen[sig])
                continue
            if not fits(p):
                res.rejected += 1
                continue
            seen[sig] = len(res.plans) + len(fresh)
            fresh.append(p)
            out.append(seen[sig])
        if fresh:
            spans = np.atleast_2d(evaluate(fresh))
            res.plans.extend(fresh)
            res.spans.extend(spans)
            res.evaluated += len(fresh)
        return out

    def report(what: str) -> None:
        if progress is not None:
            elapsed = time.perf_counter() - t0
            progress(min(1.0, elapsed / budget_s) if budget_s > 0 else 1.0,
                     f"{what}: {res.evaluated:,} plans evaluated, best "
                     f"{_score(res.spans[best])[0]:.3f} ms" if res.plans else what)

    try:
        total = placements(len(tables), ranks)
        best = None
        run(seeds)
        if res.plans:
            best = min(range(len(res.plans)), key=lambda i: _score(res.spans[i]))
        if total <= exhaustive_limit:
            chunk, complete = [], True
            for plan in enumerate_plans(tables, ranks):
                chunk.append(plan)
                if len(chunk) == batch * 4:
                    run(chunk)
                    chunk = []
                    if stop():   # out of time: the placements so far
                        complete = False
                        break
            run(chunk)
            res.exhaustive = complete
            if kinds and complete and res.plans and not stop():
                # then every other kind of each table, around the best placement
                best = min(range(len(res.plans)), key=lambda i: _score(res.spans[i]))
                for t in tables:
                    if stop():
                        break
                    run(_other_kinds(res.plans[best], res.spans[best], t, ranks,
                                     node_size))
            res.cancelled = bool(cancelled and cancelled())
        else:
            if best is None:
                raise ValueError("no seed plan fits")
            current = best
            stale = kicks = 0
            while not stop() and kicks < patience:
                neighbours = _moves(res.plans[current], res.spans[current], tables, ranks,
                                    rng, batch)
                idx = run(neighbours)
                if idx:
                    cand = min(idx, key=lambda i: _score(res.spans[i]))
                    if _score(res.spans[cand]) < _score(res.spans[current]):
                        current, stale = cand, 0
                    else:
                        stale += 1
                else:
                    stale += 1
                if _score(res.spans[current]) < _score(res.spans[best]):
                    best, kicks = current, 0
                if stale >= 2:   # a local optimum: kick the best plan and descend again
                    kicked = (_change_kind(res.plans[best], res.spans[best], tables, ranks,
                                           rng, node_size) if kinds and kicks % 2 else None)
                    kicked = kicked or _kick(res.plans[best], tables, ranks, rng)
                    idx = run([kicked])
                    current = idx[0] if idx else best
                    stale, kicks = 0, kicks + 1
                report("searching")
    except Cancelled:
        res.cancelled = True
    res.elapsed_s = time.perf_counter() - t0
    return res


def _movable(plan: Plan) -> list[str]:
    return [k for k, r in plan.assignment.items() if is_rank(r)]


def _moved(plan: Plan, changes: dict, how: str) -> Plan:
    return Plan("searched", plan.ranks, {**plan.assignment, **changes},
                f"found by the search (last move: {how})")


def _moves(plan: Plan, spans: np.ndarray, tables: list[TableRef], ranks: int,
           rng: random.Random, n: int) -> list[Plan]:
    """``n`` neighbours of ``plan``: half move a table off the slowest rank or swap one
    of its tables with another rank's, half move or swap at random."""
    keys = _movable(plan)
    if not keys or ranks < 2:
        return []
    slow = int(np.argmax(spans))
    on_slow = [k for k in keys if plan.assignment[k] == slow] or keys
    out = []
    for i in range(n):
        pool = on_slow if i % 2 == 0 else keys
        a = rng.choice(pool)
        here = plan.assignment[a]
        if rng.random() < 0.5:
            to = rng.choice([r for r in range(ranks) if r != here])
            out.append(_moved(plan, {a: to}, f"moved {a} to rank {to}"))
        else:
            others = [k for k in keys if plan.assignment[k] != here]
            if not others:
                continue
            b = rng.choice(others)
            out.append(_moved(plan, {a: plan.assignment[b], b: here}, f"swapped {a}, {b}"))
    return out


def _kick(plan: Plan, tables: list[TableRef], ranks: int, rng: random.Random,
          moves: int = 3) -> Plan:
    keys = _movable(plan)
    changes = {k: rng.randrange(ranks) for k in rng.sample(keys, min(moves, len(keys)))}
    return _moved(plan, changes, "kicked")


def _change_kind(plan: Plan, spans: np.ndarray, tables: list[TableRef], ranks: int,
                 rng: random.Random, node_size: int = 0) -> Plan | None:
    """``plan`` with one table of another kind: a table of the slowest rank row-wise,
    column-wise over the least loaded ranks or data-parallel; or a table that is not
    placed whole, back on the least loaded rank."""
    if ranks < 2:
        return None
    slow, least = int(np.argmax(spans)), int(np.argmin(spans))
    by_key = {t.key: t for t in tables}
    spread = [k for k, r in plan.assignment.items() if not is_rank(r)]
    on_slow = [k for k, r in plan.assignment.items() if r == slow]
    if spread and (not on_slow or rng.random() < 0.3):
        key = rng.choice(spread)
        return _moved(plan, {key: least}, f"{key} back whole on rank {least}")
    if not on_slow:
        return None
    return rng.choice(_other_kinds(plan, spans, by_key[rng.choice(on_slow)], ranks,
                                   node_size))


def _other_kinds(plan: Plan, spans: np.ndarray, table: TableRef, ranks: int,
                 node_size: int = 0) -> list[Plan]:
    """``plan`` with ``table`` row-wise, data-parallel, column-wise over the 2, 3, ...
    least loaded ranks (as many as divide its dim), or table-row-wise over the node of
    the least loaded rank (``node_size`` ranks a node, when there are several), each
    kind it is not already."""
    order = [int(r) for r in np.argsort(spans, kind="stable")]
    shards = [n for n in range(2, ranks + 1) if table.dim % n == 0]
    options = [ROW_WISE, REPLICATED] + [ColumnWise(tuple(sorted(order[:n]))) for n in shards]
    if 1 < node_size < ranks:
        first = order[0] // node_size * node_size
        options.append(TableRowWise(tuple(range(first, first + node_size))))
    out = []
    for where in options:
        if where == plan.assignment[table.key]:
            continue
        how = (f"{table.key} column-wise over ranks {list(where.ranks)}"
               if isinstance(where, ColumnWise)
               else f"{table.key} table-row-wise over ranks {where.ranks[0]}-{where.ranks[-1]}"
               if isinstance(where, TableRowWise)
               else f"{table.key} {'row-wise' if where == ROW_WISE else 'data-parallel'}")
        out.append(_moved(plan, {table.key: where}, how))
    return out
