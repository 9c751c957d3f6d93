"""Experiment trackers, one per name of a recipe's ``logger:`` list (verl's ``trainer.logger``, TRL's ``report_to``).

Every training loop logs through its :class:`~proofrl.train.rundir.RunDir`, which hands each step's metrics, the
resolved config (once, at the start) and the final summary to the trackers named in the recipe:

* ``jsonl``: ``metrics.jsonl``, one line per step keyed by the loop's step name (``step``, ``round``, ``epoch``),
  and ``summary.json``; the line a resumed run truncates to its checkpoint;
* ``tensorboard``: ``tb/`` (scalars; the config and summary as text);
* ``console``: one line per step with the numeric metrics;
* ``wandb``: :mod:`wandb` (``pip install -e ".[tracking]"``): project ``WANDB_PROJECT`` or ``proofrl``, the
  run's files under the run folder, ``WANDB_MODE=offline`` honoured; a resumed run continues the same run id;
* ``mlflow``: :mod:`mlflow` (the same extra): ``MLFLOW_TRACKING_URI`` when set, else a local file store in
  ``RUN/mlruns`` (``MLFLOW_ALLOW_FILE_STORE`` is switched on for that default only); the config as flattened
  params and ``config.yaml``, the summary as ``summary.json`` and final metrics; a resumed run continues the same
  run id.

A new tracker is one class registered in :data:`LOGGERS`.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from ..registry import Registry

log = logging.getLogger(__name__)

LOGGERS: Registry[Callable[..., Any]] = Registry("logger")
"""tracker classes by name: :class:`Tracker` subclasses, built as ``cls(run: RunDir)``"""

DEFAULT_LOGGERS = ("jsonl", "tensorboard")


def numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric metrics (bools and text left out): what scalar trackers take."""
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (mlflow params)."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f'logger {module}: {module} is not installed here: pip install -e ".[tracking]"') from None


class Tracker:
    """What every tracker takes; each method does nothing unless the tracker has a use for it."""

    def __init__(self, run: Any):
        self.run = run

    def config(self, cfg: dict[str, Any]) -> None:
        pass

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        pass

    def summary(self, summary: Mapping[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


@LOGGERS.register("jsonl")
class JsonlTracker(Tracker):
    def log(self, step: int, metrics: Mapping[str, Any]) -> None:  # config.yaml is the run folder's own
        with open(self.run.metrics_path, "a") as f:
            f.write(json.dumps({self.run.step_key: step, **metrics}, default=str) + "\n")

    def summary(self, summary: Mapping[str, Any]) -> None:
        (self.run.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))


@LOGGERS.register("tensorboard")
class TensorBoardTracker(Tracker):
    def __init__(self, run: Any):
        super().__init__(run)
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is a dependency, but a broken install should not stop training
            log.warning("tensorboard is not importable; not logging to TensorBoard")
            self.writer = None
        else:
            self.writer = SummaryWriter(str(run.out / "tb"))

    def config(self, cfg: dict[str, Any]) -> None:
        if self.writer is not None:
            import yaml

            self.writer.add_text("config", "```\n" + yaml.safe_dump(cfg, sort_keys=False) + "```")

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self.writer is not None:
            for k, v in numbers(metrics).items():
                self.writer.add_scalar(k, v, step)
            self.writer.flush()

    def summary(self, summary: Mapping[str, Any]) -> None:
        if self.writer is not None:
            self.writer.add_text("summary", "```\n" + json.dumps(summary, indent=2, default=str) + "\n```")
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@LOGGERS.register("console")
class ConsoleTracker(Tracker):
    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        from rich.console import Console

        shown = "  ".join(f"{k} {v:.4g}" for k, v in numbers(metrics).items())
        Console().print(f"{self.run.step_key} {step}: {shown}", highlight=False, soft_wrap=True)


@LOGGERS.register("wandb")
class WandbTracker(Tracker):
    def __init__(self, run: Any):
        super().__init__(run)
        wandb = _need("wandb")
        self.wb = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "proofrl"),
            name=run.name,
            dir=str(run.out),
            id=run.tracker_id("wandb", lambda: uuid.uuid4().hex[:12]),
            resume="allow",
            reinit="create_new",
        )

    def config(self, cfg: dict[str, Any]) -> None:
        self.wb.config.update(cfg, allow_val_change=True)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.wb.log(numbers(metrics), step=step)

    def summary(self, summary: Mapping[str, Any]) -> None:
        self.wb.summary.update({k: v for k, v in flatten(summary).items() if isinstance(v, (int, float, str, bool))})

    def close(self) -> None:
        self.wb.finish()


@LOGGERS.register("mlflow")
class MlflowTracker(Tracker):
    def __init__(self, run: Any):
        super().__init__(run)
        mlflow = _need("mlflow")
        uri = os.environ.get("MLFLOW_TRACKING_URI") or (run.out / "mlruns").resolve().as_uri()
        if uri.startswith("file:") and not os.environ.get("MLFLOW_TRACKING_URI"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # the local default; a server URI needs none
        self.client = mlflow.tracking.MlflowClient(uri)
        self.uri = uri

        def start() -> str:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "proofrl")
            exp = self.client.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(name)
            return self.client.create_run(exp_id, run_name=run.name).info.run_id

        self.run_id = run.tracker_id("mlflow", start)

    def config(self, cfg: dict[str, Any]) -> None:
        params = {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in flatten(cfg).items()}
        existing = self.client.get_run(self.run_id).data.params
        new = {k: str(v)[:6000] for k, v in params.items() if k not in existing}  # a resumed run keeps its params
        from mlflow.entities import Param

        if new:
            self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in new.items()])
        self.client.log_dict(self.run_id, cfg, "config.yaml")

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        vals = [Metric(_mlflow_key(k), v, now, step) for k, v in numbers(metrics).items()]
        if vals:
            self.client.log_batch(self.run_id, metrics=vals)

    def summary(self, summary: Mapping[str, Any]) -> None:
        self.client.log_dict(self.run_id, json.loads(json.dumps(summary, default=str)), "summary.json")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _mlflow_key(key: str) -> str:
    """mlflow's metric names allow letters, digits, ``_ - . space / :``; anything else (``pass@1``) becomes ``_``."""
    return "".join(c if c.isalnum() or c in "_-. /:" else "_" for c in key)
