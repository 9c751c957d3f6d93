"""Problem sets for training and evaluation: one :class:`Problem` per theorem statement, read from JSONL.

:func:`load_problems` reads the shapes in common use, one JSON object per line:

* miniF2F for Lean 4 (``name``, ``split``, ``header``, ``formal_statement`` ending in ``:= by``);
* DeepSeek-Prover-V1.5's miniF2F and ProofNet (the same, plus ``informal_prefix`` and ``goal``);
* miniF2F for Coq/Rocq (``formal_statement`` a ``Theorem … .`` sentence, ``header`` of ``Require`` lines);
* our own records (:meth:`Problem.to_json`: the fields below, ``proof`` optional, ``extra`` a mapping).

Keys it does not know (``goal``, ``compiles_with_coq_8_16``, ``file``, ...) are kept in ``Problem.extra``.
The backend is the record's ``backend``, else the ``backend`` argument, else guessed from the text (Lean:
``import`` lines, ``theorem … :=``; Coq: ``Require``, a ``Theorem … .`` sentence). A record that cannot be
read is reported with its line number, all such lines at once, and nothing is returned.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .provers.backend import backend_names, guess_backend
from .provers.base import Backend, Theorem


class ProblemFileError(ValueError):
    """A problem file holds records that cannot be read; ``errors`` are ``(line number, why)``."""

    def __init__(self, path: str | Path, errors: list[tuple[int, str]]):
        shown = "\n".join(f"  {path}:{line}: {why}" for line, why in errors[:10])
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        super().__init__(f"{len(errors)} bad record(s) in {path}:\n{shown}{more}")
        self.path = str(path)
        self.errors = errors


@dataclass(frozen=True)
class Problem:
    """A theorem to prove, with what prompts need besides the statement.

    ``formal_statement`` is the declaration without proof (Coq ``Theorem t : P.``; Lean ``theorem t : P := by``);
    ``informal_prefix`` is the natural-language statement when the set has one (DeepSeek-Prover's ``/-- … -/``
    block, kimina's informal problem); ``module`` is where a stdlib theorem came from (used for held-out splits);
    ``proof`` is a known human proof when there is one (for teaching the tiny model, never shown at evaluation).
    """

    name: str
    formal_statement: str
    header: str = ""
    backend: Backend = "coq"
    split: str = ""
    informal_prefix: str = ""
    module: str = ""
    proof: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def theorem(self) -> Theorem:
        return Theorem(self.name, self.formal_statement, self.header, self.backend)

    @property
    def key(self) -> str:
        """A name unique within a problem set: ``module.name`` when the module is known (two stdlib files
        may both define ``Z_dec``), else ``name``; a name already qualified by its module (a library corpus's
        ``mathcomp.ssreflect.bigop.Monoid.mulC_id``) is kept as it is. Win rates and reports are keyed by it."""
        if not self.module or self.name.startswith(self.module + "."):
            return self.name
        return f"{self.module}.{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in ("", {}, None)}

    @classmethod
    def from_json(cls, record: Mapping[str, Any], *, backend: str | None = None) -> Problem:
        """One record of any of the shapes above. Raises ``ValueError`` saying what is wrong."""
        if not isinstance(record, Mapping):
            raise ValueError(f"expected a JSON object, got {type(record).__name__}")
        name = record.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("missing or empty `name`")
        statement = record.get("formal_statement", record.get("statement"))
        if not isinstance(statement, str) or not statement.strip():
            raise ValueError(f"{name}: missing or empty `formal_statement`")
        values: dict[str, Any] = {"name": name, "formal_statement": statement}
        for key in ("header", "split", "informal_prefix", "module", "proof"):
            v = record.get(key)
            if v is None:
                continue
            if not isinstance(v, str):
                raise ValueError(f"{name}: `{key}` must be a string, got {type(v).__name__}")
            values[key] = v
        values["backend"] = _backend_of(record, values, backend)
        extra = record.get("extra", {})
        if not isinstance(extra, Mapping):
            raise ValueError(f"{name}: `extra` must be an object")
        known = {f.name for f in fields(cls)} | {"statement"}
        values["extra"] = {**{k: v for k, v in record.items() if k not in known}, **extra}
        return cls(**values)


def _backend_of(record: Mapping[str, Any], values: Mapping[str, str], given: str | None) -> Backend:
    name = values["name"]
    stated = record.get("backend")
    if stated is not None and stated not in backend_names():
        raise ValueError(f"{name}: unknown backend {stated!r}; valid: {backend_names()}")
    if given is not None and given not in backend_names():
        raise ValueError(f"unknown backend {given!r}; valid: {backend_names()}")
    if stated is not None and given is not None and stated != given:
        raise ValueError(f"{name}: the record says backend {stated!r} but {given!r} was asked for")
    chosen = stated or given or guess_backend(values.get("header", ""), values["formal_statement"])
    if chosen is None:
        raise ValueError(f"{name}: cannot tell whether this is Lean or Coq; pass backend=")
    return chosen  # type: ignore[return-value]


def load_problems(
    path: str | Path, *, backend: str | None = None, split: str | None = None, limit: int | None = None
) -> list[Problem]:
    """Problems of a JSONL file in file order; ``split`` keeps records of that split, ``limit`` the first N
    kept. Blank lines are skipped. Raises :class:`ProblemFileError` listing every bad line."""
    path = Path(path)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    out: list[Problem] = []
    errors: list[tuple[int, str]] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                problem = Problem.from_json(json.loads(line), backend=backend)
            except json.JSONDecodeError as e:
                errors.append((lineno, f"not JSON: {e.msg} at column {e.colno}"))
                continue
            except ValueError as e:
                errors.append((lineno, str(e)))
                continue
            if split is None or problem.split == split:
                out.append(problem)
    if errors:
        raise ProblemFileError(path, errors)
    return out if limit is None else out[:limit]


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> int:
    """Write records as JSONL (to a temporary file, then renamed, so a crash never leaves half a file); returns
    how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def save_problems(problems: Iterable[Problem], path: str | Path) -> None:
    """Write JSONL that :func:`load_problems` reads back equal (:func:`write_jsonl`)."""
    write_jsonl((p.to_json() for p in problems), path)
