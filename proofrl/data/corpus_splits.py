"""Fixed splits of a library corpus, the way LeanDojo Benchmark splits Mathlib, plus whole files held out.

Every split assigns whole lemmas (a lemma's transitions go with it) to ``train``, ``valid`` or ``test``:

* ``random``: the lemmas in a seeded order, the first ``fraction`` valid, the next ``fraction`` test.
* ``novel_premises``: each valid/test lemma uses at least one premise that no training lemma uses. Premises
  are visited in a seeded order; every lemma that uses the premise goes to the side being filled (valid, then
  test) until that side holds ``fraction`` of the lemmas. Since *all* users of such a premise are held out,
  the premise is novel to every held-out lemma that uses it.
* ``by_file``: files in a seeded order, the first ``fraction`` of files valid, the next test.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPLITS = ("random", "novel_premises", "by_file")
SIDES = ("train", "valid", "test")


def split_random(names: Sequence[str], *, fraction: float = 0.1, seed: int = 0) -> dict[str, str]:
    order = sorted(names)
    random.Random(seed).shuffle(order)
    k = round(len(order) * fraction)
    return {n: "valid" if i < k else "test" if i < 2 * k else "train" for i, n in enumerate(order)}


def split_novel_premises(premises: dict[str, Sequence[str]], *, fraction: float = 0.1, seed: int = 0) -> dict[str, str]:
    """``premises``: lemma → the premises its tactics name. Lemmas with no premise always train."""
    users: dict[str, list[str]] = defaultdict(list)
    for lemma, ps in sorted(premises.items()):
        for p in sorted(set(ps)):
            users[p].append(lemma)
    order = sorted(users)
    random.Random(seed).shuffle(order)
    side = {n: "train" for n in premises}
    target = round(len(premises) * fraction)
    filling: str | None = "valid"
    count = 0
    for p in order:
        if filling is None:
            break
        new = [u for u in users[p] if side[u] == "train"]
        if any(side[u] not in ("train", filling) for u in users[p]):
            continue  # already split across the other held-out side: keep it out of this one
        for u in new:
            side[u] = filling
        count += len(new)
        if count >= target:
            filling, count = ("test", 0) if filling == "valid" else (None, 0)
    return side


def split_by_file(files: dict[str, str], *, fraction: float = 0.1, seed: int = 0) -> dict[str, str]:
    """``files``: lemma → its file."""
    order = sorted(set(files.values()))
    random.Random(seed).shuffle(order)
    k = max(1, round(len(order) * fraction)) if len(order) >= 3 else 0
    file_side = {f: "valid" if i < k else "test" if i < 2 * k else "train" for i, f in enumerate(order)}
    return {n: file_side[f] for n, f in files.items()}


def novel_premise_violations(side: dict[str, str], premises: dict[str, Sequence[str]]) -> list[str]:
    """Held-out lemmas that use no premise absent from training (none for a correct ``novel_premises`` split)."""
    seen = {p for n, ps in premises.items() if side[n] == "train" for p in ps}
    return [n for n, s in side.items() if s != "train" and not set(premises[n]) - seen]


def assign(problems: Sequence[dict[str, Any]], *, seed: int = 0, fraction: float = 0.1) -> dict[str, dict[str, str]]:
    names = [p["name"] for p in problems]
    return {
        "random": split_random(names, fraction=fraction, seed=seed),
        "novel_premises": split_novel_premises(
            {p["name"]: p.get("premises", []) for p in problems}, fraction=fraction, seed=seed
        ),
        "by_file": split_by_file({p["name"]: p["file"] for p in problems}, fraction=fraction, seed=seed),
    }


def write_splits(
    out: Path, problems: Sequence[dict[str, Any]], transitions: Sequence[dict[str, Any]], *, seed: int = 0
) -> dict[str, dict[str, int]]:
    """``out/splits.json`` (split → lemma → side) and ``out/splits/<split>/<side>.jsonl`` (the transitions,
    then ``problems-<side>.jsonl``); returns lemma counts per split and side."""
    from ..problems import write_jsonl

    sides = assign(problems, seed=seed)
    (out / "splits.json").write_text(json.dumps(sides, indent=1))
    counts: dict[str, dict[str, int]] = {}
    for split, side in sides.items():
        counts[split] = {s: sum(v == s for v in side.values()) for s in SIDES}
        for s in SIDES:
            write_jsonl((t for t in transitions if side.get(t["theorem"]) == s), out / "splits" / split / f"{s}.jsonl")
            write_jsonl(
                ({**p, "split": s} for p in problems if side[p["name"]] == s),
                out / "splits" / split / f"problems-{s}.jsonl",
            )
    return counts


def load_split(corpus: str | Path, split: str = "random") -> Any:
    """The split's transitions as a Hugging Face ``DatasetDict`` (train, valid, test)."""
    from datasets import load_dataset

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
    d = Path(corpus) / "splits" / split
    return load_dataset("json", data_files={s: str(d / f"{s}.jsonl") for s in SIDES})
