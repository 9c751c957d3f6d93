"""The library-learning prover's claims: a memory learned online against the same memory frozen (Tactician's
k-NN, as Graph2Tac measured it), and retrieval in the tactic model's prompt against none (Rango).

Both are measured on the anchors' protocol (:mod:`proofrl.eval.library`): standard-library files proved in file
order, each lemma allowed only what precedes it, the memory holding the human proofs of what the file loads.
The lemmas are a fixed pool for every seed (the bench pairs arms theorem by theorem across seeds):

* **online memory**: :data:`POOL_SEED`'s shuffle of every core module (both sides of the module split: the k-NN
  rows learn nothing from it), whole files in that order until ``size`` lemmas; arms rows (e) and (f).
  The k-NN source samples nothing, so a seed repeats the same searches: the seeds measure how far the
  wall-clock budgets move a verdict.
* **MCTS against best-first with the memory** (reap's claim, with the strongest policy the project has): row (j)'s
  sources (online k-NN memory, automation, premises, CoqHammer's ``sauto`` at every node; no model, so nothing is
  taught on either side of the split) searched by reap's AND-OR MCTS and by best-first at the same wall budget, on
  the online-memory claim's pool. Without CoqHammer the smoke size (the wiring only) takes row (h).
* **MCTS against best-first beyond the core modules**: the same two arms on every other module of the standard
  library (Reals, Numbers, FSets, …: lemmas the core-pool claim never searched), shuffled with :data:`POOL_SEED`,
  the memory and premises read from the whole library.
* **retrieval in the prompt**: the held-out side's files only (the models were taught on the training side),
  same order rule; arms row (i) with the tiny model taught on states alone, and row (i) with the same model
  taught with each state's retrieved tactics and premises in its prompt; the model samples under the seed.
* **retrieval in the prompt, the model alone** (Rango's ablation as it was run: the same model with and without
  retrieval, nothing else proposing): the same pool and models in row (k), where the model is the search's only
  source, so the k-NN and premise proposals of row (i) cannot stand in for what the prompt brings.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from .claim import Claim, ClaimRun, Results

POOL_SEED = 0
"""the shuffle of the modules that fixes the pool (not the bench seed: every seed sees the same lemmas)"""
BUDGET: dict[str, Any] = {"seconds": 5.0, "width": 4}
"""the README's file-protocol budget: 5 s of wall time a lemma, 4 tactics a source per node"""
SMOKE_BUDGET: dict[str, Any] = {"seconds": 2.0, "width": 2}
BEYOND_CORE: dict[str, Any] = {
    **BUDGET,
    "pool": "every module outside the core ones, shuffled with seed 0",
    "memory": "the whole library's human proofs",
}
"""the settings the claims beyond the core modules record, beside their rows"""


def file_pool(size: int, side: str, *, smoke: bool = False, library: str = "core") -> list[Any]:
    """The first ``size`` lemmas, file by file, of the modules of ``library`` on ``side`` (``all``: both) shuffled
    with :data:`POOL_SEED`, each lemma with its place in its file
    (:func:`~proofrl.eval.library.modules_in_file_order`). ``library``: ``core`` (the core modules) or ``rest``
    (every other module of the standard library, read as the whole library is). At the smoke size (the wiring
    only), the modules the smoke assets step (``Coq.Bool.``), whatever their side and library."""
    from ..data.coq_stdlib import CORE_PREFIXES, STDLIB_ALL
    from ..eval.library import modules_in_file_order

    if library not in ("core", "rest"):
        raise ValueError(f"library is core or rest, not {library!r}")
    if smoke:
        by_module = modules_in_file_order(lambda p: p.module.startswith("Coq.Bool."))
    elif library == "core":
        by_module = modules_in_file_order(lambda p: side in ("all", p.split))
    else:
        by_module = modules_in_file_order(
            lambda p: side in ("all", p.split) and not p.module.startswith(CORE_PREFIXES), STDLIB_ALL
        )
    modules = list(by_module)
    random.Random(POOL_SEED).shuffle(modules)
    out: list[Any] = []
    for m in modules:
        out += by_module[m]
        if len(out) >= size:
            break
    return out[:size]


def _transitions(run: ClaimRun, library: str = "core") -> list[dict[str, Any]]:
    """The memory's (state → tactic) pairs: the human proofs of the core modules (``library="rest"``: of the whole
    library) stepped once beside the bench's tactic assets (:func:`~proofrl.eval.library.library_transitions`); at
    the smoke size, the smoke assets' own steps."""
    from ..data.coq_stdlib import STDLIB_ALL
    from ..data.tactics import read_transitions
    from ..eval.library import library_transitions

    if run.smoke:
        return [*read_transitions(run.assets.train_transitions), *read_transitions(run.assets.held_out_transitions)]
    prefixes = STDLIB_ALL if library == "rest" else None
    return library_transitions(run.assets.folder.parent, progress=run.console is not None, prefixes=prefixes)


def _rows(
    run: ClaimRun, problems: list[Any], rows: tuple[str, ...], out: Path, library: str = "core", **more: Any
) -> dict[str, Any]:
    """The file-order rows on ``problems`` into ``out`` (kept: a finished arm is read back, not searched again);
    each row's ``{lemma: proved 0/1}`` by row letter."""
    from ..eval.library import run_file_rows
    from ..eval.provers import RowsConfig, check_settings

    done = out / "arms.json"
    if done.is_file():
        return json.loads(done.read_text())
    budget = SMOKE_BUDGET if run.smoke else BUDGET
    s = RowsConfig(rows=rows, workers=run.workers, seed=run.seed, **budget, **more)
    check_settings(s)  # e.g. row j without CoqHammer: one line naming the set-up, before anything runs
    # each row's count, and a kept row or module taken or run again (with the parts of its key that differ)
    ran = run_file_rows(problems, s, out, _transitions(run, library), progress=False, say=run.say)
    arms = {row.name[1]: {r["name"]: float(r["proved"]) for r in row.results} for row in ran}
    done.write_text(json.dumps(arms))
    return arms


def online_memory(run: ClaimRun) -> Results:
    """Rows (e) and (f) on :func:`file_pool`'s lemmas of both sides."""
    arms = _rows(run, file_pool(run.size, "all", smoke=run.smoke), ("e", "f"), run.out)
    return {"offline memory": arms["e"], "online memory": arms["f"]}


def mcts_vs_best_first(run: ClaimRun, library: str = "core") -> Results:
    """Row (j) searched by best-first and by MCTS (``memory_engine``) on :func:`file_pool`'s lemmas of both sides
    of ``library``, every other setting the same."""
    from ..eval.provers import hammer_installed

    row = "j" if not run.smoke or hammer_installed() else "h"
    problems = file_pool(run.size, "all", smoke=run.smoke, library=library)
    return {
        engine: _rows(run, problems, (row,), run.out / engine, library, memory_engine=engine)[row]
        for engine in ("best-first", "mcts")
    }


def mcts_vs_best_first_beyond_core(run: ClaimRun) -> Results:
    """:func:`mcts_vs_best_first` on the modules outside the core ones, the memory of the whole library."""
    return mcts_vs_best_first(run, "rest")


def context_models(run: ClaimRun) -> dict[str, str]:
    """Row (i)'s two tiny models, taught once beside the bench's assets on the training side's pairs: without and
    with retrieved context (:func:`~proofrl.eval.library.library_model`; the smoke assets' pairs and model shape
    at the smoke size)."""
    from ..data.assets import SMOKE_ASSETS, AssetsConfig
    from ..eval.library import library_model

    root = run.assets.folder.parent
    settings = AssetsConfig(**SMOKE_ASSETS) if run.smoke else None
    train = run.assets.train_transitions if run.smoke else None
    return {
        kind: str(library_model(root, retrieval=kind == "with", settings=settings, train=train))
        for kind in ("without", "with")
    }


def _without_and_with_context(run: ClaimRun, row: str, library: str = "core") -> dict[str, dict[str, float]]:
    """``row`` twice with the model taught ``without`` and ``with`` retrieved context (:func:`context_models`),
    each in its own folder, on lemmas no model was taught on: the core modules' held-out side, or (``library`` =
    ``rest``) every module outside the core ones, both sides (the models were taught on the core modules only)."""
    problems = file_pool(run.size, "held-out" if library == "core" else "all", smoke=run.smoke, library=library)
    models = context_models(run)
    return {
        kind: _rows(run, problems, (row,), run.out / kind, library, context_model=models[kind])[row]
        for kind in ("without", "with")
    }


def retrieval_in_prompt(run: ClaimRun) -> Results:
    """Row (i) with the model taught without and with retrieved context; the rest of the search (k-NN,
    automation, premises) the same."""
    arms = _without_and_with_context(run, "i")
    return {"no retrieval in the prompt": arms["without"], "retrieval in the prompt": arms["with"]}


def retrieval_model_alone(run: ClaimRun, library: str = "core") -> Results:
    """Row (k): the model taught without and with retrieved context, each the search's only source."""
    arms = _without_and_with_context(run, "k", library)
    return {"model alone": arms["without"], "model alone, retrieval in the prompt": arms["with"]}


def retrieval_model_alone_beyond_core(run: ClaimRun) -> Results:
    """:func:`retrieval_model_alone` on the modules outside the core ones, the memory of the whole library."""
    return retrieval_model_alone(run, "rest")


CLAIMS: list[Claim] = [
    Claim(
        "tactician-online-memory",
        "Tactician",
        "A k-NN tactic memory that learns online, from every proof as the library is read, proves more than the "
        "same memory frozen offline.",
        "Graph2Tac (ICML 2024) measures Tactician's online k-NN proving 1.72× what the same k-NN frozen offline "
        "proves on held-out packages; Tactician proves 39.3 % of the stdlib in file order (Blaauwbroek et al. 2020).",
        "proved (0/1) per stdlib lemma in file order, only what precedes it, final check in a fresh coqc",
        "offline memory",
        "online memory",
        run=online_memory,
        size=1337,
        smoke_size=2,
        unit="lemmas",
        settings={**BUDGET, "pool": "every core module, shuffled with seed 0", "rows": "e, f"},
    ),
    Claim(
        "reap-mcts-vs-best-first-memory",
        "reap",
        "AND-OR MCTS proves more theorems than best-first search at equal budget.",
        "The reap blog reports 77.5 % on miniF2F-test at pass@32 with its MCTS and gives no best-first comparison "
        "at equal budget. Here both engines search with the library-learning prover's sources (row j): with the "
        "tiny tactic model (reap-mcts-vs-best-first) both arms proved the same few theorems.",
        "proved (0/1) per stdlib lemma in file order by row (j), only what precedes it, final check in a fresh coqc",
        "best-first",
        "mcts",
        run=mcts_vs_best_first,
        size=1337,
        smoke_size=2,
        unit="lemmas",
        settings={**BUDGET, "pool": "every core module, shuffled with seed 0", "rows": "j (best-first / MCTS)"},
    ),
    Claim(
        "reap-mcts-vs-best-first-beyond-core",
        "reap",
        "AND-OR MCTS proves more theorems than best-first search at equal budget.",
        "As reap-mcts-vs-best-first-memory (row j under both engines), on the standard library's other modules "
        "(Reals, Numbers, FSets, …): the core modules hold 1,337 lemmas, fewer than that claim's analysis asks.",
        "proved (0/1) per stdlib lemma in file order by row (j), only what precedes it, final check in a fresh coqc",
        "best-first",
        "mcts",
        run=mcts_vs_best_first_beyond_core,
        size=3390,
        smoke_size=2,
        unit="lemmas",
        settings={**BEYOND_CORE, "rows": "j (best-first / MCTS)"},
    ),
    Claim(
        "rango-retrieval-in-prompt",
        "Rango",
        "A tactic model that reads the retrieved proofs and lemmas in its prompt proves more than the same model "
        "without them.",
        "Rango (ICSE 2025): proof retrieval alone +47 % relative on CoqStoq, with a 1.3B model; BM25 retrieval.",
        "proved (0/1) per held-out stdlib lemma in file order by row (i), final check in a fresh coqc",
        "no retrieval in the prompt",
        "retrieval in the prompt",
        run=retrieval_in_prompt,
        size=292,
        smoke_size=2,
        unit="lemmas",
        settings={**BUDGET, "pool": "the held-out modules, shuffled with seed 0", "rows": "i (model without / with)"},
    ),
    Claim(
        "rango-retrieval-model-alone",
        "Rango",
        "A tactic model that reads the retrieved proofs and lemmas in its prompt proves more than the same model "
        "without them, each the search's only source.",
        "Rango (ICSE 2025): proof retrieval alone +47 % relative on CoqStoq, with a 1.3B model; BM25 retrieval. "
        "Rango's ablation runs the model with and without retrieval and nothing else; here row (k) does the same, "
        "where row (i) (rango-retrieval-in-prompt) adds the k-NN, automation and premise proposals to both arms.",
        "proved (0/1) per held-out stdlib lemma in file order by row (k), final check in a fresh coqc",
        "model alone",
        "model alone, retrieval in the prompt",
        run=retrieval_model_alone,
        size=292,
        smoke_size=2,
        unit="lemmas",
        settings={**BUDGET, "pool": "the held-out modules, shuffled with seed 0", "rows": "k (model without / with)"},
    ),
    Claim(
        "rango-retrieval-model-alone-beyond-core",
        "Rango",
        "A tactic model that reads the retrieved proofs and lemmas in its prompt proves more than the same model "
        "without them, each the search's only source.",
        "As rango-retrieval-model-alone (row k, the same two models), on the standard library's modules outside the "
        "core ones, which neither model was taught on: the core modules' held-out side holds 292 lemmas, fewer "
        "than that claim's analysis asks.",
        "proved (0/1) per stdlib lemma outside the core modules in file order by row (k), final check in a fresh coqc",
        "model alone",
        "model alone, retrieval in the prompt",
        run=retrieval_model_alone_beyond_core,
        size=3390,
        smoke_size=2,
        unit="lemmas",
        settings={**BEYOND_CORE, "rows": "k (model without / with)"},
    ),
]
