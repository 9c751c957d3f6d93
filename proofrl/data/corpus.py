"""A Coq library's corpus: every file of an installed library replayed in its real context
(:mod:`proofrl.data.file_steps`), written as LeanDojo-style state→tactic data and whole-proof problems, with
fixed splits (:mod:`proofrl.data.corpus_splits`) and a data card.

Run: ``python -m proofrl.data.corpus --library mathcomp --out DIR [--files N] [--workers 2]`` (``--library stdlib``:
the standard library, every file but ``Init``'s, in path order). ``DIR`` gets

* ``files/<file>.json``: one replayed file (written when the file is done: a second run skips the files
  whose source has not changed, so an interrupted extraction resumes);
* ``transitions.jsonl``: one line per tactic (``theorem``, ``file``, ``module``, ``step``, ``state_before``,
  ``tactic``, ``state_after``, goal counts, ``structural``, ``premises``, ``premises_unresolved``);
* ``problems.jsonl``: one line per lemma stepped cleanly, in the problem shape (``name``, ``header``,
  ``formal_statement``, ``proof``) where ``header`` is left empty and ``context_chars`` says how much of
  ``file`` comes before the statement (:func:`problem_with_context` fills it: the text is not repeated per
  lemma);
* ``splits/<split>/{train,valid,test}.jsonl`` (transitions) and ``splits.json`` (lemma → side);
* ``report.json`` (files, lemmas, stepped cleanly, transitions, failures by kind, seconds) and ``README.md``
  (the data card).

Sources are read where Coq installed them (``$(coqc -where)/user-contrib``, the standard library's
``$(coqc -where)/theories``): nothing is copied.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProofrlError
from ..problems import write_jsonl


@dataclass(frozen=True)
class Library:
    name: str
    folder: str
    """under :attr:`base`"""
    logical: str
    """the logical prefix of its modules"""
    package: str
    """the Debian package that installs it"""
    base: str = "user-contrib"
    """where under ``$(coqc -where)`` its sources are (the standard library's: ``theories``)"""
    skip: tuple[str, ...] = ()
    """folders left out (the stdlib's ``Init``, compiled without the prelude it defines)"""

    @property
    def root(self) -> Path:
        """The folder its files' paths are relative to (``file`` in the corpus records)."""
        from .coq_stdlib import coq_lib_dir

        return user_contrib() if self.base == "user-contrib" else coq_lib_dir() / self.base


LIBRARIES = {
    lib.name: lib
    for lib in (
        Library("mathcomp", "mathcomp/ssreflect", "mathcomp.ssreflect", "libcoq-mathcomp-ssreflect"),
        Library("mathcomp-algebra", "mathcomp/algebra", "mathcomp.algebra", "libcoq-mathcomp-algebra"),
        Library("stdpp", "stdpp", "stdpp", "libcoq-stdpp"),
        Library("hammer", "Hammer", "Hammer", "libcoq-hammer"),
        Library("coquelicot", "Coquelicot", "Coquelicot", "libcoq-coquelicot"),
        Library("stdlib", "", "Coq", "libcoq-stdlib", base="theories", skip=("Init",)),
    )
}
"""the libraries known by name (Debian 12, Coq 8.16)"""


class LibraryMissing(ProofrlError):
    """A library that is not installed: one line naming its package."""


def user_contrib() -> Path:
    from .coq_stdlib import coq_lib_dir

    return coq_lib_dir() / "user-contrib"


def library(name: str) -> Library:
    if name not in LIBRARIES:
        raise LibraryMissing(f"unknown library {name!r}; known: {', '.join(LIBRARIES)}")
    return LIBRARIES[name]


def library_files(name: str) -> list[Path]:
    """The ``.v`` files of an installed library, sorted by path; raises :class:`LibraryMissing` (naming the
    apt package) when its sources are not there."""
    lib = library(name)
    root = lib.root / lib.folder
    files = (
        sorted(f for f in root.rglob("*.v") if f.relative_to(root).parts[0] not in lib.skip) if root.is_dir() else []
    )
    if not files:
        raise LibraryMissing(f"library {name!r} is not installed (apt-get install {lib.package})")
    return files


def module_of(lib: Library, rel: str) -> str:
    """``mathcomp/ssreflect/seq.v`` → ``mathcomp.ssreflect.seq``"""
    inner = Path(rel).relative_to(lib.folder).with_suffix("")
    return ".".join([lib.logical, *inner.parts])


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def replay_file(lib: Library, path: Path, out: Path, *, timeout: float, memory_mb: int | None) -> dict[str, Any]:
    """Replay one file (or read its finished result from ``out/files``); returns the stored record."""
    from .file_steps import Replayer

    rel = str(path.relative_to(lib.root))
    text = path.read_text(encoding="utf-8", errors="replace")
    done = out / "files" / (rel + ".json")
    sha = _sha(text)
    if done.is_file():
        try:
            rec = json.loads(done.read_text())
            if rec.get("sha256") == sha:
                rec["resumed"] = True
                return rec
        except (OSError, json.JSONDecodeError):
            pass  # a damaged result: replay again
    r = Replayer(text, file=rel, module=module_of(lib, rel), timeout=timeout, memory_mb=memory_mb).run()
    rec = {
        "file": rel,
        "module": r.module,
        "sha256": sha,
        "seconds": round(r.seconds, 2),
        "error": r.error,
        "vernacular_failures": r.vernacular_failures,
        "lemmas": [
            {
                "name": lem.name,
                "statement": lem.statement,
                "context_chars": lem.context_chars,
                "proof": lem.proof,
                "failure": lem.failure,
                "seconds": round(lem.seconds, 3),
                "top_level": lem.top_level,
                "transitions": lem.transitions,
            }
            for lem in r.lemmas
        ],
    }
    done.parent.mkdir(parents=True, exist_ok=True)
    tmp = done.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec, ensure_ascii=False))
    os.replace(tmp, done)
    return rec


@dataclass
class CorpusReport:
    library: str
    files: int = 0
    files_failed: int = 0
    lemmas: int = 0
    clean: int = 0
    transitions: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    """failure kind (``admitted``, ``statement``, ``tactic``, ``kernel``, ``timeout``, ``crash``: see
    :data:`~proofrl.data.file_steps.FAILURE_KINDS`) → lemmas;
    ``vernacular`` counts commands outside proofs"""
    premises: int = 0
    premises_unresolved: int = 0
    seconds: float = 0.0
    """wall seconds of this run"""
    replay_seconds: float = 0.0
    """summed over files (the replays of earlier, resumed runs included)"""
    resumed_files: int = 0


def build_corpus(
    name: str,
    out: str | Path,
    *,
    files: int | None = None,
    only: Sequence[str] | None = None,
    workers: int = 2,
    timeout: float = 20.0,
    memory_mb: int | None = 4096,
    seed: int = 0,
    progress: bool = True,
) -> CorpusReport:
    """Replay the library's files (the first ``files`` of them, or those whose path ends with one of
    ``only``) ``workers`` at a time, then write the JSONL, the splits, the report and the card."""
    from rich.console import Console

    from ..progress import progress_bar
    from .corpus_splits import write_splits

    lib = library(name)
    paths = library_files(name)
    if only:
        paths = [p for p in paths if any(str(p).endswith(o) for o in only)]
    if files is not None:
        paths = paths[:files]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    recs: dict[str, dict[str, Any]] = {}
    with progress_bar(detail="{task.fields[info]}", console=Console(stderr=True), disable=not progress) as bar:
        task = bar.add_task(f"replaying {name}", total=len(paths), info="")
        # the largest files first, so the last worker is not left alone with the longest one
        order = sorted(paths, key=lambda p: -p.stat().st_size)
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="corpus") as ex:
            futs = {ex.submit(replay_file, lib, p, out, timeout=timeout, memory_mb=memory_mb): p for p in order}
            for f in as_completed(futs):
                p = futs[f]
                try:
                    rec = f.result()
                except (OSError, ProofrlError) as e:  # one file never stops the run
                    rec = {
                        "file": str(p.relative_to(lib.root)),
                        "error": f"crash: {e}"[:300],
                        "lemmas": [],
                        "vernacular_failures": [],
                        "seconds": 0.0,
                    }
                recs[rec["file"]] = rec
                bar.update(task, advance=1, info=rec["file"])
    ordered = [recs[k] for k in sorted(recs)]
    rep = CorpusReport(name, files=len(ordered), failures=Counter())
    transitions: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rec in ordered:
        rep.files_failed += rec.get("error") is not None
        rep.replay_seconds += rec.get("seconds", 0.0)
        rep.resumed_files += bool(rec.get("resumed"))
        rep.failures["vernacular"] += len(rec.get("vernacular_failures", []))
        for lem in rec["lemmas"]:
            rep.lemmas += 1
            if lem["failure"]:
                rep.failures[lem["failure"].split(":", 1)[0]] += 1
                continue
            rep.clean += 1
            key = f"{rec['module']}.{lem['name']}"
            if key in seen:  # the same name twice (a Local lemma redefined): told apart by where it is
                key = f"{key}@{lem['context_chars']}"
                for t in lem["transitions"]:
                    t["theorem"] = key
            seen.add(key)
            for t in lem["transitions"]:
                rep.premises += len(t["premises"])
                rep.premises_unresolved += len(t["premises_unresolved"])
            transitions.extend(lem["transitions"])
            problems.append(
                {
                    "name": key,
                    "backend": "coq",
                    "header": "",
                    "formal_statement": lem["statement"],
                    "proof": lem["proof"],
                    "file": rec["file"],
                    "module": rec["module"],
                    "context_chars": lem["context_chars"],
                    "file_sha256": rec["sha256"],
                    "premises": sorted({p for t in lem["transitions"] for p in t["premises"]}),
                    "steps": len(lem["transitions"]),
                    "top_level": lem.get("top_level", False),
                }
            )
    rep.transitions = len(transitions)
    rep.failures = dict(rep.failures)
    rep.seconds = round(time.monotonic() - t0, 2)
    rep.replay_seconds = round(rep.replay_seconds, 2)
    write_jsonl(transitions, out / "transitions.jsonl")
    write_jsonl(problems, out / "problems.jsonl")
    split_counts = write_splits(out, problems, transitions, seed=seed)
    (out / "report.json").write_text(json.dumps(asdict(rep), indent=2))
    (out / "README.md").write_text(data_card(lib, rep, split_counts, [r["file"] for r in ordered], seed=seed))
    return rep


def data_card(
    lib: Library, rep: CorpusReport, splits: dict[str, dict[str, int]], files: list[str], *, seed: int
) -> str:
    """The corpus' card: what it holds, how it was made and split, the versions it was made with."""
    from ..provers.coq.prover import coq_version

    version = _package_version(lib.package)
    rows = "\n".join(
        f"| {s} | {c.get('train', 0)} | {c.get('valid', 0)} | {c.get('test', 0)} |" for s, c in splits.items()
    )
    fails = ", ".join(f"{k} {v}" for k, v in sorted(rep.failures.items())) or "none"
    return f"""# {lib.name} corpus

State→tactic transitions and whole-proof problems from `{lib.logical}` (Debian package `{lib.package}`
{version}), replayed with {coq_version()} sentence by sentence in each file's own context.

| | |
|---|---|
| files | {rep.files} ({rep.files_failed} stopped early) |
| lemmas | {rep.lemmas} |
| stepped cleanly | {rep.clean} |
| transitions | {rep.transitions} |
| premises named (resolved / kept as text) | {rep.premises} / {rep.premises_unresolved} |
| failures by kind | {fails} |
| seconds (wall, this run / replay summed) | {rep.seconds} / {rep.replay_seconds} |

## Splits (lemmas; seed {seed})

| split | train | valid | test |
|---|---|---|---|
{rows}

* `random`: lemmas shuffled with the seed, 10% valid, 10% test.
* `novel_premises`: every valid/test lemma uses a premise that no training lemma uses (premises taken in a
  seeded order; all lemmas using one go to the held-out side together until it holds 10% each).
* `by_file`: whole files held out (10% valid, 10% test of the files, seeded).

Each lemma's transitions follow it. Load with Hugging Face `datasets`:
`load_dataset("json", data_files={{"train": "splits/random/train.jsonl", ...}})`.

## Files

{", ".join(f"`{f}`" for f in files)}
"""


def _package_version(package: str) -> str:
    import subprocess

    try:
        v = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], check=False, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return v.stdout.strip() if v.returncode == 0 else ""


def problem_with_context(record: dict[str, Any], lib: Library | None = None) -> dict[str, Any]:
    """A problem record with ``header`` filled: the text of its file before the statement, read from the
    installed source of ``lib`` (default: a library under ``user-contrib``; it must be the version the corpus
    was made from)."""
    path = (lib.root if lib is not None else user_contrib()) / record["file"]
    text = path.read_text(encoding="utf-8", errors="replace")
    if record.get("file_sha256") and _sha(text) != record["file_sha256"]:
        raise LibraryMissing(f"{record['file']} changed since the corpus was made; rebuild the corpus")
    return {**record, "header": text[: record["context_chars"]]}


def _judge_states(statement: str) -> bool:
    """The Coq judge takes this sentence as a statement (a ``Lemma``, ``Theorem``, ... with a name)."""
    from ..provers.base import Theorem
    from ..provers.coq.plan import Plan, plan_proof

    return isinstance(plan_proof(Theorem("", statement), "", max_chars=1, forbidden_tactics=()), Plan)


CORPORA_ENV = "PROOFRL_CORPORA"
"""the folder holding built corpora, one sub-folder per library (default ``corpora`` in the working directory)"""


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def training_lemmas(folder: str | Path, split: str = "novel_premises") -> dict[str, list[tuple[str, str]]]:
    """The ``(qualified name, statement)`` of a built corpus's training lemmas in ``split``, by module, in corpus
    order (``folder/splits/SPLIT/problems-train.jsonl``; none when the file is not there)."""
    path = Path(folder) / "splits" / split / "problems-train.jsonl"
    lemmas: dict[str, list[tuple[str, str]]] = {}
    for rec in _records(path) if path.is_file() else []:
        lemmas.setdefault(rec["module"], []).append((rec["name"], rec["formal_statement"]))
    return lemmas


def corpus_training_side(
    spec: str, *, root: str | Path | None = None
) -> tuple[list[dict[str, Any]], dict[str, list[tuple[str, str]]]]:
    """What a prover may remember when proving ``coq-lib:NAME:SIDE``: the transitions of its split's training
    side and those lemmas (:func:`training_lemmas`; nothing of the test side). Raises :class:`FileNotFoundError`
    naming the command that builds the corpus."""
    parts = spec.split(":")
    split = (parts[2] if len(parts) == 3 else "").rpartition("/")[0] or "novel_premises"
    folder = Path(root or os.environ.get(CORPORA_ENV) or "corpora") / parts[1]
    train = folder / "splits" / split / "train.jsonl"
    if not train.is_file() or not (folder / "splits" / split / "problems-train.jsonl").is_file():
        raise FileNotFoundError(
            f"no corpus for {parts[1]!r} at {folder} (build it: python -m proofrl.data.corpus --library {parts[1]} "
            f"--out {folder})"
        )
    return _records(train), training_lemmas(folder, split)


def corpus_problems(spec: str, *, root: str | Path | None = None) -> list[Any]:
    """The problems named ``coq-lib:NAME:SIDE`` (the ``novel_premises`` split) or ``coq-lib:NAME:SPLIT/SIDE``,
    read from the corpus built into ``root/NAME`` (``$PROOFRL_CORPORA``, else ``corpora``), each with its
    file's text before it as the header. A lemma stated inside sections and modules is stated in them (their
    variables, hypotheses and local notations in force); the judge closes what its header leaves open after
    the proof (:mod:`proofrl.provers.coq.blocks`), so its constant is checked generalised over the section
    variables it uses. Lemmas whose statement the judge does not take (a ``Definition`` or ``Let`` proved by
    tactics, a ``Goal``) are left out."""
    from ..problems import Problem
    from .corpus_splits import SIDES, SPLITS

    parts = spec.split(":")
    split, _, side = (parts[2] if len(parts) == 3 else "").rpartition("/")
    split = split or "novel_premises"
    if len(parts) != 3 or parts[0] != "coq-lib" or side not in SIDES or split not in SPLITS:
        raise ValueError(
            f"unknown problem set {spec!r}; valid: coq-lib:LIBRARY:SIDE or coq-lib:LIBRARY:SPLIT/SIDE "
            f"with SIDE one of {', '.join(SIDES)} and SPLIT one of {', '.join(SPLITS)}"
        )
    name = parts[1]
    folder = Path(root or os.environ.get(CORPORA_ENV) or "corpora") / name
    path = folder / "splits" / split / f"problems-{side}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no corpus for {name!r} at {folder} (build it: python -m proofrl.data.corpus "
            f"--library {name} --out {folder})"
        )
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if not _judge_states(rec["formal_statement"]):
            continue
        full = problem_with_context(rec, LIBRARIES.get(name))
        out.append(
            Problem(
                name=full["name"],
                formal_statement=full["formal_statement"],
                header=full["header"],
                split=side,
                module=full["module"],
                proof=full["proof"],
                extra={"file": full["file"], "premises": full["premises"], "top_level": full.get("top_level", False)},
            )
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofrl.data.corpus", description=__doc__.split("\n")[0])
    ap.add_argument("--library", required=True, help=f"one of {', '.join(LIBRARIES)}")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--files", type=int, default=None, help="only the first N files (sorted by path)")
    ap.add_argument("--only", action="append", default=None, help="only files whose path ends with this (repeatable)")
    ap.add_argument("--workers", type=int, default=2, help="files replayed at once (one coqidetop each)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per sentence")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        r = build_corpus(
            args.library,
            args.out,
            files=args.files,
            only=args.only,
            workers=args.workers,
            timeout=args.timeout,
            seed=args.seed,
        )
    except LibraryMissing as e:
        print(f"proofrl corpus: {e}")
        return 2
    print(
        f"{r.library}: {r.files} files, {r.lemmas} lemmas, {r.clean} stepped cleanly, {r.transitions} transitions, "
        f"failures {r.failures}, {r.seconds:.1f} s ({r.resumed_files} files resumed) → {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
