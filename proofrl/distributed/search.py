"""``proofrl search --ray ADDRESS``: theorems spread over search workers on a Ray cluster.

Each worker is a Ray actor (one CPU) that builds the policy once and runs :func:`proofrl.search.run.cli_search`
itself on a chunk of theorems (same recipe, budgets and final check as a local run: one code path), into a
scratch directory whose files it sends back. The driver hands out chunks as workers free up and writes the
same outputs a local run writes: ``results.jsonl`` (lines in completion order), ``trees/``, ``trace.jsonl``,
``summary.json`` and the table.

Chunks keep a header's theorems together (a worker's prover process loads each header once per chunk) and
are small enough (about two per worker) that a slow chunk does not hold the run back. A policy failure stops
the run as it does locally: chunks running finish, none start, the results so far are written, then
:class:`~proofrl.search.policy.PolicyError` is raised.

Workers are spread over the nodes (Ray's ``SPREAD``). A chunk's results are written only when its whole chunk
comes back, so a worker lost with its node (or killed) has written nothing: its chunk is handed to another
worker and named on stderr (``chunk 2/6 re-run (t_a, t_b): ...``) and in ``summary.json`` (``rerun``); a
chunk that somehow comes back twice is written once. A worker on a node without the prover says so in one
line and leaves; its chunks go to the others.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailable, ConfigError
from ..provers.base import Verdict, loaded_header
from . import connect


class SearchWorker:
    """The actor's body: a policy built once (``policy_obj`` when the caller has one, else from the spec)."""

    def __init__(self, policy: str, model: str | None, api_key: str | None, policy_obj: Any = None):
        from ..search.policy import policy_from_spec

        self.spec, self.model = policy, model
        self.policy = (
            policy_obj
            if policy_obj is not None
            else policy_from_spec(policy, model, **({"api_key": api_key} if api_key else {}))
        )

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def run(self, problems: list[Any], algorithm: str, options: dict[str, Any]) -> dict[str, Any]:
        """Search ``problems`` with :func:`cli_search`; the files it wrote, as text (or ``unavailable``: why this
        node cannot run the chunk's prover)."""
        from ..preflight import require_backend
        from ..search.policy import PolicyError
        from ..search.run import cli_search

        try:
            for backend in sorted({p.backend for p in problems}):
                require_backend(backend)
        except BackendUnavailable as e:
            return {"unavailable": str(e), "node": self.node()}
        policy_error = ""
        with tempfile.TemporaryDirectory(prefix="proofrl-search-") as tmp:
            out = Path(tmp)
            with contextlib.redirect_stdout(io.StringIO()):  # the chunk's own table: the driver prints the run's
                try:
                    cli_search(
                        problems,
                        algorithm,
                        self.spec,
                        self.model,
                        out,
                        workers=1,
                        progress=False,
                        policy_obj=self.policy,
                        **options,
                    )
                except PolicyError as e:
                    policy_error = str(e)
            read = lambda name: (out / name).read_text(encoding="utf-8") if (out / name).exists() else ""  # noqa: E731
            return {
                "results": read("results.jsonl").splitlines(),
                "trace": read("trace.jsonl").splitlines(),
                "trees": {p.name: p.read_text(encoding="utf-8") for p in sorted((out / "trees").glob("*.json"))},
                "policy_error": policy_error,
            }


def chunks(problems: list[Any], workers: int) -> list[list[Any]]:
    """Problems grouped by header (each group in input order), cut into pieces of at most ``n / (2 workers)``."""
    size = max(1, math.ceil(len(problems) / (2 * max(1, workers))))
    by_header: dict[str, list[Any]] = defaultdict(list)
    for p in problems:
        by_header[loaded_header(p.header)].append(p)  # one process serves every placement of a header
    return [group[i : i + size] for group in by_header.values() for i in range(0, len(group), size)]


def cli_search_ray(
    address: str,
    problems: Any,
    algorithm: str = "mcts",
    policy: str = "",
    model: str | None = None,
    out: str | Path = "search-out",
    *,
    workers: int = 1,
    api_key: str | None = None,
    limit: int | None = None,
    policy_obj: Any = None,
    **options: Any,
) -> dict[str, Any]:
    """:func:`proofrl.search.run.cli_search` on a Ray cluster (``address``: ``local``, ``auto`` or ``host:port``).
    ``workers``: search workers (one CPU each); left at 1, one per CPU of the cluster. ``options``: the search's
    settings, passed to each worker's :func:`~proofrl.search.run.cli_search` as they are (``recipe``, ``width``,
    ``seconds``, ``overrides``, ...). Returns the summary."""
    from ..problems import load_problems
    from ..search.engine import SearchResult
    from ..search.policy import PolicyError
    from ..search.run import _print_table, summarize_results

    ray = connect(address)
    from ray.exceptions import ActorUnschedulableError, NodeDiedError, RayActorError, RayTaskError, WorkerCrashedError

    probs = load_problems(problems, limit=limit) if isinstance(problems, (str, Path)) else list(problems)[:limit]
    if workers <= 1:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    pieces = chunks(probs, workers)
    label = lambda i: f"chunk {i + 1}/{len(pieces)} ({', '.join(p.name for p in pieces[i])})"  # noqa: E731
    options = {**options, "overrides": list(options.get("overrides", ()))}
    actor = ray.remote(SearchWorker).options(num_cpus=1, scheduling_strategy="SPREAD")
    start = lambda: actor.remote(policy, model, api_key, policy_obj)  # noqa: E731
    pool = [start() for _ in range(min(workers, len(pieces)))]

    dest = Path(out)
    (dest / "trees").mkdir(parents=True, exist_ok=True)
    (dest / "results.jsonl").write_text("")
    (dest / "trace.jsonl").write_text("")
    results: list[SearchResult] = []
    events: list[dict[str, Any]] = []
    used: set[str] = set()
    policy_errors: list[str] = []
    rerun: list[dict[str, Any]] = []
    done: set[int] = set()
    todo = list(reversed(range(len(pieces))))  # chunk indices, next one last
    running: dict[Any, tuple[Any, int]] = {}  # object ref -> (worker, chunk index)
    idle: list[Any] = list(pool)
    unable: dict[str, str] = {}  # node id -> why it cannot run the prover

    def say(line: str) -> None:
        print(f"proofrl search: {line}", file=sys.stderr, flush=True)

    def hand_out() -> None:
        while idle and todo:
            w, i = idle.pop(), todo.pop()
            running[w.run.remote(pieces[i], algorithm, options)] = (w, i)

    def lost(w: Any, i: int, why: str) -> None:
        """A worker gone with its chunk: the chunk goes back to the front of the queue."""
        pool.remove(w)
        ray.kill(w)
        todo.append(i)
        rerun.append({"chunk": i + 1, "theorems": [p.name for p in pieces[i]], "why": why})
        say(f"{label(i)} re-run: {why}")
        if not pool:  # the last worker is gone: a new one, scheduled when the cluster has a CPU for it
            pool.append(start())
            idle.append(pool[-1])

    try:
        hand_out()
        while running:
            (ref,), _ = ray.wait(list(running), num_returns=1)
            w, i = running.pop(ref)
            try:
                got = ray.get(ref)
            except RayTaskError as e:  # a worker's own error (a bad recipe: ConfigError) is raised as it is locally
                raise (e.cause if isinstance(e.cause, Exception) else e) from None
            except (RayActorError, ActorUnschedulableError, NodeDiedError, WorkerCrashedError) as e:
                lost(w, i, f"its worker was lost ({' '.join(str(e).split())[:200]})")
                hand_out()
                continue
            if "unavailable" in got:  # this node has no prover: the worker leaves, its chunk goes to another
                if got["node"] not in unable:  # said once per node (a later worker may land there too)
                    say(
                        f"node {got['node'][:12]} cannot run the prover ({got['unavailable']}); its chunks go to "
                        "other nodes"
                    )
                unable[got["node"]] = got["unavailable"]
                pool.remove(w)
                ray.kill(w)
                todo.append(i)
                if not pool:
                    raise ConfigError(f"no search worker can run the prover: {got['unavailable']}")
                hand_out()
                continue
            if i not in done:  # a chunk written twice would duplicate its theorems' lines
                done.add(i)
                _write(dest, got, used, results, events, SearchResult)
            if got["policy_error"]:
                policy_errors.append(got["policy_error"])
                todo.clear()
            idle.append(w)
            hand_out()
    finally:
        for w in pool:
            ray.kill(w)
    summary = summarize_results(results, events)
    summary["rerun"] = rerun
    (dest / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    if policy_errors:
        raise PolicyError(
            f"the policy failed; {len(results)} of {len(probs)} theorems have results in "
            f"{dest / 'results.jsonl'}: {policy_errors[0]}"
        )
    _print_table(results, summary)
    return summary


def _write(
    dest: Path, got: dict[str, Any], used: set[str], results: list[Any], events: list[dict[str, Any]], result_type: Any
) -> None:
    """Append one chunk's files to the run's; a tree file name another chunk already took gets a suffix."""
    renamed: dict[str, str] = {}
    for name, text in got["trees"].items():
        stem, final, n = name.removesuffix(".json"), name, 1
        while final.lower() in used:
            n += 1
            final = f"{stem}-r{n}.json"
        used.add(final.lower())
        renamed[name] = final
        (dest / "trees" / final).write_text(text, encoding="utf-8")
    with open(dest / "results.jsonl", "a", encoding="utf-8") as f:
        for raw in got["results"]:
            line = json.loads(raw)
            if isinstance(line.get("tree"), str) and (old := line["tree"].removeprefix("trees/")) in renamed:
                line["tree"] = f"trees/{renamed[old]}"
            f.write(json.dumps(line, default=str) + "\n")
            results.append(
                result_type(
                    line["name"],
                    line["status"],
                    proof=line.get("proof", ""),
                    verdict=Verdict.from_json(line["verdict"]) if line.get("verdict") else None,
                    reason=line.get("reason", ""),
                    expansions=line.get("expansions", 0),
                    steps=line.get("steps", 0),
                    iterations=line.get("iterations", 0),
                    seconds=line.get("seconds", 0.0),
                    algorithm=line.get("algorithm", ""),
                )
            )
    with open(dest / "trace.jsonl", "a", encoding="utf-8") as f:
        for raw in got["trace"]:
            f.write(raw + "\n")
            events.append(json.loads(raw))
