"""What the demo's proof-state parts share: tactic transitions from the stdlib's human proofs and the tiny
tactic model taught on the training side, built once in ``ROOT/tactic-assets/`` and reused.

Whichever part runs first builds them; a later part (or a later ``proofrl demo --part …``) finds
``ready.json`` and loads them. Held-out theorems are those of the held-out modules (the whole-proof split),
so no part ever searches or scores a theorem whose module the model was taught on.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.problems import Problem


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
    """held-out-module theorems (for proved counts)"""

    @property
    def policy_spec(self) -> str:
        return f"hf:{self.model_dir}"


@dataclass(frozen=True)
class AssetSettings:
    max_proof_chars: int = 400
    """only human proofs at most this long are stepped (short proofs: the ones a tiny model can learn)"""
    epochs: int = 6
    held_out_theorems: int = 100
    train_theorems: int = 200


def tactic_assets(root: Path, *, seed: int = 0, workers: int = 2, console: Any = None,
                  settings: AssetSettings = AssetSettings()) -> TacticAssets:
    """Build (once) or load the shared tactic data and tiny tactic model under ``root/tactic-assets``."""
    from rich.console import Console

    from ..data.tactics import build_tactic_data, read_transitions, stdlib_tactic_problems
    from ..policy.tactic import train_tiny_tactic_model

    console = console or Console()
    folder = Path(root) / "tactic-assets"
    data, model = folder / "data", folder / "tiny-tactic-model"
    ready = folder / "ready.json"
    problems = stdlib_tactic_problems(max_proof_chars=settings.max_proof_chars, seed=seed)
    if not ready.is_file():
        t = time.perf_counter()
        s = build_tactic_data(data, workers=workers, max_proof_chars=settings.max_proof_chars, seed=seed, console=console)
        console.print(f"[bold]tactic data[/]: {s.transitions} transitions from {s.clean} human proofs ({s.seconds:.0f} s)")
        train = read_transitions(data / "train.jsonl")
        train_tiny_tactic_model(train, model, epochs=settings.epochs, seed=seed)
        losses = json.loads((model / "sft_losses.json").read_text())["losses"]
        console.print(f"[bold]tiny tactic model[/]: {settings.epochs} epochs, loss {losses[0]:.2f} → {losses[-1]:.2f}")
        ready.write_text(json.dumps({"seconds": time.perf_counter() - t, "transitions": s.transitions}))
    train_p = [p for p in problems if p.split == "train"][: settings.train_theorems]
    held_p = [p for p in problems if p.split == "held-out"][: settings.held_out_theorems]
    return TacticAssets(folder, data / "train.jsonl", data / "held-out.jsonl", model, train_p, held_p)
