"""The anchors' protocol: a library proved in file order, each lemma allowed only what precedes it.

CoqHammer (40.8 % of the standard library) and Tactician (39.3 %; its online k-NN 1.72× the same k-NN frozen,
as Graph2Tac measured) are measured on a library read as it was written: for each lemma, in file order, the
prover may use the libraries the file loads and the lemmas before it, and its memory holds the human proofs
of everything before it. ``proofrl eval search coq-stdlib-files:N`` runs that protocol on ``N`` files of the
standard library drawn with ``--seed`` from the held-out side of the module split (so the tiny model and the
demo's assets never saw them), every lemma of each file in order:

* **What a lemma may use.** Its header loads its compiled module (the file's ``Require``\\ s with it) and its
  placement comment keeps the proof to what precedes it in the module (the judge's fifth wall). Nothing else is
  loaded: automation is offered only where the file imports it (:func:`available_tactics`), as it would be at
  that point of the file. Rows (b) add CoqHammer's modules, as CoqHammer's own evaluation loads its plugin.
* **The memory** (:mod:`proofrl.policy.memory`) holds the (state → tactic) pairs of the human proofs of the
  modules the file loads (:func:`loaded_libraries`; the pairs come from stepping every human proof of
  :data:`~proofrl.data.coq_stdlib.CORE_PREFIXES` once, :func:`library_transitions`). **Offline** (row e) it stays
  so for the whole file. **Online** (rows f, g) each lemma's own human proof goes in once the lemma has been
  tried, as Tactician reads a library, and so does every proof the run finds.
* **Rows**, every lemma with the same wall budget, every proof rechecked by a fresh ``coqc``:
  (a) the automation available at the lemma, one shot (``intros; solve [timeout t T1 | …]``);
  (b) ``sauto`` and ``hammer`` (CoqHammer);
  (e) best-first search with k-NN proposals, offline memory;
  (f) the same, online memory;
  (g) (f) with the automation of (a) proposed at every node (the sources' shares of its proofs reported);
  (h) (g) with premise retrieval (:mod:`proofrl.policy.premises`): the lemmas of the libraries the file loads and
  of the file before the lemma, by statement, applied and rewritten with;
  (i) (h) with the tactic model that reads the retrieved context (:mod:`proofrl.policy.retrieval`): the tactics
  of the module's memory and the premises of (h), in its prompt. The model (:func:`library_model`) is taught
  once on the training side of the module split, so it never saw a held-out file's proofs;
  (j) (h) with CoqHammer's ``sauto`` at every node (its plugin loaded as for (b); no ATP is called): the
  reconstruction tactic of (b) composed with the memory's steps;
  (k) the tactic model of (i) alone: the online memory and the premises only in its prompt, never proposed as
  they are (what the model adds by itself, and with a model taught on states alone, what the context is worth).
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..problems import Problem
from .row_store import KeptModule, ModuleStore, pace_words, sittings

FILES_SPEC = "coq-stdlib-files"
FILE_ROWS = ("a", "b", "e", "f", "g", "h", "i", "j", "k")
INIT_TACTICS = ("auto", "easy", "tauto", "intuition")
"""automation every Coq file has (``Coq.Init``)"""
ORDER = "file_order"
"""``extra`` key of a file-order problem: its place among its module's theorems"""


def is_files_spec(spec: str) -> bool:
    return spec == FILES_SPEC or spec.startswith(FILES_SPEC + ":")


SIDES = ("held-out", "train", "all")
"""which modules of the module split ``coq-stdlib-files:N:SIDE`` draws from (``held-out`` by default)"""


def files_spec(spec: str) -> tuple[int, str]:
    """``coq-stdlib-files:N[:SIDE]`` -> ``(N, SIDE)`` (10 and ``held-out`` by default); a bad one is one line."""
    _, _, rest = spec.partition(":")
    count, _, side = rest.partition(":")
    try:
        n = int(count) if count else 10
    except ValueError:
        raise ConfigError(f"{spec!r}: give {FILES_SPEC}:N, N files to draw (e.g. {FILES_SPEC}:10)") from None
    if n < 1:
        raise ConfigError(f"{spec!r}: draw at least one file")
    side = side or SIDES[0]
    if side not in SIDES:
        raise ConfigError(
            f"{spec!r}: unknown side {side!r}; give {FILES_SPEC}:N:SIDE with SIDE one of {', '.join(SIDES)}"
        )
    return n, side


def modules_in_file_order(
    keep: Callable[[Problem], bool], prefixes: Sequence[str] | None = None
) -> dict[str, list[Problem]]:
    """The theorems of the modules under ``prefixes`` (default :data:`~proofrl.data.coq_stdlib.CORE_PREFIXES`) that
    ``keep`` accepts, by module (sorted), each module's in file order with its place among them (``extra[ORDER]``)."""
    from ..data.coq_stdlib import CORE_PREFIXES
    from ..data.splits import coq_stdlib_problems

    by_module: dict[str, list[Problem]] = defaultdict(list)
    for p in coq_stdlib_problems(prefixes=prefixes or CORE_PREFIXES):
        if keep(p):
            by_module[p.module].append(p)
    out = {}
    for m in sorted(by_module):
        ordered = sorted(by_module[m], key=lambda p: int(p.extra.get("line", 0)))
        out[m] = [replace(p, extra={**p.extra, ORDER: i}) for i, p in enumerate(ordered)]
    return out


def file_problems(spec: str, *, seed: int = 0) -> tuple[list[Problem], str]:
    """``coq-stdlib-files:N[:SIDE]``: ``N`` modules (default 10) drawn with ``seed`` among the modules of
    :data:`~proofrl.data.coq_stdlib.CORE_PREFIXES` on ``SIDE`` of the module split (:data:`SIDES`; ``held-out``
    by default, the only side no model here was taught on), every theorem of each in file order
    (:func:`modules_in_file_order`). Returns the problems (module by module) and a label."""
    n, side = files_spec(spec)
    by_module = modules_in_file_order(lambda p: side in ("all", p.split))
    modules = sorted(random.Random(seed).sample(list(by_module), min(n, len(by_module))))
    shown = "" if side == SIDES[0] else f" {side}"
    return [p for m in modules for p in by_module[m]], f"{FILES_SPEC}:{n}{shown} (seed {seed}: {', '.join(modules)})"


# -- what each file loads ------------------------------------------------------------------------------------
_LOADED: dict[str, tuple[str, ...]] = {}
_LOADED_LOCK = threading.Lock()


def loaded_libraries(header: str, *, timeout: float = 120.0) -> tuple[str, ...]:
    """The libraries a header loads, as ``Print Libraries`` lists them after it in a fresh ``coqc`` (cached
    per header). Raises :class:`ConfigError` when the header does not load."""
    from ..provers.base import loaded_header
    from ..provers.coq.prover import CoqConfig, _coqc_ask

    header = loaded_header(header)
    with _LOADED_LOCK:
        if header in _LOADED:
            return _LOADED[header]
    (printed,) = _coqc_ask(header, ["Print Libraries."], CoqConfig(), timeout)
    if "Loaded library files" not in printed:
        raise ConfigError(f"could not read the libraries a header loads: {printed.strip()[-300:]}")
    libs = tuple(line.strip() for line in printed.split("Loaded library files:", 1)[1].splitlines() if line.strip())
    with _LOADED_LOCK:
        _LOADED[header] = libs
    return libs


def _libraries_or_none(header: str, module: str, say: Callable[[str], None]) -> tuple[str, ...]:
    """:func:`loaded_libraries`, or none where the header does not load: the file's lemmas then fail when their
    statements are started (each a recorded failure, as a statement that does not elaborate is), not the run."""
    try:
        return loaded_libraries(header)
    except ConfigError as e:
        say(f"{module}: {e}; its lemmas are recorded as failed")
        return ()


_AVAILABLE: dict[tuple[str, str], bool] = {}


def available_tactics(tactics: Sequence[str], header: str, *, timeout: float = 120.0) -> tuple[str, ...]:
    """Those of ``tactics`` that a proof after ``header`` can call, in order: each outside :data:`INIT_TACTICS` is
    asked of a fresh ``coqc`` (``Ltac proofrl_probe := T.`` fails for a tactic the header loads but does not
    import, as ``Require`` without ``Import`` leaves ``ring``), once per header."""
    from ..provers.base import loaded_header
    from ..provers.coq.prover import CoqConfig, _coqc_ask

    header = loaded_header(header)
    out = []
    for t in tactics:
        if t not in INIT_TACTICS and (header, t) not in _AVAILABLE:
            (printed,) = _coqc_ask(header, [f"Ltac proofrl_probe := {t}."], CoqConfig(), timeout)
            with _LOADED_LOCK:
                _AVAILABLE[(header, t)] = "Error" not in printed
        if t in INIT_TACTICS or _AVAILABLE[(header, t)]:
            out.append(t)
    return tuple(out)


def combination(tactics: Sequence[str], seconds: float) -> str:
    """``intros; solve [timeout t T1 | …]`` with the budget shared evenly (t ≥ 1 s); ``intros.`` fails to close
    anything when no tactic is available."""
    if not tactics:
        return "intros."
    share = max(1, math.floor(seconds / len(tactics)))
    return "intros; solve [ " + " | ".join(f"timeout {share} {t}" for t in tactics) + " ]."


# -- the library's human proofs, stepped once ---------------------------------------------------------------
def library_transitions(
    root: Path, *, workers: int = 2, progress: bool = True, prefixes: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Every (state → tactic) step of the human proofs of the modules under ``prefixes`` (default
    :data:`~proofrl.data.coq_stdlib.CORE_PREFIXES`, into ``root/stdlib-transitions``; the whole library,
    :data:`~proofrl.data.coq_stdlib.STDLIB_ALL`, into ``root/stdlib-transitions-all``), both sides, stepped once
    under each theorem's placed header and read from there after (``python -m proofrl.data.tactics``'s files)."""
    from ..data.coq_stdlib import CORE_PREFIXES, STDLIB_ALL
    from ..data.tactics import build_tactic_data, read_transitions

    prefixes = tuple(prefixes or CORE_PREFIXES)
    named = {CORE_PREFIXES: "stdlib-transitions", STDLIB_ALL: "stdlib-transitions-all"}
    if prefixes not in named:
        raise ConfigError(f"library transitions are stepped for the core modules or the whole library, not {prefixes}")
    folder = Path(root) / named[prefixes]
    if not (folder / "summary.json").is_file():
        build_tactic_data(folder, workers=workers, progress=progress, prefixes=prefixes)
    return [t for side in ("train", "held-out") for t in read_transitions(folder / f"{side}.jsonl")]


def library_model(
    root: Path,
    *,
    retrieval: bool = True,
    seed: int = 0,
    console: Any = None,
    settings: Any = None,
    train: Path | None = None,
) -> Path:
    """The tiny tactic model of row (i), taught once into ``root/library-tactic-model`` on the training side of
    :func:`library_transitions` (the demo's model shape and epochs, :class:`~proofrl.data.assets.AssetsConfig`),
    each prompt holding the state's retrieved context: the tactics of the nearest training states (its own
    theorem's hidden) and the nearest statements among the training modules' lemmas. ``retrieval=False``
    teaches the same model on the same pairs without context (``library-tactic-model-plain``), the comparison
    that says what the context is worth. ``settings`` and ``train`` (a ``train.jsonl``) replace the shape and the
    pairs (the bench's smoke size); a folder taught with others is taught again."""
    from ..data.assets import AssetsConfig, teach
    from ..data.corpus_teach import training_retriever
    from ..data.tactics import read_transitions

    settings = settings or AssetsConfig()
    folder = Path(root) / ("library-tactic-model" if retrieval else "library-tactic-model-plain")
    ready = folder / "ready.json"
    want = {"retrieval": retrieval, "seed": seed, "settings": settings.key(), "train": str(train or "")}
    if ready.is_file() and {k: json.loads(ready.read_text()).get(k, v) for k, v in want.items()} == want:
        return folder
    if train is None:
        library_transitions(root, progress=console is not None)
    train_path = train or Path(root) / "stdlib-transitions" / "train.jsonl"
    retriever = training_retriever(read_transitions(train_path), []) if retrieval else None
    taught = teach(train_path, folder, settings, seed=seed, console=console, retriever=retriever)
    ready.write_text(json.dumps({**want, **taught}, indent=2))
    return folder


# -- the rows ----------------------------------------------------------------------------------------------------
def run_file_rows(
    problems: Sequence[Problem],
    settings: Any,
    out: Path,
    transitions: Sequence[dict[str, Any]],
    *,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> list[Any]:
    """The rows of :data:`FILE_ROWS` in ``settings.rows`` on file-order ``problems`` (module docstring); ``out``
    gets ``results.jsonl`` and each search row's trees. Returns the rows (:class:`~.provers.Row`) in run order."""
    from ..data.splits import STDLIB_PREFIXES, stdlib_lemmas
    from ..policy.sources import HAMMER_TACTICS_HEADER
    from .provers import (
        MEMORY_LABELS,
        PREMISE_MEMORY_ROWS,
        Row,
        hammer_row,
        memory_label,
        one_shot,
        record_row,
    )
    from .row_store import RowStore, run_key

    s = settings
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    results_path.write_text("")
    headers = {p.module: p.header for p in problems}  # every lemma of a file has the file's header
    modules = list(headers)
    libraries = {m: _libraries_or_none(headers[m], m, say) for m in modules}
    rows: list[Row] = []

    def record(row: Row) -> None:
        record_row(row, rows, results_path, say, "lemma")

    def shots(name: str, script_of: Callable[[str], str], header: str) -> Row:
        from .provers import DescendantCPU

        w0, res = time.monotonic(), []
        with DescendantCPU() as cpu:
            for m in modules:  # one script per module: the automation available there
                mine = [p for p in problems if p.module == m]
                res += one_shot(mine, script_of(m), header, s.seconds, s.workers)
        return Row(name, res, time.monotonic() - w0, cpu.seconds)

    def shot(name: str, script: str, header: str) -> Row:  # the same script in every module
        return shots(name, lambda m: script, header)

    def automation() -> Row:
        row = shots("(a) automation available", lambda m: combination(avail[m], s.seconds), "")
        row.notes = {"tactics_by_module": {m: list(t) for m, t in avail.items()}}
        return row

    avail = {m: available_tactics(s.tactics, headers[m]) for m in modules}
    store = RowStore(out, run_key(problems, s, memory=transitions), say)
    if "a" in s.rows:
        record(store.row("(a) automation available", automation))
    if "b" in s.rows:
        record(store.row("(b) sauto", shot, "(b) sauto", "intros; sauto.", HAMMER_TACTICS_HEADER))
        record(store.row("(b) hammer", hammer_row, shot, "", s.atp_seconds))
    # the premises: the lemmas of the set the problems were read from (the core modules, or the whole library)
    read_from = {tuple(p.extra.get(STDLIB_PREFIXES, ())) for p in problems} - {()}
    lemmas = {}
    if set(PREMISE_MEMORY_ROWS) & set(s.rows):
        lemmas = stdlib_lemmas(*read_from) if len(read_from) == 1 else stdlib_lemmas()
    for kind in MEMORY_LABELS:
        if kind in s.rows:
            name = memory_label(kind, s)
            args = (problems, kind, name, avail, libraries, transitions, lemmas, s, out, progress, store.key, say)
            record(store.row(name, _searched_in_order, *args))
    return rows


def _searched_in_order(
    problems: Sequence[Problem],
    kind: str,
    name: str,
    avail: dict[str, tuple[str, ...]],
    libraries: dict[str, tuple[str, ...]],
    transitions: Sequence[dict[str, Any]],
    lemmas: dict[str, list[tuple[str, str]]],
    settings: Any,
    out: Path,
    progress: bool,
    key: dict[str, Any],
    say: Callable[[str], None] = print,
) -> Any:
    """Search (``settings.memory_engine``: best-first or MCTS) over each module's lemmas in file order,
    ``settings.workers`` modules at once, each module with its own memory (offline for ``e``, online for
    ``f``-``k``) and, for ``h``-``k``, its own premises (:func:`~.provers.memory_policy`: each row's sources).

    Each module starts from nothing but what its file loads, so a module is a unit a killed row can resume from:
    under ``key`` (the row store's), each finished module's records are kept in ``modules/`` and a rerun with the
    same key takes them instead of searching the module again (:class:`ModuleStore`); modules kept under another
    key are searched again, said once with the parts of the key that differ."""
    from ..policy.memory import KNNPolicy, ProofMemory
    from ..policy.premises import PremisePolicy, unresolved
    from ..policy.sources import MenuPolicy
    from ..progress import progress_bar
    from ..provers.coq.pace import machine_pace
    from ..search.run import _search_leased, _search_pool, _with_header, tree_files
    from ..search.trace import Tracer
    from .provers import (
        ENGINES,
        PREMISE_MEMORY_ROWS,
        PREMISE_ROWS,
        DescendantCPU,
        Row,
        memory_policy,
        proofs_by_source,
        row_search_config,
        search_record,
    )

    s = settings
    cfg = row_search_config(ENGINES[s.memory_engine], s)
    folder = out / f"{kind}-{s.memory_engine}"
    (folder / "trees").mkdir(parents=True, exist_ok=True)
    tracer = Tracer(folder / "trace.jsonl")
    by_theorem: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for t in transitions:
        if not t.get("structural"):
            by_theorem[(t.get("module", ""), t["theorem"])].append((t["state_before"], t["tactic"]))
    results: dict[int, dict[str, Any]] = {}
    files = tree_files([p.key for p in problems])
    lock = threading.Lock()
    memory_sizes: dict[str, dict[str, int]] = {}
    kept_modules = ModuleStore(folder / "modules", {"row": name, **key}, say)
    mods = list(dict.fromkeys(p.module for p in problems))
    kept = {m: kept_modules.kept(m) for m in mods}
    if any(got is None for got in kept.values()):  # the pace before this sitting's provers start
        pace = kept_modules.begin(machine_pace)
        say(f"{name}: this sitting's pace {pace_words(pace)}; {len(mods) - len(kept_modules.taken)} modules to search")
    pool = _search_pool(cfg, s.workers, None)
    for got in kept.values():
        if got is not None:
            results.update(got.results)

    def module(m: str, bar: Any, task: Any) -> None:
        if (got := kept[m]) is not None:
            with lock:
                memory_sizes[m] = got.memory
                if bar is not None:
                    bar.update(task, advance=len(got.results))
            return
        m0 = time.monotonic()
        before = set(libraries[m]) - {m}  # what the file loads: the modules that precede it
        mem = ProofMemory.from_transitions([t for t in transitions if t.get("module") in before], cap=None)
        knn = KNNPolicy(mem, online=kind != "e")
        premises = PremisePolicy()
        if kind in PREMISE_MEMORY_ROWS:
            premises.add_many(pair for lib in libraries[m] if lib != m for pair in lemmas.get(lib, ()))
        automation = MenuPolicy([f"intros; {t}." for t in avail[m]]) if avail[m] else None
        policy = memory_policy(kind, s, knn, premises, automation)
        extra = str(getattr(policy, "header", "") or "")  # sauto's plugin, after the file's own header
        start = len(mem)
        for i, p in enumerate(problems):
            if p.module != m:
                continue
            (theorem,) = _with_header([p.theorem], extra)
            r = _search_leased(theorem, pool, policy, cfg, tracer, None)
            if r.status == "proved" and knn.online:
                knn.record_proof(p.name, [(st, tac) for st, tac, _ in r.proof_steps()])
            if knn.online:  # the library's own proof of the lemma, read once the lemma has been tried
                mem.add_many(by_theorem.get((m, p.name), ()), theorem=p.name, online=False)
            if kind in PREMISE_MEMORY_ROWS:  # and the lemma itself, citable from the next one on
                premises.add(p.key, p.formal_statement)
            line = search_record(p, r) | {"memory_pairs": len(mem)}
            if kind in PREMISE_ROWS and r.tree:
                line["premises_unresolved"] = unresolved(r.tree.edges)
            (folder / "trees" / files[i]).write_text(json.dumps(r.tree_json(), default=str))
            with lock:
                results[i] = line
                if bar is not None:
                    bar.update(task, advance=1)
        memory_sizes[m] = {"start": start, "end": len(mem), "learned": mem.online_count}
        if kind in PREMISE_MEMORY_ROWS:
            memory_sizes[m]["premises"] = len(premises.memory)
        with lock:
            mine = {i: results[i] for i, p in enumerate(problems) if p.module == m}
        kept_modules.save(m, KeptModule(mine, memory_sizes[m], time.monotonic() - m0))

    try:
        with DescendantCPU() as cpu, progress_bar(name, disable=not progress) as bar:
            task = bar.add_task(name, total=len(problems))
            with ThreadPoolExecutor(max(1, s.workers)) as ex:
                for job in [ex.submit(module, m, bar, task) for m in mods]:
                    job.result()
    finally:
        tracer.close()
        pool.close()
    res = [results[i] for i in range(len(problems))]
    with open(folder / "results.jsonl", "w", encoding="utf-8") as f:
        for r in res:
            f.write(json.dumps(r) + "\n")
    now = kept_modules.sitting
    sat = sittings(problems, kept, now, kept_modules.ends)
    wall = round(sum(e["wall_s"] for e in sat), 2)  # every sitting's, at the precision each is kept to
    row = Row(name, res, wall, cpu.seconds)  # CPU: this sitting's
    row.notes = {"memory_by_module": memory_sizes, "proofs_by_source": proofs_by_source(res), "sittings": sat}
    if kept_modules.taken:
        taken = set(kept_modules.taken)
        row.notes["modules_kept"] = {
            "modules": kept_modules.taken,
            "lemmas": sum(1 for p in problems if p.module in taken),
            "wall_s": round(sum(e["wall_s"] for e in sat if now is None or e["started"] != now["started"]), 2),
        }
    if kind in PREMISE_ROWS:  # retrieved names Coq did not know (a lemma of a module nested in its file): failed steps
        row.notes["premise_steps_unresolved"] = sum(r.get("premises_unresolved", 0) for r in res)
    return row
