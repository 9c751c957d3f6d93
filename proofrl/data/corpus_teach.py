"""Teach the tiny tactic model on library corpora: the training side of one split of each corpus built by
``python -m proofrl.data.corpus`` (MathComp, std++, ...), plus stdlib transitions if given, in one run.

``python -m proofrl.data.corpus_teach --corpora DIR1,DIR2 [--stdlib train.jsonl] --out MODEL --hidden 128
--epochs N [--max-pairs P]`` writes the model (``proofrl search --policy hf:MODEL``) and ``MODEL/teach.json``
(pairs per source, wall and CPU seconds, load average before and after). The teaching itself is
:func:`~proofrl.policy.tactic.train_tiny_tactic_model` (the one SFT loop); this module only gathers the
training transitions. Only training-side transitions are read: the corpus's held-out lemmas (``coq-lib:NAME:test``)
and the stdlib held-out modules stay unseen. ``--max-pairs`` draws a seeded sample of the pooled transitions
(a CPU budget: an epoch costs time in proportion to the pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class CorpusNotFound(ValueError):
    """A corpus directory without the split's training transitions."""


def corpus_train_transitions(corpus: str | Path, split: str = "novel_premises") -> list[dict[str, Any]]:
    """Transitions of the training lemmas of ``split`` (``corpus/splits/SPLIT/train.jsonl``)."""
    path = Path(corpus) / "splits" / split / "train.jsonl"
    if not path.is_file():
        raise CorpusNotFound(
            f"{corpus}: no {split} training transitions (expected {path}; build the corpus with "
            "python -m proofrl.data.corpus --library NAME --out DIR)"
        )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def gather(
    corpora: Sequence[str | Path],
    *,
    split: str = "novel_premises",
    stdlib: str | Path | None = None,
    max_pairs: int | None = None,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The pooled training transitions and how many each source gave (before any ``max_pairs`` draw)."""
    from .tactics import read_transitions

    pooled: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for c in corpora:
        ts = corpus_train_transitions(c, split)
        counts[Path(c).name] = len(ts)
        pooled += ts
    if stdlib is not None:
        if not Path(stdlib).is_file():
            raise CorpusNotFound(
                f"{stdlib}: no such stdlib transitions file (train.jsonl of python -m proofrl.data.tactics --out DIR)"
            )
        ts = read_transitions(stdlib)
        counts["stdlib"] = len(ts)
        pooled += ts
    if max_pairs is not None and len(pooled) > max_pairs:
        keep = sorted(random.Random(seed).sample(range(len(pooled)), max_pairs))
        pooled = [pooled[i] for i in keep]
    return pooled, counts


def training_retriever(
    transitions: Sequence[dict[str, Any]], corpora: Sequence[str | Path], *, split: str = "novel_premises"
) -> Any:
    """The retrieval a model is taught with: a memory of the training ``transitions`` and the statements of the
    training side's lemmas (each corpus's ``problems-train.jsonl``, and the stdlib modules the transitions come
    from), so nothing held out is in a prompt."""
    from ..policy.memory import ProofMemory
    from ..policy.retrieval import Retriever
    from .corpus import training_lemmas
    from .splits import stdlib_lemmas

    premises = ProofMemory(cap=None)
    for c in corpora:
        for pairs in training_lemmas(c, split).values():
            premises.add_many(((statement, name) for name, statement in pairs), online=False)
    modules = {str(t.get("module")) for t in transitions if "file" not in t}  # the stdlib's (a corpus's have files)
    lemmas = stdlib_lemmas()
    premises.add_many(((st, name) for m in modules & set(lemmas) for name, st in lemmas[m]), online=False)
    return Retriever(ProofMemory.from_transitions(transitions, cap=None), premises)


def _cpu_seconds() -> float:
    """CPU seconds of this process (all its threads: torch's intra-op pool) and its children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def teach_on_corpora(
    corpora: Sequence[str | Path],
    out: str | Path,
    *,
    split: str = "novel_premises",
    stdlib: str | Path | None = None,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    epochs: int = 1,
    max_pairs: int | None = None,
    max_state_chars: int = 1000,
    lr: float = 2e-3,
    batch: int = 32,
    seed: int = 0,
    retrieval: bool = False,
) -> dict[str, Any]:
    """Teach the tiny tactic model on the corpora's training transitions; returns (and writes to
    ``out/teach.json``) what it cost. Defaults follow the demo's assets (hidden 64, lr 2e-3, states at most
    1000 characters, batches grouped by length). ``retrieval``: each prompt holds the state's retrieved
    context (:mod:`proofrl.policy.retrieval`; :func:`training_retriever`), and the model reads it when searching
    beside the k-NN source (``knn:MEM+hf:OUT``)."""
    from ..policy.tactic import train_tiny_tactic_model

    transitions, counts = gather(corpora, split=split, stdlib=stdlib, max_pairs=max_pairs, seed=seed)
    retriever = training_retriever(transitions, corpora, split=split) if retrieval else None
    load_before = os.getloadavg()
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    train_tiny_tactic_model(
        transitions,
        out,
        epochs=epochs,
        seed=seed,
        lr=lr,
        batch=batch,
        max_state_chars=max_state_chars,
        group_by_length=True,
        model={"hidden": hidden, "layers": layers, "heads": heads, "vocab_size": 1024},
        retriever=retriever,
    )
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    losses = json.loads((Path(out) / "sft_losses.json").read_text())
    report = {
        "sources": counts,
        "transitions": len(transitions),
        "pairs": losses["pairs"],
        "split": split,
        "model": {"hidden": hidden, "layers": layers, "heads": heads},
        "epochs": epochs,
        "retrieval": retrieval,
        "losses": losses["losses"],
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "seed": seed,
    }
    (Path(out) / "teach.json").write_text(json.dumps(report, indent=2))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofrl.data.corpus_teach", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--corpora", required=True, help="corpus directories, comma-separated (python -m proofrl.data.corpus --out)"
    )
    ap.add_argument(
        "--stdlib",
        type=Path,
        default=None,
        help="stdlib transitions to add (train.jsonl of python -m proofrl.data.tactics)",
    )
    ap.add_argument(
        "--split", default="novel_premises", help="which split's training side (random, novel_premises, by_file)"
    )
    ap.add_argument("--out", required=True, type=Path, help="model directory")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--max-pairs", type=int, default=None, help="teach on a seeded sample of this many transitions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--retrieval",
        action="store_true",
        help="teach with each state's retrieved tactics and premises in its prompt (search with knn:MEM+hf:OUT)",
    )
    args = ap.parse_args(argv)
    corpora = [c for c in args.corpora.split(",") if c]
    try:
        r = teach_on_corpora(
            corpora,
            args.out,
            split=args.split,
            stdlib=args.stdlib,
            hidden=args.hidden,
            layers=args.layers,
            epochs=args.epochs,
            max_pairs=args.max_pairs,
            seed=args.seed,
            retrieval=args.retrieval,
        )
    except (CorpusNotFound, ValueError) as e:
        print(f"proofrl corpus_teach: {e}")
        return 2
    print(
        f"taught hidden {args.hidden} on {r['pairs']} pairs ({r['sources']}), {args.epochs} epochs: loss "
        f"{r['losses'][-1]:.2f}, {r['wall_seconds']:.0f} s wall, {r['cpu_seconds']:.0f} s CPU → {args.out} "
        f"(proofrl search --policy hf:{args.out})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
