"""Checkpoint folders written so a run killed at any moment leaves its newest *complete* checkpoint behind:
everything goes into ``NAME.tmp`` first, which is renamed to ``NAME`` only once written. Shared by the
whole-proof trainer, step-level GRPO and search-and-learn (each decides what goes inside)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


def latest(folder: Path, prefix: str, marker: str) -> Path | None:
    """The newest complete checkpoint, or ``None``."""
    done = complete(folder, prefix, marker)
    return done[-1] if done else None


def prune(folder: Path, prefix: str, keep: int) -> None:
    """Remove all but the newest ``keep`` finished folders ``folder/prefix*``."""
    for old in complete(folder, prefix)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
