"""The run folder every training loop writes, in one place:

* ``config.yaml``: the resolved recipe;
* ``metrics.jsonl`` and the other trackers of the recipe's ``logger:`` list (:mod:`.tracking`), one record per
  step keyed by the loop's own step name (``step``, ``round``, ``epoch``), and the final summary;
* ``checkpoints/PREFIXNNNN/``: atomic checkpoints (:mod:`.checkpoints`), the newest ``keep`` kept.

The loops counted in steps (whole-proof and step-level GRPO) run through :meth:`RunDir.fit`: resume from the newest
checkpoint, then :meth:`RunDir.run_steps`: log, progress, checkpoint every N steps and after the last, summary.

A run killed at any moment resumes from its newest complete checkpoint: :meth:`RunDir.start` with the step it
resumed from drops the log lines written after it (each step is logged once), and wandb/mlflow continue the
same run (their ids are kept in ``trackers.json``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import yaml

from . import checkpoints
from .tracking import DEFAULT_LOGGERS, LOGGERS


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

    def latest_checkpoint(self) -> Path | None: ...
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
        resumed = loop.latest_checkpoint() is not None
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

    def latest(self, prefix: str, marker: str) -> Path | None:
        return checkpoints.latest(self.checkpoint_dir, prefix, marker)
