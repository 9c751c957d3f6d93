"""What the demo's proof-state parts share: tactic transitions from the stdlib's human proofs and the tiny
tactic model taught on the training side, built once in ``ROOT/tactic-assets/`` and reused.

Whichever part runs first builds them; a later part (or a later ``proofrl demo --part …``) finds
``ready.json`` written with the same settings and loads them (other settings: built again). Held-out
theorems are those of the held-out modules, the sides every stdlib set shares (decided over the unfiltered
library before the proof-length cut: :func:`proofrl.data.splits.stdlib_sides`), so no part ever searches or
scores a theorem whose module the model was taught on, nor does an evaluation on ``coq-stdlib:held-out``.

The settings are chosen by measurement to fit the demo's budget on 2 CPU cores (``benchmarks/tactic_teaching.py``
and docs/search.md, "The demo's tactic assets"): teaching costs far more than stepping, and most of an epoch
went on padding, so batches are grouped by length and the states a tiny model can use are kept short.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..problems import Problem

SMOKE_ASSETS: dict[str, Any] = dict(
    prefixes=("Coq.Bool.",),
    max_proof_chars=80,
    epochs=3,
    batch=16,
    lr=3e-3,
    held_out_theorems=3,
    train_theorems=8,
    model={"hidden": 64, "layers": 1, "heads": 4, "vocab_size": 400},
)
"""the smoke size's tactic assets (``AssetsConfig`` fields), shared by ``proofrl bench --smoke`` and the benchmarks'
``--smoke``: one small stdlib module's short proofs, a tiny model taught in seconds"""


@dataclass(frozen=True)
class TacticAssets:
    folder: Path
    train_transitions: Path
    """``train.jsonl``: transitions of training-module proofs (what the tiny tactic model was taught on)"""
    held_out_transitions: Path
    """``held-out.jsonl``: transitions of held-out-module proofs (states for evaluation)"""
    model_dir: Path
    """the tiny tactic model (``hf:`` + this is a search policy)"""
    train_problems: list[Problem]
    """training-module theorems (for search-and-learn and online step-level RL)"""
    held_out_problems: list[Problem]
    """held-out-module theorems (for proved counts): a seeded draw over every held-out module, in corpus order"""
    build: dict[str, Any] = field(default_factory=dict)
    """``ready.json``: the settings and what building took (stepping and teaching seconds, pairs, losses)"""

    @property
    def policy_spec(self) -> str:
        return f"hf:{self.model_dir}"

    def held_out_pool(self, n: int) -> list[Problem]:
        """The first ``n`` of :attr:`held_out_problems`, then (for ``n`` beyond them) the held-out side's other
        theorems under the same settings, in corpus order, each name once: a larger pool whose first theorems are
        the draw every earlier run used. Never more than the side holds."""
        held = list(self.held_out_problems)
        if n <= len(held):
            return held[:n]
        settings = built_settings(self.folder.parent) or SETTINGS
        from .tactics import stdlib_tactic_problems

        taken = {p.name for p in held}
        side = stdlib_tactic_problems(
            max_proof_chars=settings.max_proof_chars, seed=int(self.build.get("seed", 0)), prefixes=settings.prefixes
        )
        rest = []
        for p in side:  # a name twice (two modules' lemmas) once: results are keyed by name
            if p.split == "held-out" and p.name not in taken:
                taken.add(p.name)
                rest.append(p)
        return held + rest[: n - len(held)]

    def memory_dir(self) -> Path:
        """A proof memory (:mod:`proofrl.policy.memory`) of the training transitions, built once in
        ``folder/memory``. It holds the training modules' proofs only, so a held-out theorem's own proof is never
        in it."""
        from ..policy.memory import MANIFEST, ProofMemory

        memory = self.folder / "memory"
        if not (memory / MANIFEST).is_file():
            ProofMemory.from_transitions([self.train_transitions]).save(memory)
        return memory

    def memory_policy_spec(self) -> str:
        """``knn:MEMORY+hf:MODEL``: k-NN proposals over :meth:`memory_dir` beside the tiny model."""
        return f"knn:{self.memory_dir()}+{self.policy_spec}"


@dataclass(frozen=True)
class AssetsConfig:
    max_proof_chars: int = 400
    """only human proofs at most this long are stepped (short proofs: the ones a tiny model can learn)"""
    max_state_chars: int = 1000
    """teach only on states at most this long (longer ones are rare here and cost padding)"""
    epochs: int = 6
    batch: int = 32
    lr: float = 2e-3
    model: dict[str, int] = field(default_factory=lambda: {"hidden": 64, "layers": 2, "heads": 4, "vocab_size": 1024})
    """hidden 64 for 6 epochs proved more held-out theorems than hidden 128 for 4, in two thirds of the CPU time
    (docs/search.md, "The demo's tactic assets")"""
    held_out_theorems: int = 100
    train_theorems: int = 200
    prefixes: tuple[str, ...] | None = None
    """stdlib module prefixes (None: the core stdlib); tests use one small module"""
    limit: int | None = None
    """step only the first N proofs (tests)"""

    def key(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))


SETTINGS = AssetsConfig()
"""what :func:`tactic_assets` uses when no settings are given (a test may swap it for smaller ones)"""


def tactic_assets(
    root: Path, *, seed: int = 0, workers: int = 2, console: Any = None, settings: AssetsConfig | None = None
) -> TacticAssets:
    """Build (once) or load the shared tactic data and tiny tactic model under ``root/tactic-assets``."""
    from rich.console import Console

    from .tactics import build_tactic_data

    settings = settings or SETTINGS
    console = console or Console()
    folder = Path(root) / "tactic-assets"
    data, model = folder / "data", folder / "tiny-tactic-model"
    ready = folder / "ready.json"
    want = {"settings": settings.key(), "seed": seed}
    build = json.loads(ready.read_text()) if ready.is_file() else {}
    if {k: build.get(k) for k in want} != want:
        if build:
            console.print(f"[yellow]tactic assets in {folder} were built with other settings; building them again[/]")
        ready.unlink(missing_ok=True)
        t = time.perf_counter()
        s = build_tactic_data(
            data,
            workers=workers,
            max_proof_chars=settings.max_proof_chars,
            seed=seed,
            console=console,
            prefixes=settings.prefixes,
            limit=settings.limit,
        )
        stepping = time.perf_counter() - t
        console.print(
            f"[bold]tactic data[/]: {s.transitions} transitions from {s.clean} human proofs ({stepping:.0f} s)"
        )
        taught = teach(data / "train.jsonl", model, settings, seed=seed, console=console)
        build = want | {
            "transitions": s.transitions,
            "by_split": s.by_split,
            "stepping_seconds": round(stepping, 1),
            **taught,
            "seconds": round(time.perf_counter() - t, 1),
        }
        ready.write_text(json.dumps(build, indent=2))
    train_p, held_p = asset_problems(settings, seed)
    return TacticAssets(folder, data / "train.jsonl", data / "held-out.jsonl", model, train_p, held_p, build)


def built_settings(root: Path) -> AssetsConfig | None:
    """The settings the assets under ``root/tactic-assets`` were built with (None: none built yet). Pass them
    as ``settings=`` to load assets shared between runs whatever the defaults are now, never rebuilding them."""
    ready = Path(root) / "tactic-assets" / "ready.json"
    if not ready.is_file() or "settings" not in (build := json.loads(ready.read_text())):
        return None
    s = build["settings"]
    return AssetsConfig(**{**s, "prefixes": tuple(s["prefixes"]) if s.get("prefixes") else None})


def asset_problems(settings: AssetsConfig, seed: int = 0) -> tuple[list[Problem], list[Problem]]:
    """The training and held-out theorems: seeded draws of ``train_theorems`` and ``held_out_theorems`` over all
    modules of each side, in corpus order. A draw, not the first N: corpus order groups modules, so the first
    200 training theorems would come from a handful of modules (``Coq.Arith.Cantor``, ``Wf_nat``, …)."""
    from .tactics import stdlib_tactic_problems

    problems = stdlib_tactic_problems(max_proof_chars=settings.max_proof_chars, seed=seed, prefixes=settings.prefixes)

    def draw(side: str, n: int) -> list[Problem]:
        pool = [p for p in problems if p.split == side]
        return [pool[i] for i in sorted(random.Random(seed).sample(range(len(pool)), min(n, len(pool))))]

    train, held = draw("train", settings.train_theorems), draw("held-out", settings.held_out_theorems)
    return train, held


def teach(
    train_jsonl: Path,
    model_dir: Path,
    settings: AssetsConfig,
    *,
    seed: int = 0,
    console: Any = None,
    retriever: Any = None,
) -> dict[str, Any]:
    """Teach the tiny tactic model on ``train.jsonl`` with a progress bar; returns pairs, losses and seconds.
    ``retriever``: each prompt holds the state's retrieved context (:mod:`proofrl.policy.retrieval`)."""
    from ..policy.tactic import tactic_pairs, train_tiny_tactic_model
    from ..progress import progress_bar
    from .tactics import read_transitions

    train = read_transitions(train_jsonl)
    n = len(tactic_pairs(train, max_state_chars=settings.max_state_chars))  # (the count needs no context)
    t, cpu = time.perf_counter(), time.process_time()
    with progress_bar(
        "teaching the tiny tactic model", detail="{task.fields[info]}", remaining=True, console=console
    ) as bar:
        task = bar.add_task("", total=settings.epochs * n, info="")
        train_tiny_tactic_model(
            train,
            model_dir,
            epochs=settings.epochs,
            seed=seed,
            lr=settings.lr,
            batch=settings.batch,
            max_state_chars=settings.max_state_chars,
            model=settings.model,
            group_by_length=True,
            retriever=retriever,
            on_batch=lambda k: bar.advance(task, k),
            on_epoch=lambda e, loss: bar.update(task, info=f"epoch {e + 1}: loss {loss:.2f}"),
        )
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu  # CPU: what a shared machine's load hides
    losses = json.loads((model_dir / "sft_losses.json").read_text())["losses"]
    if console is not None:
        console.print(
            f"[bold]tiny tactic model[/]: {n} pairs, {settings.epochs} epochs, loss {losses[0]:.2f} → "
            f"{losses[-1]:.2f} ({seconds:.0f} s)"
        )
    return {
        "pairs": n,
        "losses": [round(x, 4) for x in losses],
        "teaching_seconds": round(seconds, 1),
        "teaching_cpu_seconds": round(cpu, 1),
    }
