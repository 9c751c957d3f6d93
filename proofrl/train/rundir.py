"""The run folder every training loop writes, in one place:

* ``config.yaml``: the resolved recipe;
* ``metrics.jsonl`` and the other trackers of the recipe's ``logger:`` list (:mod:`.tracking`), one record per
  step keyed by the loop's own step name (``step``, ``round``, ``epoch``), and the final summary;
* ``checkpoints/STEPKEY_NNNN/``: atomic checkpoints (:mod:`.checkpoints`), the newest ``keep`` kept.

The loops counted in steps (whole-proof and step-level GRPO) run through :meth:`RunDir.fit`: resume from the newest
checkpoint, then :meth:`RunDir.run_steps`: log, progress, checkpoint every N steps and after the last, summary.

A run killed at any moment resumes from its newest complete checkpoint: :meth:`RunDir.start` with the step it
resumed from drops the log lines written after it (each step is logged once), and wandb/mlflow continue the
same run (their ids are kept in ``trackers.json``). A resumed run's settings are compared with the folder's
``config.yaml`` first, as torchtune compares a resumed recipe: a difference in what a run computes is refused in
one line naming the keys (:func:`settings_changed`); one in how long it runs or how it is logged
(:data:`RESUMABLE`) is allowed and said."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import yaml

from ..errors import ConfigError
from ..search.config import upgrade_saved
from . import checkpoints
from .config import RENAMED
from .tracking import DEFAULT_LOGGERS, LOGGERS, flatten

log = logging.getLogger(__name__)

RESUMABLE = (
    "steps",
    "optim.epochs",
    "checkpoint_every",
    "keep_checkpoints",
    "logger",
    "progress",
    "out",
    "name",
)
"""settings (and the settings under them) a resumed run may change: how long it runs (EVA counts in
``optim.epochs``), how often it saves, how it is logged and shown, where its folder is (the folder itself is how
it was found)"""


def settings_changed(before: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(refused, allowed)``: the dotted keys whose values differ between a run folder's saved settings and a
    resumed run's, as ``key: old -> new``; those under :data:`RESUMABLE` are allowed, the others refused. A saved
    key that moved (:data:`~proofrl.train.config.RENAMED`, and the search's engine sections:
    :func:`~proofrl.search.config.upgrade_saved`) is compared at its place now."""
    if isinstance(before.get("search"), Mapping):
        before = {**before, "search": upgrade_saved(before["search"])}
    a, b = flatten(before), flatten(now)
    for old, new in RENAMED.items():
        if old in a and new not in a:
            a[new] = a.pop(old)
    refused: list[str] = []
    allowed: list[str] = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "(unset)") == b.get(key, "(unset)"):
            continue
        line = f"{key}: {a.get(key, '(unset)')!r} -> {b.get(key, '(unset)')!r}"
        free = any(key == r or key.startswith(r + ".") for r in RESUMABLE)
        (allowed if free else refused).append(line)
    return refused, allowed


def truncate_log(path: Path, key: str, step: int) -> None:
    """Drop the lines of a JSONL log whose ``key`` (the loop's step name) is past ``step``, the checkpoint a run
    resumes from: a run killed after logging a step but before checkpointing it logs that step again."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line).get(key, 0) <= step]
    path.write_text("".join(line + "\n" for line in keep))


class SteppedLoop(Protocol):
    """A training loop counted in steps, as :meth:`RunDir.fit` drives it."""

    cfg: Any  # .steps, .checkpoint_every
    step: int

    def resume(self) -> int: ...
    def save_checkpoint(self) -> Path: ...


class RunDir:
    """One run folder (see the module docstring). ``logs``: other JSONL logs of the loop (``tactics.jsonl``),
    truncated with ``metrics.jsonl`` on resume."""

    def __init__(
        self,
        out: str | Path,
        *,
        step_key: str = "step",
        loggers: Sequence[str] = DEFAULT_LOGGERS,
        name: str = "",
        logs: Sequence[str] = (),
    ):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.step_key, self.name, self.logs = step_key, name or self.out.name, tuple(logs)
        self.logger_names = tuple(dict.fromkeys(("jsonl", *loggers)))  # jsonl always: resume and summaries read it
        for n in self.logger_names:
            LOGGERS.get(n)  # an unknown name is one line before anything runs
        self.trackers: list[Any] = []

    @property
    def metrics_path(self) -> Path:
        return self.out / "metrics.jsonl"

    @property
    def checkpoint_dir(self) -> Path:
        return self.out / "checkpoints"

    # -- the run --------------------------------------------------------------------------------------------
    def start(self, config: Any, resumed_from: int | None = None) -> RunDir:
        """Write ``config.yaml``, cut the logs back to ``resumed_from`` (a fresh run, None, starts them empty),
        open the trackers and give them the config."""
        cfg = config.to_dict() if hasattr(config, "to_dict") else dict(config)
        saved = self.out / "config.yaml"
        if resumed_from is not None and saved.is_file():
            refused, allowed = settings_changed(yaml.safe_load(saved.read_text()) or {}, cfg)
            if refused:
                more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
                raise ConfigError(
                    f"{self.out} was run with other settings than this resumed run: {'; '.join(refused[:3])}{more}; "
                    "resume with the folder's config.yaml, or start a new run folder"
                )
            for line in allowed:
                log.warning("resuming %s with %s", self.out, line)
        for p in (self.metrics_path, *(self.out / n for n in self.logs)):
            if resumed_from is None:
                p.write_text("")
            else:
                truncate_log(p, self.step_key, resumed_from)
        (self.out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        if not self.trackers:
            self.trackers = [LOGGERS.get(n)(self) for n in self.logger_names]
            for t in self.trackers:
                t.config(cfg)
        return self

    def fit(
        self,
        loop: SteppedLoop,
        step: Callable[[], tuple[int, dict[str, Any]]],
        progress: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        """What a step-counted loop's ``fit`` is: resume from its newest checkpoint when there is one
        (``loop.resume()``), then :meth:`run_steps` from ``loop.step`` to ``loop.cfg.steps``, saving with
        ``loop.save_checkpoint`` every ``loop.cfg.checkpoint_every`` steps."""
        resumed = self.latest() is not None
        loop.resume()
        return self.run_steps(
            loop.cfg,
            step,
            at=loop.step,
            total=loop.cfg.steps,
            resumed=resumed,
            progress=progress,
            checkpoint_every=loop.cfg.checkpoint_every,
            save=loop.save_checkpoint,
        )

    def run_steps(
        self,
        config: Any,
        step: Callable[[], tuple[int, dict[str, Any]]],
        *,
        at: int,
        total: int,
        checkpoint_every: int,
        save: Callable[[], Any],
        resumed: bool,
        progress: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        """The loop of a run counted in steps, from step ``at`` (its checkpoint's, when ``resumed``) to ``total``:
        :meth:`start`, then ``step()`` → (step number, metrics), each logged and shown to ``progress``; ``save()``
        (a checkpoint) every ``checkpoint_every`` steps and after the last; the last metrics as the summary."""
        self.start(config, resumed_from=at if resumed else None)
        done: list[tuple[int, dict[str, Any]]] = []
        try:
            while at < total:
                at, metrics = step()
                self.log(at, metrics)
                done.append((at, metrics))
                if progress is not None:
                    progress(at, metrics)
                if at % checkpoint_every == 0 or at == total:
                    save()
            self.summary({"steps": at, "last": done[-1][1] if done else {}})
        finally:
            self.close()
        return done

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        metrics = {k: v for k, v in metrics.items() if k != self.step_key}
        for t in self.trackers:
            t.log(step, metrics)

    def summary(self, summary: Mapping[str, Any]) -> None:
        for t in self.trackers:
            t.summary(summary)

    def close(self) -> None:
        trackers, self.trackers = self.trackers, []
        for t in trackers:
            t.close()

    def rows(self) -> list[dict[str, Any]]:
        """The records of ``metrics.jsonl``."""
        if not self.metrics_path.is_file():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

    def tracker_id(self, name: str, new: Callable[[], str]) -> str:
        """The id of tracker ``name``'s run in this folder (kept in ``trackers.json``), made by ``new`` once."""
        path = self.out / "trackers.json"
        ids = json.loads(path.read_text()) if path.is_file() else {}
        if name not in ids:
            ids[name] = new()
            path.write_text(json.dumps(ids))
        return ids[name]

    # -- checkpoints ----------------------------------------------------------------------------------------
    @contextmanager
    def checkpoint(self, name: str, keep: int) -> Iterator[Path]:
        """Write ``checkpoints/NAME`` atomically, then keep only the newest ``keep`` of its prefix."""
        final = self.checkpoint_dir / name
        with checkpoints.atomic_dir(final) as tmp:
            yield tmp
        checkpoints.prune(self.checkpoint_dir, name.rstrip("0123456789"), keep)

    def latest(self) -> Path | None:
        """The newest complete checkpoint ``STEPKEY_NNNN`` (one holding :data:`.checkpoints.STATE`), or None."""
        return checkpoints.latest(self.checkpoint_dir, f"{self.step_key}_")
