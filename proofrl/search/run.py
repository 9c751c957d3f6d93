"""Many theorems at once: ``search_many`` (the library entry) and ``cli_search`` (what ``proofrl search`` calls).

Output directory::

    results.jsonl     one line per theorem: name, status (proved | failed | unsound | error), proof, verdict,
                      expansions, seconds (and steps, nodes, reason)
    trees/NAME.json   the whole tree of each search (see docs/search.md, "Export and profiling")
    trace.jsonl       wall-clock spans of every search (policy, value, tactic, final_check, select, backup, search)
    summary.json      counts by status and where the time went
    memory/           with an online proof memory (``knn-online:DIR``): the memory at the end of the run

Searches run ``workers`` at a time, each on a prover process leased from one pool (header affinity, crash
replacement). A policy that fails ends its theorem with ``error`` and stops the run: the theorems already
finished and the failing one are written, then :class:`~proofrl.search.policy.PolicyError` is raised.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ProverError, StatementError
from ..policy.tactic import sampling_stream
from ..provers.base import Prover, Theorem
from ..provers.pool import PoolConfig, ProverPool
from .best_first import BestFirstSearch
from .config import DEFAULT_RECIPE, SearchConfig, load_search_config
from .engine import Search, SearchResult
from .mcts import MCTS
from .policy import PolicyError, TacticPolicy, ValueFn, policy_from_spec, value_from_spec
from .trace import Tracer, summarize

ENGINES: dict[str, type[Search]] = {"mcts": MCTS, "best-first": BestFirstSearch}


def make_search(
    prover: Prover,
    policy: TacticPolicy,
    config: SearchConfig,
    tracer: Tracer | None = None,
    value_fn: ValueFn | None = None,
) -> Search:
    return ENGINES[config.algorithm](prover, policy, config, tracer, value_fn)


def search_one(
    theorem: Theorem,
    prover: Prover,
    policy: TacticPolicy,
    config: SearchConfig | None = None,
    tracer: Tracer | None = None,
    value_fn: ValueFn | None = None,
) -> SearchResult:
    """One theorem on one prover process."""
    config = config or SearchConfig()
    return make_search(prover, policy, config, tracer, value_fn).run(theorem)


def _theorems(problems: str | Path | Iterable[Any]) -> list[Theorem]:
    if isinstance(problems, (str, Path)):
        from ..problems import load_problems

        return [p.theorem for p in load_problems(problems)]
    out = []
    items: Iterable[Any] = problems  # Theorems, Problems or miniF2F-style records
    for p in items:
        if isinstance(p, Theorem):
            out.append(p)
        elif hasattr(p, "theorem"):
            out.append(p.theorem)
        else:
            out.append(Theorem.from_json(p))
    return out


def safe_name(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)[:150] or "theorem"


def tree_files(names: Sequence[str]) -> list[str]:
    """``trees/…json`` file names, one per theorem in input order, all different: a name that repeats (or
    that :func:`safe_name` folds onto another, case aside) gets ``-2``, ``-3``, … after its first use."""
    used: set[str] = set()
    out = []
    for name in names:
        base = safe_name(name)
        stem, n = base, 1
        while stem.lower() in used:
            n += 1
            stem = f"{base}-{n}"
        used.add(stem.lower())
        out.append(f"{stem}.json")
    return out


class LockedPolicy:
    """Serialises calls into a policy or value function that is not thread-safe (a local HF model) when
    workers > 1."""

    def __init__(self, inner: Any, lock: threading.Lock):
        self._inner, self._lock = inner, lock
        self.name = getattr(inner, "name", type(inner).__name__)

    def propose(self, state_text: str, k: int):
        with self._lock:
            return self._inner.propose(state_text, k)

    def value(self, state_text: str) -> float:
        with self._lock:
            return self._inner.value(state_text)

    def record_proof(self, theorem: str, steps: Sequence[tuple[str, str]]) -> None:
        if hasattr(self._inner, "record_proof"):
            with self._lock:
                self._inner.record_proof(theorem, steps)


def search_many(
    problems: str | Path | Iterable[Any],
    policy: TacticPolicy,
    algorithm: str | None = None,
    budgets: dict[str, Any] | None = None,
    out_dir: str | Path = "search-out",
    workers: int = 1,
    *,
    config: SearchConfig | None = None,
    pool: ProverPool | None = None,
    progress: bool = True,
    backend_options: dict[str, Any] | None = None,
    value_fn: ValueFn | None = None,
    memory_out: str | Path | None = None,
) -> list[SearchResult]:
    """Search every problem; write ``results.jsonl``, ``trees/``, ``trace.jsonl`` and ``summary.json`` under
    ``out_dir``. ``algorithm`` (``mcts`` / ``best-first`` or a recipe name such as ``reap``) and ``budgets``
    (config keys: ``{"max_steps": 16}``) adjust ``config``.

    A policy with a ``header`` (the automation menu's libraries) has it added to every theorem's header; a policy
    with ``record_proof`` (an online proof memory) gets each proof's steps as soon as it is found (span
    ``memory`` in the trace), so the theorems searched after it can reuse them. At the end an online memory is
    saved, the pairs it was loaded with and the run's own, into ``memory_out`` (default ``out_dir/memory``;
    ``summary.json`` says what in ``memory``). The default never replaces the folder the memory was loaded from:
    that is refused before any search, and only a ``memory_out`` naming that folder updates it."""
    config = _settings(config, algorithm, budgets)
    theorems = _with_header(_theorems(problems), str(getattr(policy, "header", "") or ""))
    out = Path(out_dir)
    memories, memory_dir = _memory_target(policy, out, memory_out)
    (out / "trees").mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    results_path.write_text("")
    (out / "trace.jsonl").write_text("")
    tracer = Tracer(out / "trace.jsonl")
    own_pool = pool is None
    if pool is None:
        pool = _search_pool(config, workers, backend_options)
    shared_policy: Any = policy
    if workers > 1 and not getattr(policy, "thread_safe", False):
        lock = threading.Lock()
        shared_policy = LockedPolicy(policy, lock)
        value_fn = LockedPolicy(value_fn, lock) if value_fn is not None else None
    write_lock = threading.Lock()
    stop = threading.Event()
    results: list[SearchResult | None] = [None] * len(theorems)
    files = tree_files([th.name for th in theorems])  # two theorems of one name never share a tree file
    policy_errors: list[str] = []
    learns = hasattr(policy, "record_proof")  # (the lock wrapper always has the method)

    def one(i: int) -> SearchResult | None:
        if stop.is_set():
            return None
        th = theorems[i]
        results[i] = r = _search_leased(th, pool, shared_policy, config, tracer, value_fn)
        if r.status == "proved" and learns:
            with tracer.child(th.name).span("memory") as info:
                steps = [(state, tactic) for state, tactic, _ in r.proof_steps()]
                info["steps"] = len(steps)
                try:
                    shared_policy.record_proof(th.name, steps)
                except Exception as e:  # a memory that fails to learn never sinks the run
                    info["error"] = f"{type(e).__name__}: {e}"[:300]
        if r.policy_error:
            policy_errors.append(f"{th.name}: {r.policy_error}")
            stop.set()
        tree = r.tree_json()
        with write_lock:
            with open(results_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(r.line() | {"tree": f"trees/{files[i]}"}, default=str) + "\n")
            (out / "trees" / files[i]).write_text(json.dumps(tree, default=str))
        return r

    try:
        _run_all(one, len(theorems), workers, progress, results)
    finally:
        tracer.close()
        if own_pool:
            pool.close()
    done = [r for r in results if r is not None]
    summary = summarize_results(done, tracer.events)
    for memory in memories:
        try:
            summary["memory"] = memory.save_memory(memory_dir)
        except OSError as e:  # the results stand; the summary (and the table) say the memory was not saved
            summary["memory"] = {"folder": str(memory_dir), "error": f"{type(e).__name__}: {e}"[:300]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    if policy_errors:
        raise PolicyError(
            f"the policy failed; {len(done)} of {len(theorems)} theorems have results in {results_path}: "
            f"{policy_errors[0]}"
        )
    return done


def _memory_target(policy: Any, out: Path, memory_out: str | Path | None) -> tuple[list[Any], Path]:
    """The online proof memories among ``policy`` and its sources (at most one), and the folder the run saves
    them into; a default folder that is the one a memory was loaded from is refused (:func:`search_many`)."""
    sources = [policy, *getattr(policy, "sources", ())]
    memories = [s for s in sources if getattr(s, "online", False) and hasattr(s, "save_memory")]
    target = Path(memory_out) if memory_out is not None else out / "memory"
    if len(memories) > 1:
        raise ConfigError(f"a search saves one online proof memory, this policy has {len(memories)}")
    if memory_out is not None and not memories:
        raise ConfigError(f"nothing to save into {target}: the policy has no online proof memory (knn-online:DIR)")
    loaded = memories[0].folder if memories else None
    if memory_out is None and loaded is not None and loaded.resolve() == target.resolve():
        raise ConfigError(
            f"this run would save its online memory over the one it loaded ({loaded}); search into another folder, "
            f"or name that folder as where to save the memory (--save-memory {loaded}) to update it"
        )
    return memories, target


def _with_header(theorems: list[Theorem], extra: str) -> list[Theorem]:
    """``extra`` after each theorem's header (once: a header that holds it already is left as it is)."""
    if not extra:
        return theorems
    return [th if extra in th.header else replace(th, header=th.header.rstrip("\n") + "\n" + extra) for th in theorems]


def _settings(config: SearchConfig | None, algorithm: str | None, budgets: dict[str, Any] | None) -> SearchConfig:
    """``config``, else the recipe named by ``algorithm`` (``mcts``: reap's, ``best-first``: ReProver's, or a
    recipe name); ``budgets`` (config keys) on top."""
    if config is None:
        config = load_search_config(DEFAULT_RECIPE.get(algorithm or "mcts", algorithm))
    return config.with_overrides(**budgets) if budgets else config


def _search_pool(config: SearchConfig, workers: int, backend_options: dict[str, Any] | None) -> ProverPool:
    """The pool a search builds for itself: ``workers`` processes of the config's backend, with the options the
    backend takes from the search's settings (Coq: the per-tactic time limit) and ``backend_options``."""
    from ..provers.backend import get_backend
    from ..provers.factory import make_pool

    opts = get_backend(config.backend).search_options(config.tactic_timeout)
    return make_pool(config.backend, pool=PoolConfig(workers=max(1, workers)), **(opts | (backend_options or {})))


def _search_leased(
    th: Theorem, pool: ProverPool, policy: TacticPolicy, config: SearchConfig, tracer: Tracer, value_fn: ValueFn | None
) -> SearchResult:
    """One theorem on a process leased for its header; a header that does not load, a prover failure or a bug
    is this theorem's ``error`` result, never the run's end."""
    t0 = time.monotonic()
    try:
        # the theorem's own sampling stream: its samples do not depend on which worker asked first
        with pool.lease(th.header) as prover, sampling_stream(f"{th.name}\x00{th.header}\x00{th.statement}"):
            r = search_one(th, prover, policy, config, tracer.child(th.name), value_fn)
    except StatementError as e:  # the header does not load
        r = SearchResult(th.name, "error", reason=f"header failed to load: {e}", algorithm=config.algorithm)
    except ProverError as e:
        r = SearchResult(th.name, "error", reason=f"prover failed: {e}", algorithm=config.algorithm)
    except Exception as e:  # one theorem never sinks the run
        r = SearchResult(
            th.name, "error", reason=f"internal error: {type(e).__name__}: {e}", algorithm=config.algorithm
        )
    r.seconds = r.seconds or time.monotonic() - t0
    return r


def _run_all(one: Any, n: int, workers: int, progress: bool, results: list[SearchResult | None]) -> None:
    counts: Counter = Counter()
    if not progress:
        with ThreadPoolExecutor(max(1, workers)) as ex:
            list(ex.map(one, range(n)))
        return
    from ..progress import progress_bar

    with progress_bar("search", detail="{task.description}", transient=False) as bar:
        task = bar.add_task("", total=n)

        def tracked(i: int) -> None:
            r = one(i)
            if r is not None:
                counts[r.status] += 1
            bar.update(task, advance=1, description=" ".join(f"{k} {v}" for k, v in sorted(counts.items())))

        with ThreadPoolExecutor(max(1, workers)) as ex:
            list(ex.map(tracked, range(n)))


def summarize_results(results: Sequence[SearchResult], events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by = Counter(r.status for r in results)
    return {
        "theorems": len(results),
        "status": dict(by),
        "proved": by.get("proved", 0),
        "expansions": sum(r.expansions for r in results),
        "steps": sum(r.steps for r in results),
        "seconds": sum(r.seconds for r in results),
        "time": summarize(events),
    }


def cli_search(
    problems: str | Path | Sequence[Any],
    algorithm: str = "mcts",
    policy: str = "",
    model: str | None = None,
    out: str | Path = "search-out",
    *,
    recipe: str | None = None,
    workers: int = 1,
    max_steps: int | None = None,
    max_nodes: int | None = None,
    expansions: int | None = None,
    width: int | None = None,
    seconds: float | None = None,
    tactic_timeout: float | None = None,
    limit: int | None = None,
    progress: bool = True,
    value: str | None = None,
    policy_obj: TacticPolicy | None = None,
    save_memory: str | Path | None = None,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """``proofrl search PROBLEMS --algorithm mcts|best-first --policy hf:DIR|openai:URL [--model NAME] --out DIR``.

    ``recipe`` (``reap``, ``bfs-prover``, ``reprover`` or a YAML path) gives the defaults; ``algorithm`` picks
    the engine (a recipe name is accepted there too); the budget flags override the recipe's;
    ``value`` (``none``, ``endpoint:URL``) is the value function of MCTS leaves; ``save_memory`` is where an
    online proof memory is saved at the end (default ``out/memory``: :func:`search_many`); ``overrides``
    (``--set max_steps=8``, any key of :class:`~proofrl.search.config.SearchConfig`) come last.
    Prints a summary table and returns the summary (``summary.json``)."""
    cfg = load_search_config(recipe or DEFAULT_RECIPE.get(algorithm, algorithm))
    if algorithm in ("mcts", "best-first"):
        cfg = cfg.with_overrides(algorithm=algorithm)
    given = {  # --expansions is best-first's name for max_steps, --max-steps MCTS's: the chosen engine's applies
        "max_steps": expansions if cfg.algorithm == "best-first" else max_steps,
        "max_nodes": max_nodes,
        "width": width,
        "seconds": seconds,
        "tactic_timeout": tactic_timeout,
    }
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if changes:
        cfg = cfg.with_overrides(**changes)
    cfg = cfg.with_set(list(overrides))
    pol = policy_obj if policy_obj is not None else policy_from_spec(policy, model)
    probs: Any = problems
    if limit is not None:
        from ..problems import load_problems

        probs = load_problems(problems, limit=limit) if isinstance(problems, (str, Path)) else list(problems)[:limit]
    results = search_many(
        probs,
        pol,
        out_dir=out,
        workers=workers,
        config=cfg,
        progress=progress,
        value_fn=value_from_spec(value),
        memory_out=save_memory,
    )
    summary = json.loads((Path(out) / "summary.json").read_text())
    _print_table(results, summary)
    return summary


def _print_table(results: Sequence[SearchResult], summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="proof search")
    for col in ("status", "theorems", "expansions", "seconds"):
        t.add_column(col)
    for status in ("proved", "unsound", "failed", "error"):
        rs = [r for r in results if r.status == status]
        t.add_row(status, str(len(rs)), str(sum(r.expansions for r in rs)), f"{sum(r.seconds for r in rs):.1f}")
    Console().print(t)
    tm = summary["time"]
    Console().print(
        f"time: prover {tm['prover_seconds']:.1f}s, model {tm['model_seconds']:.1f}s, "
        f"outside both {tm['outside_seconds']:.2f}s ({100 * tm['outside_share']:.1f}% of search time)"
    )
    if mem := summary.get("memory"):
        if "error" in mem:
            Console().print(f"proof memory NOT saved in {mem['folder']}: {mem['error']}")
        else:
            Console().print(f"proof memory: {mem['pairs']} pairs ({mem['learned']} learned) saved in {mem['folder']}")
