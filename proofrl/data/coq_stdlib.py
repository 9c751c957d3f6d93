"""Theorems and their human proofs from the Coq standard library sources that Debian installs with Coq.

Each record is a standalone problem in the miniF2F JSONL shape (``name``, ``header``, ``formal_statement``,
``proof``) plus ``module``, ``file`` and ``line``. The header imports the theorem's own module (so the
definitions and notations before it exist) and reopens the scopes the file opened. That module holds the
theorem itself and everything after it too, so the header ends by placing the problem where its file states
it (:func:`~proofrl.provers.coq.placement.placement_line`): the judge refuses a proof that depends on the
theorem or on anything its module declares after it. Theorems inside a ``Section`` (they may use section
variables) or a ``Module`` are left out, as are proofs that contain commands other than tactics, and proofs
closed by ``Admitted``/``Abort``.

Nothing is copied into the project: the sources are read where ``coqc -where`` says they are.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from ..provers.coq.placement import placement_line
from ..provers.coq.rules import forbidden_reason
from ..provers.coq.sentences import SplitError, split_sentences

_DECL = re.compile(r"^(?:#\[[^\]]*\]\s*)?(Theorem|Lemma|Fact|Remark|Corollary|Proposition)\s+([\w']+)(?![\w'])", re.S)
_OPEN = re.compile(r"^(?:#\[[^\]]*\]\s*)?(?:Local\s+|Global\s+)?Open\s+Scope\s+([\w]+)\s*\.$")
_BLOCK_OPEN = re.compile(r"^(?:#\[[^\]]*\]\s*)?(Section|Module(?!\s+Type)|Module\s+Type)\s+([\w']+)")
_BLOCK_END = re.compile(r"^End\s+([\w']+)\s*\.$")
# Top-level sentences that shape how later statements and proofs read; replayed in the header.
_CONTEXT = re.compile(
    r"^(?:#\[[^\]]*\]\s*)?(?:(?:From\s+\S+\s+)?Require\b|Import\b|Export\b|(?:Local\s+)?(?:Set|Unset)\s+(?:Implicit|Strict|Asymmetric|Contextual|Maximal|Reversible)|Implicit\s+Types?\b|Local\s+(?:Notation|Infix)\b)"
)


CORE_PREFIXES = (
    "Coq.Arith.",
    "Coq.Bool.",
    "Coq.Lists.",
    "Coq.NArith.",
    "Coq.ZArith.",
    "Coq.PArith.",
    "Coq.Logic.",
    "Coq.QArith.",
)
"""Modules whose theorems need few libraries: the default sample for checks and benchmarks."""
STDLIB_ALL = ("Coq.",)
"""Every module of the standard library (Reals, Numbers, FSets, … beside the core ones)."""


def coq_lib_dir() -> Path:
    out = subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def module_path(lib: Path, file: Path) -> str:
    rel = file.relative_to(lib / "theories").with_suffix("")
    return "Coq." + ".".join(rel.parts)


def theorems_in_file(lib: Path, file: Path) -> Iterator[dict]:
    try:
        text = file.read_text(encoding="utf-8")
        sentences = split_sentences(text)
    except (UnicodeDecodeError, SplitError):
        return
    module = module_path(lib, file)
    context: list[str] = []
    depth = 0
    i = 0
    while i < len(sentences):
        s = sentences[i].text
        if _BLOCK_OPEN.match(s):
            depth += ":=" not in s  # ``Module M := F X.`` opens nothing
        elif _BLOCK_END.match(s):
            depth = max(0, depth - 1)
        elif m := _OPEN.match(s):
            if depth == 0:
                context.append(f"Open Scope {m.group(1)}.")
        elif depth == 0 and _CONTEXT.match(s):
            context.append(s)
        elif (m := _DECL.match(s)) and depth == 0:
            j = i + 1
            body: list[str] = []
            while (
                j < len(sentences)
                and sentences[j].text not in ("Qed.", "Defined.", "Admitted.", "Abort.")
                and not _DECL.match(sentences[j].text)
            ):
                body.append(sentences[j].text)
                j += 1
            end = sentences[j].text if j < len(sentences) else ""
            tactics = body[1:] if body and re.match(r"Proof\b", body[0]) else body
            clean = end in ("Qed.", "Defined.") and tactics and not any(forbidden_reason(t) for t in tactics)
            if clean:
                statement = re.sub(r"^#\[[^\]]*\]\s*", "", s)
                header = _module_first(list(dict.fromkeys(context)), module)
                header += placement_line(f"{module}.{m.group(2)}") + "\n"
                yield {
                    "name": m.group(2),
                    "module": module,
                    "header": header,
                    "formal_statement": statement,
                    "proof": "Proof.\n" + "\n".join(tactics) + "\nQed.",
                    "file": str(file.relative_to(lib)),
                    "line": text.count("\n", 0, sentences[i].start) + 1,
                }
            i = j + 1
            continue
        i += 1


def _module_first(lines: list[str], module: str) -> str:
    """The file's own ``Require`` lines, then the module itself, then scopes, options and local notations."""
    req = [ln for ln in lines if re.match(r"(?:#\[[^\]]*\]\s*)?(?:From\s+\S+\s+)?Require\b", ln)]
    rest = [ln for ln in lines if ln not in req]
    own = f"Require Import {module}."
    return "\n".join([*(ln for ln in req if ln != own), own, *rest]) + "\n"


def load_stdlib(lib: Path | None = None, *, prefix: str = "Coq.", limit: int | None = None) -> list[dict]:
    """All extractable theorems of modules whose path starts with ``prefix`` (e.g. ``Coq.Arith.``),
    in a stable order (sorted by file)."""
    lib = lib or coq_lib_dir()
    out: list[dict] = []
    for file in sorted((lib / "theories").rglob("*.v")):
        if not module_path(lib, file).startswith(prefix):
            continue
        for rec in theorems_in_file(lib, file):
            out.append(rec)
            if limit is not None and len(out) >= limit:
                return out
    return out


def stdlib_sample(n: int, prefixes: tuple[str, ...] = CORE_PREFIXES) -> list[dict]:
    """``n`` theorems spread evenly over the modules under ``prefixes`` (deterministic)."""
    pool = [r for p in prefixes for r in load_stdlib(prefix=p)]
    return pool[:: max(1, len(pool) // n)][:n] if n else []
