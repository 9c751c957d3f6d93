"""A proof memory: (proof state text → tactic) pairs retrieved by BM25, and the k-NN tactic policy over it.

* **The idea** (Tactician's k-NN): a state seen before, or one much like it, is best served by the tactic that
  was taken there. The memory holds the states of known proofs with the tactic each proof applied; for a new
  state the policy proposes the tactics of its k nearest states, applied as they are (no learning, no
  rewriting of names), each with a prior from how similar its states were.
* **Similarity** is BM25 over the state's tokens, as Rango retrieves proofs and ReProver's BM25 baseline
  retrieves premises: identifiers (dotted names whole), numbers and symbol runs of the text
  :func:`proofrl.provers.backend.state_text` renders, the text the search shows the policy. The index is
  ``bm25s``'s (Lucene's variant, k1 = 1.5, b = 0.75).
* **Online** (Tactician learns from each proof as soon as it is written): :meth:`ProofMemory.add` puts a pair in
  at once, retrievable from the next query on. A search adds each found proof's steps through
  :meth:`KNNPolicy.record_proof` when the policy is online (``knn-online:DIR``), so later theorems of the same
  run retrieve them. At the end of the run the search saves the memory, its loaded pairs and the run's own
  (:meth:`KNNPolicy.save_memory`), into the run's folder or one the user names, never silently over the folder
  it was loaded from (:func:`proofrl.search.run.search_many`).
* **Index**: built lazily, at the next query after a change. BM25's document frequencies and mean length belong
  to the whole corpus and ``bm25s`` builds a static sparse matrix, so the exact update is a whole rebuild, linear
  in the memory (about 0.1 ms a pair on one core). Up to :data:`EXACT_BELOW` pairs every change gets one. Above
  it, the pairs added since the last whole build get a small index of their own, built beside an even sample of
  :data:`CALIBRATION` states of the whole one (so its statistics, and its scores, approximate the whole
  memory's); a query takes the best of both, and the whole index is rebuilt once the pairs added or evicted
  since pass :data:`WHOLE_AFTER` of it. Evicted pairs are never answered.
* **Cap and eviction**: at most ``cap`` pairs; past it the oldest offline pair (from the transitions the memory
  was built or loaded from) goes first; pairs added online during this run are never evicted (when nothing
  offline is left, the memory grows past the cap). Each (state, tactic) pair is kept once.
* **Folder** (:meth:`ProofMemory.save` / :meth:`ProofMemory.load`): ``manifest.json`` (format version, the
  prover's version as ``coqc`` reports it, counts, the BM25 library) and ``pairs.jsonl``; the index is rebuilt
  on first use. A memory saved under another Coq version is refused in one line naming both (states print
  differently across versions); a missing folder is one line too. Loaded pairs are all offline to the new run.
* **Failure**: the k-NN policy answers no tactic when the memory is empty, or when retrieval itself fails
  (counted in ``failures``): a search never fails because its memory did.

``python -m proofrl.policy.memory --out DIR TRANSITIONS.jsonl ...`` builds a memory folder from transition
files (``python -m proofrl.data.tactics``'s ``train.jsonl``, a library corpus's ``transitions.jsonl``).
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ConfigError
from ..preflight import installed_version
from .sources import Proposal

FORMAT_VERSION = 1
MANIFEST, PAIRS = "manifest.json", "pairs.jsonl"
DEFAULT_CAP = 500_000
"""pairs kept by default (about 0.75 GiB of RAM with the index: 156 MiB per 100,000 states of 170 characters)"""

_TOKEN = re.compile(r"[^\W\d]\w*(?:'+\w*)*(?:\.[^\W\d]\w*(?:'+\w*)*)*|\d+|[()\[\]{},;]|[^\w\s()\[\]{},;]+")


EXACT_BELOW = 20_000
"""up to this many pairs, every change rebuilds the whole index (well under a second on one core at 5,000)"""
WHOLE_AFTER = 0.05
"""above :data:`EXACT_BELOW`, the whole index is rebuilt once the pairs added or evicted since pass this share"""
CALIBRATION = 1_000
"""states of the whole index that the small index of recent pairs is built beside (its document frequencies
and mean length then approximate the whole memory's, so the two indexes' scores compare)"""


def tokens(state: str) -> list[str]:
    """The BM25 terms of a state text: identifiers (``Nat.add_comm`` whole, primes kept), numbers, brackets and
    commas one by one, other symbol runs (``->``, ``/\\``, ``⊢``) whole."""
    return _TOKEN.findall(state)


def prover_version() -> str:
    """The prover's version as the memory records it (``coq 8.16.1``)."""
    from ..provers.coq.prover import coq_version

    return coq_version()


@dataclass(frozen=True, slots=True)
class Pair:
    """One remembered step: the state text, the tactic applied there, the theorem it came from, and whether this
    run added it (``online``: never evicted)."""

    state: str
    tactic: str
    theorem: str = ""
    online: bool = False


class Neighbour(NamedTuple):
    """A near state's tactic, its BM25 score against the query, and the theorem whose proof took it."""

    tactic: str
    score: float
    theorem: str


@dataclass
class MemoryStats:
    """Where the memory's time went (seconds) and what it did."""

    queries: int = 0
    query_seconds: float = 0.0
    """retrieval, the index builds the queries triggered included"""
    rebuilds: int = 0
    rebuild_seconds: float = 0.0
    """whole-index builds"""
    recent_rebuilds: int = 0
    recent_seconds: float = 0.0
    """builds of the small index of recent pairs (large memories only)"""
    added: int = 0
    add_seconds: float = 0.0
    evicted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in self.__dict__.items()}


@dataclass
class _Index:
    """One ``bm25s`` index and the pair id of each row."""

    bm25: Any
    rows: list[int]

    @classmethod
    def build(cls, rows: list[int], terms: Sequence[list[str]]) -> _Index:
        """The index of each row's ``terms`` (:func:`tokens` of its state)."""
        import bm25s  # type: ignore[import-untyped]  # (no py.typed)

        bm25 = bm25s.BM25()
        bm25.index(list(terms), show_progress=False)
        return cls(bm25, rows)

    answered: int | None = None
    """rows past this one are there for the statistics only (the calibration sample), never answered"""

    def top(self, terms: Sequence[str], k: int) -> list[tuple[float, int]]:
        """``(score, pair id)`` of the ``k`` best answerable rows with a positive score."""
        import numpy as np

        vocab = self.bm25.vocab_dict
        known = [t for t in terms if t in vocab]
        if not known or not self.rows:
            return []
        scores = self.bm25.get_scores(known)[: self.answered]
        n = min(k, len(scores))
        near = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        return [(float(scores[i]), self.rows[int(i)]) for i in near if scores[i] > 0]


class ProofMemory:
    """(state → tactic) pairs with BM25 retrieval (module docstring). Thread-safe: one lock around every
    change and query."""

    def __init__(
        self, cap: int | None = DEFAULT_CAP, *, prover: str | None = None, exact_below: int = EXACT_BELOW
    ) -> None:
        if cap is not None and cap < 1:
            raise ConfigError(f"a proof memory's cap must be at least 1, got {cap}")
        self.cap = cap
        self.prover = prover
        """the prover version the pairs were recorded under (None: this machine's, asked when saved)"""
        self.exact_below = exact_below
        """up to this many pairs every change rebuilds the whole index; above, recent pairs get a small index"""
        self.stats = MemoryStats()
        self._pairs: dict[int, Pair] = {}
        self._terms: dict[int, list[str]] = {}  # each pair's state tokenized once, for every rebuild after
        self._key: dict[tuple[str, str], int] = {}
        self._offline: deque[int] = deque()  # offline pair ids, oldest first (evicted from the left)
        self._next = 0
        self._main: _Index | None = None  # every pair as of the last whole build
        self._recent: _Index | None = None  # pairs added since, beside a sample of the main index's states
        self._recent_ids: list[int] = []
        self._evicted_since = 0  # pairs evicted since the whole build (rows of the main index that are gone)
        self._stale = True
        self._lock = threading.RLock()

    # -- contents -----------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._pairs)

    @property
    def online_count(self) -> int:
        return sum(p.online for p in self._pairs.values())

    def pairs(self) -> list[Pair]:
        """Every pair, oldest first."""
        with self._lock:
            return list(self._pairs.values())

    def copy(self) -> ProofMemory:
        """Another memory holding the same pairs (online ones still online), in the same order, answering as this
        one does; what either learns after stays its own. The pairs keep their ids, so the twin shares the built
        indexes (never changed once built, only replaced) and neither tokenizes nor indexes anything again."""
        twin = ProofMemory(self.cap, prover=self.prover, exact_below=self.exact_below)
        with self._lock:
            twin._pairs, twin._terms, twin._key = dict(self._pairs), dict(self._terms), dict(self._key)
            twin._offline, twin._recent_ids = deque(self._offline), list(self._recent_ids)
            twin._next, twin._evicted_since, twin._stale = self._next, self._evicted_since, self._stale
            twin._main, twin._recent = self._main, self._recent
        return twin

    def add(self, state: str, tactic: str, *, theorem: str = "", online: bool = True) -> bool:
        """Remember that ``tactic`` was applied at ``state`` (``online``: added by this run, never evicted). A pair
        already held is kept once (and becomes online if this one is). False when nothing was added."""
        return self.add_many([(state, tactic)], theorem=theorem, online=online) > 0

    def add_many(self, steps: Iterable[Sequence[str]], *, theorem: str = "", online: bool = True) -> int:
        """:meth:`add` for each ``(state, tactic)`` (a found proof's steps at once); returns how many were new."""
        t0 = time.perf_counter()
        new = 0
        with self._lock:
            for state, tactic in steps:
                new += self._put(Pair(state, " ".join(tactic.split()), sys.intern(theorem), online))
            self._evict()
            self.stats.add_seconds += time.perf_counter() - t0
        return new

    def _put(self, pair: Pair) -> int:
        if not pair.state.strip() or not pair.tactic:
            return 0
        key = (pair.state, pair.tactic)
        if (old := self._key.get(key)) is not None:
            if pair.online and not self._pairs[old].online:  # now this run's own: never evicted
                self._pairs[old] = Pair(*key, self._pairs[old].theorem, True)
            return 0
        pid, self._next = self._next, self._next + 1
        self._pairs[pid] = pair
        self._terms[pid] = list(map(sys.intern, tokens(pair.state)))  # one string per distinct term, not per use
        self._key[key] = pid
        self._recent_ids.append(pid)
        if not pair.online:
            self._offline.append(pid)
        self._stale = True
        self.stats.added += 1
        return 1

    def _evict(self) -> None:
        """Oldest offline pairs out until the cap holds (online pairs stay, even past the cap)."""
        while self.cap is not None and len(self._pairs) > self.cap and self._offline:
            pid = self._offline.popleft()
            pair = self._pairs.get(pid)
            if pair is None or pair.online:  # promoted to online since
                continue
            del self._pairs[pid]
            del self._terms[pid]
            del self._key[(pair.state, pair.tactic)]
            self.stats.evicted += 1
            self._evicted_since += 1
            self._stale = True

    # -- retrieval ------------------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """Bring the index up to the pairs (module docstring, "Index"): a whole build while the memory is small,
        when it was never built, or once the pairs added or evicted since pass :data:`WHOLE_AFTER` of it; else a
        build of the small index of the pairs added since."""
        if not self._stale:
            return
        t0 = time.perf_counter()
        built = len(self._main.rows) if self._main is not None else 0
        recent = [i for i in self._recent_ids if i in self._pairs]
        changed = len(recent) + self._evicted_since
        if self._main is None or len(self._pairs) <= self.exact_below or changed > WHOLE_AFTER * built:
            rows = list(self._pairs)
            self._main = _Index.build(rows, [self._terms[i] for i in rows]) if rows else None
            self._recent, self._recent_ids, self._evicted_since = None, [], 0
            self.stats.rebuilds += 1
            self.stats.rebuild_seconds += time.perf_counter() - t0
        else:
            main_rows = self._main.rows
            step = max(1, len(main_rows) // CALIBRATION)
            sample = main_rows[::step][:CALIBRATION]  # for the corpus statistics only: never answered from here
            terms = [self._terms[i] for i in recent] + [self._terms.get(i, []) for i in sample]  # evicted: none
            self._recent = _Index.build(recent + [-1] * len(sample), terms) if recent else None
            if self._recent is not None:
                self._recent.answered = len(recent)
            self._recent_ids = recent
            self.stats.recent_rebuilds += 1
            self.stats.recent_seconds += time.perf_counter() - t0
        self._stale = False

    def neighbours(self, state: str, k: int) -> list[Neighbour]:
        """The tactics of the ``k`` states most like ``state`` (BM25 score > 0), most similar first. Empty when
        the memory is, or when no term of ``state`` occurs in it."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        t0 = time.perf_counter()
        with self._lock:
            try:
                self._refresh()
                terms = list(dict.fromkeys(tokens(state)))
                hits: list[tuple[float, int]] = []
                if self._main is not None:
                    hits += self._main.top(terms, k + self._evicted_since)
                if self._recent is not None:
                    hits += self._recent.top(terms, k)
                out: list[Neighbour] = []
                for score, pid in sorted(hits, key=lambda h: (-h[0], h[1])):
                    pair = self._pairs.get(pid)  # an evicted pair's row, or a calibration row (-1), is no answer
                    if pair is not None and len(out) < k:
                        out.append(Neighbour(pair.tactic, score, pair.theorem))
                return out
            finally:
                self.stats.queries += 1
                self.stats.query_seconds += time.perf_counter() - t0

    # -- building, saving, loading ----------------------------------------------------------------------------
    @classmethod
    def from_transitions(
        cls,
        sources: Iterable[str | Path | dict[str, Any]],
        *,
        cap: int | None = DEFAULT_CAP,
        split: str | None = None,
        include_structural: bool = False,
    ) -> ProofMemory:
        """A memory of transition records (``state_before``, ``tactic``, ``theorem``; the format of
        ``python -m proofrl.data.tactics`` and of a library corpus's ``transitions.jsonl``), given as JSONL files
        or as dicts. Bullets and braces (``structural``) are left out unless asked (the search focuses goals
        itself); ``split`` keeps only records of that split. Past ``cap`` the oldest are evicted."""
        mem = cls(cap)
        for rec in _records(sources):
            if split is not None and rec.get("split") != split:
                continue
            if rec.get("structural") and not include_structural:
                continue
            state, tactic = rec.get("state_before"), rec.get("tactic")
            if isinstance(state, str) and isinstance(tactic, str):
                mem.add(state, tactic, theorem=str(rec.get("theorem", "")), online=False)
        return mem

    def save(self, folder: str | Path) -> Path:
        """``pairs.jsonl`` and ``manifest.json`` into ``folder`` (each written beside, then renamed)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            pairs = list(self._pairs.values())
            prover = self.prover or prover_version()
        _write(
            folder / PAIRS,
            (
                json.dumps({"state": p.state, "tactic": p.tactic, "theorem": p.theorem, "online": p.online})
                for p in pairs
            ),
        )
        manifest = {
            "format": FORMAT_VERSION,
            "prover": prover,
            "pairs": len(pairs),
            "online": sum(p.online for p in pairs),
            "cap": self.cap,
            "index": f"bm25s {installed_version('bm25s', '(not installed)')} (lucene, k1=1.5, b=0.75), rebuilt on load",
        }
        _write(folder / MANIFEST, [json.dumps(manifest, indent=2)])
        return folder

    @classmethod
    def load(cls, folder: str | Path, *, cap: int | None = DEFAULT_CAP, prover: str | None = None) -> ProofMemory:
        """The memory saved in ``folder``. Raises :class:`~proofrl.errors.ConfigError` in one line when the folder
        or its manifest is missing or unreadable, its format is not this one's, or its prover version is not
        ``prover`` (default: this machine's)."""
        folder = Path(folder)
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except FileNotFoundError:
            raise ConfigError(
                f"no proof memory at {folder} ({MANIFEST} missing); build one with "
                f"python -m proofrl.policy.memory --out {folder} TRANSITIONS.jsonl"
            ) from None
        except (OSError, ValueError) as e:
            raise ConfigError(f"proof memory {folder}: unreadable {MANIFEST} ({e})") from None
        if manifest.get("format") != FORMAT_VERSION:
            raise ConfigError(
                f"proof memory {folder} has format {manifest.get('format')!r}, this proofrl reads {FORMAT_VERSION}"
            )
        here = prover or prover_version()
        if manifest.get("prover") != here:
            raise ConfigError(
                f"proof memory {folder} was built with {manifest.get('prover')}, this machine has {here}: "
                "rebuild it here (states print differently across versions)"
            )
        mem = cls(cap, prover=here)
        try:
            n = 0
            for d in _records([folder / PAIRS]):
                mem.add(d["state"], d["tactic"], theorem=d.get("theorem", ""), online=False)
                n += 1
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"proof memory {folder}: unreadable {PAIRS} ({type(e).__name__}: {e})") from None
        if n != manifest.get("pairs"):
            raise ConfigError(f"proof memory {folder}: {PAIRS} holds {n} pairs, its manifest says {manifest['pairs']}")
        return mem


def _write(path: Path, lines: Iterable[str]) -> None:
    """``lines`` into ``path``, each ended by a newline: written beside, then renamed over it."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    tmp.replace(path)


def _records(sources: Iterable[str | Path | dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records of JSONL files (blank lines skipped), or the dicts given as they are."""
    for src in sources:
        if isinstance(src, dict):
            yield src
            continue
        with open(src, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


# -- the k-NN policy --------------------------------------------------------------------------------------------


def knn_proposals(near: Sequence[Neighbour], k: int, source: str = "knn") -> list[Proposal]:
    """The distinct tactics of ``near``, at most ``k``, best first. A tactic's prior is its share of the
    neighbours' BM25 scores (the scores of every near state that took it, summed: similarity-weighted votes),
    given as ``log(share)``: a log-probability over the proposed tactics, which is what the search's priors and
    cumulative log-prob priorities take from any other source. Ties keep the nearer state's tactic first."""
    total = sum(n.score for n in near)
    if total <= 0:
        return []
    votes: dict[str, list[float]] = {}
    for n in near:
        v = votes.setdefault(n.tactic, [0.0, 0.0])
        v[0] += n.score
        v[1] += 1
    out = [Proposal(t, math.log(w / total), math.log(w / total), 1, int(c), source) for t, (w, c) in votes.items()]
    return sorted(out, key=lambda p: -p.logprob_sum)[:k]


class KNNPolicy:
    """Tactician's k-NN as a :class:`~proofrl.policy.tactic.TacticPolicy`: the tactics of the ``neighbours``
    (default: ``k``) nearest remembered states (:func:`knn_proposals`). ``online``: every proof a search finds
    goes into the memory at once (:meth:`record_proof`). Retrieval that fails answers nothing and is counted in
    ``failures`` (``last_error`` says why). ``folder``: where the memory was loaded from (None: built here);
    :meth:`save_memory` keeps what an online run learned."""

    name = "knn"
    source = "knn"
    thread_safe = True  # the memory holds its own lock

    def __init__(
        self,
        memory: ProofMemory,
        *,
        online: bool = False,
        neighbours: int | None = None,
        folder: str | Path | None = None,
    ):
        self.memory, self.online, self.neighbours = memory, online, neighbours
        self.folder = Path(folder) if folder is not None else None
        self.failures = 0
        self.last_error = ""

    def propose(self, state_text: str, k: int) -> list[Proposal]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        try:
            near = self.memory.neighbours(state_text, self.neighbours or k)
        except Exception as e:  # the memory never sinks a search
            self.failures += 1
            self.last_error = f"{type(e).__name__}: {e}"[:300]
            return []
        return knn_proposals(near, k, self.source)

    def record_proof(self, theorem: str, steps: Sequence[tuple[str, str]]) -> None:
        """A found proof's ``(state text, tactic)`` steps, added to the memory when online (ignored offline)."""
        if self.online:
            self.memory.add_many(steps, theorem=theorem, online=True)

    def fork(self) -> KNNPolicy:
        """The same policy over a copy of its memory (:meth:`ProofMemory.copy`): what a search with the fork learns
        online stays in the fork."""
        return KNNPolicy(self.memory.copy(), online=self.online, neighbours=self.neighbours, folder=self.folder)

    def save_memory(self, folder: str | Path) -> dict[str, Any]:
        """The memory as it stands (the pairs it was loaded with and the ones this run added) saved into
        ``folder`` (:meth:`ProofMemory.save`); returns what was saved: ``folder``, ``pairs``, ``learned`` (this
        run's), ``loaded_from``. Whether ``folder`` may be the one it was loaded from is the caller's choice."""
        path = self.memory.save(folder)
        return {
            "folder": str(path),
            "pairs": len(self.memory),
            "learned": self.memory.online_count,
            "loaded_from": str(self.folder) if self.folder is not None else None,
        }


def knn_policy(folder: str | Path, *, online: bool = False, neighbours: int | None = None) -> KNNPolicy:
    """``knn:DIR`` / ``knn-online:DIR``: the k-NN policy over the memory saved in ``folder``."""
    return KNNPolicy(ProofMemory.load(folder), online=online, neighbours=neighbours, folder=folder)


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Build a proof memory folder from transition JSONL files.")
    ap.add_argument("transitions", nargs="*", type=Path, help="JSONL files (none: an empty memory)")
    ap.add_argument("--out", type=Path, required=True, help="the memory folder to write")
    ap.add_argument("--cap", type=int, default=DEFAULT_CAP, help="at most this many pairs (the newest kept)")
    ap.add_argument("--split", default=None, help="keep only records of this split (e.g. train)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        mem = ProofMemory.from_transitions(args.transitions, cap=args.cap, split=args.split)
    except (OSError, ValueError) as e:
        ap.exit(2, f"error: {e}\n")
    mem.save(args.out)
    print(
        f"{len(mem)} pairs ({mem.stats.evicted} evicted past the cap) in {args.out}, "
        f"{time.perf_counter() - t0:.1f} s, {prover_version()}"
    )


if __name__ == "__main__":
    main()
