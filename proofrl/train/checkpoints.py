"""Checkpoint folders written so a run killed at any moment leaves its newest *complete* checkpoint behind:
everything goes into ``NAME.tmp`` first, which is renamed to ``NAME`` only once written. Shared by the
whole-proof trainer, step-level GRPO, search-and-learn and the EVA reward model.

One saved state for every loop (:func:`save_state` / :func:`load_state`): beside the weights, ``state.pt`` holds
``format``, the loop's counter (``step``, ``round``, ``epoch``) and what the loop names (``optimizer``,
``problems`` for the problem sampler, ``buffer``, ...), and ``rng``, every random stream in one layout
(:func:`rng_state`): Python's and torch's global generators, CUDA's where there is one, and the loop's own
``random.Random`` when it keeps one. A checkpoint in an older layout is refused in one line naming it."""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError

STATE = "state.pt"
"""the saved state's file in a checkpoint folder (its presence marks the checkpoint complete)"""
STATE_FORMAT = 1
OLD_MARKERS = ("trainer_state.pt", "learner_state.pt")
"""what checkpoints held before :data:`STATE` (refused, named)"""


def rng_state(own: random.Random | None = None) -> dict[str, Any]:
    """Every random stream a loop draws from: ``python`` and ``torch`` (global), ``cuda`` (all devices, None
    without CUDA), ``own`` (the loop's ``random.Random``, None when it keeps none)."""
    import torch

    return {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "own": own.getstate() if own is not None else None,
    }


def set_rng_state(state: dict[str, Any], own: random.Random | None = None) -> None:
    """Put back what :func:`rng_state` saved (CUDA's only where there is CUDA now)."""
    import torch

    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if own is not None and state.get("own") is not None:
        own.setstate(state["own"])


def save_state(folder: Path, *, own_rng: random.Random | None = None, **named: Any) -> Path:
    """``folder/state.pt``: ``format``, the ``named`` parts and ``rng`` (:func:`rng_state`)."""
    import torch

    path = Path(folder) / STATE
    torch.save({"format": STATE_FORMAT, **named, "rng": rng_state(own_rng)}, path)
    return path


def load_state(folder: Path) -> dict[str, Any]:
    """What :func:`save_state` wrote in ``folder`` (the caller restores the RNG with :func:`set_rng_state`)."""
    import torch

    state = torch.load(Path(folder) / STATE, weights_only=False)
    if state.get("format") != STATE_FORMAT:
        raise ConfigError(f"{folder}: saved state format {state.get('format')!r}, this proofrl reads {STATE_FORMAT}")
    return state


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield an empty ``final.tmp`` to write into; when the block ends without an error it replaces ``final``.
    A block that raises leaves ``final`` as it was (the stale ``.tmp`` is cleared by the next write)."""
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def complete(folder: Path, prefix: str, marker: str | None = None) -> list[Path]:
    """The finished folders ``folder/prefix*`` in name order (oldest first): never a ``.tmp``, and only those
    holding ``marker`` when one is given."""
    return sorted(
        p
        for p in folder.glob(f"{prefix}*")
        if p.is_dir() and not p.name.endswith(".tmp") and (marker is None or (p / marker).exists())
    )


def latest(folder: Path, prefix: str, marker: str = STATE) -> Path | None:
    """The newest complete checkpoint, or ``None``. A folder whose only checkpoints are in an older layout
    (:data:`OLD_MARKERS`) is refused in one line: resuming from it would silently start over."""
    done = complete(folder, prefix, marker)
    if done:
        return done[-1]
    for old in OLD_MARKERS:
        if found := complete(folder, prefix, old):
            raise ConfigError(
                f"{found[-1]} is a checkpoint of an older proofrl ({old}; this one saves {STATE}): "
                "start a new run folder, or finish the run with the proofrl that wrote it"
            )
    return None


def prune(folder: Path, prefix: str, keep: int) -> None:
    """Remove all but the newest ``keep`` finished folders ``folder/prefix*``."""
    for old in complete(folder, prefix)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
