"""Training and held-out problem sets: the Coq standard library split by module, and kimina's filtering.

* :func:`coq_stdlib_problems` turns the theorems read from Coq's installed sources
  (:mod:`proofrl.data.coq_stdlib`) into :class:`Problem` records that keep their module, human proof and
  side.
* :func:`split_by_module` holds out whole modules, so no held-out theorem shares a file (its lemmas,
  notations, proof idioms) with a training theorem. The stdlib's sides are decided once, over every theorem
  of the library read, before any filter (:func:`stdlib_sides`): each stdlib set filters within its sides, so
  no set's held-out theorem is on another set's training side.
* :func:`kimina_filter` is kimina-prover-rl's prompt-set curation ("filtering out problems with a historical
  win rate above 0.5 ... duplicating hard ones", the kimina-prover-rl post).
* :func:`problem_set` resolves the names a recipe uses (``coq-stdlib:train``, a JSONL path, ...).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from ..problems import Problem, load_problems
from ..provers.base import Theorem
from ..provers.coq.plan import theorem_name
from .coq_stdlib import CORE_PREFIXES, load_stdlib

TRAIN, HELD_OUT = "train", "held-out"


def coq_stdlib_problems(
    *,
    prefixes: Sequence[str] = CORE_PREFIXES,
    max_proof_chars: int | None = None,
    held_out_fraction: float = 0.2,
    seed: int = 0,
) -> list[Problem]:
    """Every extractable theorem of the modules under ``prefixes``, in a stable order (by prefix, then file),
    each on its module's side (``split``), decided by :func:`split_by_module` before any filter.

    ``module`` is the theorem's module (``Coq.Arith.PeanoNat``), ``proof`` its human proof (``Proof. … Qed.``);
    ``max_proof_chars`` keeps only theorems whose human proof is at most that long (the short ones are what a
    tiny model can learn), on the side their module already has. ``extra`` keeps the source file and line, and
    the prefixes the sides were decided over.
    """
    prefixes = tuple(dict.fromkeys(prefixes))  # a prefix given twice is read once
    sides = stdlib_sides(prefixes, held_out_fraction=held_out_fraction, seed=seed)
    return [
        replace(p, split=sides[p.module])
        for p in _stdlib_problems(prefixes)
        if max_proof_chars is None or len(p.proof) <= max_proof_chars
    ]


def stdlib_lemmas(prefixes: Sequence[str] = CORE_PREFIXES) -> dict[str, list[tuple[str, str]]]:
    """Module -> its extractable theorems as ``(qualified name, statement)``, in file order: what a proof in a
    later file may cite (the premises of :mod:`proofrl.policy.premises`)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for p in sorted(coq_stdlib_problems(prefixes=prefixes), key=lambda p: (p.module, int(p.extra.get("line", 0)))):
        out.setdefault(p.module, []).append((p.key, p.formal_statement))
    return out


def _stdlib_problems(prefixes: tuple[str, ...]) -> list[Problem]:
    out: list[Problem] = []
    for prefix in prefixes:
        for r in load_stdlib(prefix=prefix):
            # the name as Coq reads it from the statement: the extractor's ``name`` drops a trailing prime
            # (``Z_dec'`` -> ``Z_dec``), which would make two problems share a key
            name = theorem_name(Theorem(r["name"], r["formal_statement"]))
            out.append(
                Problem(
                    name=name,
                    formal_statement=r["formal_statement"],
                    header=r["header"],
                    backend="coq",
                    module=r["module"],
                    proof=r["proof"],
                    extra={"file": r["file"], "line": r["line"], STDLIB_PREFIXES: list(prefixes)},
                )
            )
    return out


STDLIB_PREFIXES = "stdlib_prefixes"
"""``extra`` key of a stdlib problem: the module prefixes of the set it was read from, whose unfiltered
theorems decide its module's side"""


@functools.lru_cache(maxsize=16)
def stdlib_sides(prefixes: tuple[str, ...], *, held_out_fraction: float = 0.2, seed: int = 0) -> Mapping[str, str]:
    """Module → side (``train`` / ``held-out``): :func:`split_by_module` over every extractable theorem of
    ``prefixes``, before any filter.

    A module's side is a fact about the module, never about what a filter left of it: deciding sides on a
    filtered list would move a module across when the filter changes (a proof-length cut of 400 characters
    and none at all would put one theorem on both sides), and a model taught on one set's training side would
    then be scored on theorems it was taught. Every stdlib set (these problems, the tactic transitions, the
    demo's tactic assets) takes its sides from here."""
    every = _stdlib_problems(prefixes)
    return MappingProxyType(_module_sides(every, held_out_fraction=held_out_fraction, seed=seed))


def split_by_module(
    problems: Sequence[Problem], *, held_out_fraction: float = 0.2, seed: int = 0
) -> tuple[list[Problem], list[Problem]]:
    """``(train, held_out)``: whole modules go to one side, about ``held_out_fraction`` of the problems to the
    held-out side, the same for the same input and seed. Problems keep their input order and get ``split``
    set to ``"train"`` / ``"held-out"``. A problem without a module is its own group (miniF2F-style sets).

    A stdlib problem (:func:`coq_stdlib_problems`) takes its module's side as decided over the whole
    library it was read from (:func:`stdlib_sides`), whatever was filtered out of ``problems`` since: a
    filtered set is never split again on what its filter left. The other problems are split among
    themselves: modules are visited in a seeded shuffle; each joins the held-out side when that brings its
    size closer to the target (so one huge module never swamps a small target, and both sides are non-empty
    whenever the target is between 0 and the whole set and there are at least two modules).
    """
    _check_fraction(held_out_fraction)
    sides = _decided_sides(problems, held_out_fraction, seed)
    rest = [p for p in problems if _group(p) not in sides]
    sides |= _module_sides(rest, held_out_fraction=held_out_fraction, seed=seed)
    train = [replace(p, split=TRAIN) for p in problems if sides[_group(p)] == TRAIN]
    held_out = [replace(p, split=HELD_OUT) for p in problems if sides[_group(p)] == HELD_OUT]
    return train, held_out


def _check_fraction(held_out_fraction: float) -> None:
    if not 0.0 <= held_out_fraction <= 1.0 or math.isnan(held_out_fraction):
        raise ValueError(f"held_out_fraction must be in [0, 1], got {held_out_fraction}")


def _decided_sides(problems: Sequence[Problem], held_out_fraction: float, seed: int) -> dict[str, str]:
    """The sides of the stdlib problems' modules, decided over the libraries they were read from."""
    out: dict[str, str] = {}
    for prefixes in dict.fromkeys(tuple(p.extra[STDLIB_PREFIXES]) for p in problems if STDLIB_PREFIXES in p.extra):
        sides = stdlib_sides(prefixes, held_out_fraction=held_out_fraction, seed=seed)
        out |= {p.module: sides[p.module] for p in problems if p.module in sides}
    return out


def _module_sides(problems: Sequence[Problem], *, held_out_fraction: float, seed: int) -> dict[str, str]:
    """Group → side by the seeded greedy walk over the groups of ``problems``."""
    _check_fraction(held_out_fraction)
    sizes: dict[str, int] = {}
    for p in problems:
        sizes[_group(p)] = sizes.get(_group(p), 0) + 1
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    target = held_out_fraction * len(problems)
    sides: dict[str, str] = {}
    count = 0
    for g in order:
        if abs(count + sizes[g] - target) < abs(count - target):
            sides[g] = HELD_OUT
            count += sizes[g]
        else:
            sides[g] = TRAIN
    return sides


def _group(p: Problem) -> str:
    return p.module if p.module else f"\0{p.name}"  # \0: a bare name never equals a module path


def kimina_filter(
    problems: Sequence[Problem],
    win_rates: Mapping[str, float],
    *,
    max_win_rate: float = 0.5,
    duplicate_below: float | None = 0.25,
    copies: int = 2,
) -> list[Problem]:
    """kimina-prover-rl's prompt-set filter: drop problems the policy already wins, repeat the hard ones.

    ``win_rates`` maps :attr:`Problem.key` (or, failing that, ``name``) to the fraction of past samples that
    were correct. A problem with win rate > ``max_win_rate`` (kimina: 0.5) is dropped; one with win rate
    < ``duplicate_below`` appears ``copies`` times (adjacent); the rest once. A problem with no recorded win
    rate is kept once (no evidence that it is easy).

    kimina publishes the 0.5 cut but not what "hard" means. Our default 0.25 duplicates, with its 8 rollouts
    per problem, those solved in at most 1 of 8 samples (0.25 itself, 2 of 8, is not duplicated);
    ``duplicate_below=None`` turns duplication off.
    """
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    out: list[Problem] = []
    for p in problems:
        rate = win_rates.get(p.key, win_rates.get(p.name))
        if rate is None:
            out.append(p)
            continue
        if not 0.0 <= rate <= 1.0:  # also catches NaN
            raise ValueError(f"{p.key}: win rate must be in [0, 1], got {rate}")
        if rate > max_win_rate:
            continue
        n = copies if duplicate_below is not None and rate < duplicate_below else 1
        out.extend([p] * n)
    return out


def problem_set(
    spec: str,
    *,
    split: str | None = None,
    limit: int | None = None,
    max_proof_chars: int | None = None,
    held_out_fraction: float = 0.2,
    seed: int = 0,
    backend: str | None = None,
) -> list[Problem]:
    """Problems named by a recipe: ``coq-stdlib`` (all), ``coq-stdlib:train``, ``coq-stdlib:held-out``
    (the sides of :func:`coq_stdlib_problems`, decided by module before ``max_proof_chars`` cuts), a library
    corpus' split (``coq-lib:mathcomp:test``, :func:`proofrl.data.corpus.corpus_problems`), or a JSONL path
    (``split`` filters it)."""
    if spec.startswith("coq-lib:"):
        from .corpus import corpus_problems

        problems = corpus_problems(spec)
    elif spec.startswith("coq-stdlib"):
        _, _, side = spec.partition(":")
        if side not in ("", TRAIN, HELD_OUT):
            raise ValueError(
                f"unknown problem set {spec!r}; valid: coq-stdlib, coq-stdlib:{TRAIN}, coq-stdlib:{HELD_OUT}"
            )
        problems = coq_stdlib_problems(max_proof_chars=max_proof_chars, held_out_fraction=held_out_fraction, seed=seed)
        if side:
            problems = [p for p in problems if p.split == side]
    else:
        if not Path(spec).is_file():
            raise FileNotFoundError(
                f"no problem file {spec!r} (and not one of coq-stdlib, coq-stdlib:{TRAIN}, coq-stdlib:{HELD_OUT})"
            )
        problems = load_problems(spec, backend=backend, split=split)
    return problems if limit is None else problems[:limit]
