"""The reward function for verl's reward loop: proofrl's verifier and the recipe's reward, one sample at a time.

verl 0.9.1's ``RewardLoopWorker`` (a Ray actor, ``reward.num_workers`` of them) hands each sample to its reward
manager's ``async run_single``, which awaits a coroutine ``compute_score`` directly. Configure it through verl's
Hydra config::

    reward.custom_reward_function.path=<this file>  reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.recipe=kimina            # the reward: and verify: sections
    +reward.custom_reward_function.reward_kwargs.prompt_format=kimina     # how the proof is cut from the text

Each row carries its problem record in ``extra_info`` (``name``, ``header``, ``formal_statement``, ``backend``,
as :meth:`proofrl.problems.Problem.from_json` reads it). The score is
R = 1[verdict valid] × 1[format ok] (the second factor only when the recipe sets ``reward.format``), computed by
:class:`proofrl.rewards.combine.RewardFn`; every sample returns the same keys (verl takes the extra keys from the
first sample): ``score``, ``status`` (the verdict), ``reasons`` (its reasons joined by ``; ``), ``format_ok``
(kimina's format rules; True when the recipe has none).

Where verdicts come from (``via``):

* ``pool`` (default): a :class:`~proofrl.verification.Verifier` with its own prover pool, one per process and
  backend. Each of verl's reward workers then holds its own pool, which splits header affinity
  ``num_workers`` ways;
* ``server``: a running ``proofrl serve`` (``server_url``, ``api_key``), shared by every worker;
* ``ray``: the named Ray verification actor (``ray_actor``), one per node, shared by every worker
  (:mod:`proofrl.distributed.verification`, the Ray part of verification).

verl loads this file by its path (``load_extern_object``), outside the package: imports here are absolute, and
that copy hands ``compute_score`` over to the package's module, so a process keeps one set of verifiers.

A sample whose record is broken gets an ``error`` verdict naming what is wrong and a score of 0; the batch goes
on. A verifier that cannot be reached raises (:class:`~proofrl.verification.ServerUnavailable`): a reward of 0
for every sample would hide it.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import json
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field

from proofrl.errors import ConfigError
from proofrl.problems import Problem
from proofrl.provers.base import Status, Verdict
from proofrl.rewards.combine import RewardFn, Sample
from proofrl.rewards.compose import RewardConfig, reward_config_from_dict
from proofrl.rewards.format import FormatError, check_format
from proofrl.schema import Config, one_of, validate
from proofrl.verification import Verifier

RAW = "raw"
"""``prompt_format`` for a completion that is the proof itself (the default)"""
EXTRA_KEYS = ("score", "status", "reasons", "format_ok")
"""the keys of every sample's result, in order"""
VERL_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer"})
"""keyword arguments verl's reward managers add on their own; accepted and unused"""


def _formats() -> list[str]:
    from proofrl.policy.prompts import FORMATS

    return [RAW, *FORMATS]


class JudgeConfig(Config):
    """``reward_kwargs``: how to judge. Left out, ``timeout``, ``workers``, ``server_url`` and ``api_key`` come
    from the recipe's ``verify:`` section (without a recipe, :class:`~proofrl.train.config.VerifyConfig`'s
    defaults), ``reward`` from its ``reward:`` section."""

    prompt_format: Annotated[str, one_of(_formats)] = RAW
    """``raw``: the completion is the proof; else a proofrl prompt format whose rule extracts it"""
    recipe: str = ""
    """a proofrl recipe (name or YAML path) whose ``reward:`` and ``verify:`` sections apply"""
    reward: dict[str, Any] | None = None
    """a ``reward:`` section given here (wins over the recipe's)"""
    via: Literal["pool", "server", "ray"] | None = None
    """where verdicts come from; None: ``server`` when a server URL is known, else ``pool``"""
    server_url: str | None = None
    api_key: str | None = None
    timeout: Annotated[float, Field(gt=0.0)] | None = None
    """seconds per proof (None: the recipe's, else 60)"""
    workers: Annotated[int, Field(ge=1)] | None = None
    """prover processes of a ``pool`` verifier (None: the recipe's, else 2)"""
    ray_actor: str = "proofrl-verifier"
    """the named verification actor for ``via: ray``"""


class Judge:
    """Resolved settings: the prompt format, the recipe's reward, and where verdicts come from."""

    def __init__(self, settings: JudgeConfig):
        from proofrl.policy.prompts import get_format
        from proofrl.train.config import ErrorCorrectionConfig, VerifyConfig, load_recipe

        recipe = load_recipe(settings.recipe) if settings.recipe else None
        verify = recipe.verify if recipe else VerifyConfig()
        reward: RewardConfig = (
            reward_config_from_dict(settings.reward)
            if settings.reward is not None
            else recipe.reward
            if recipe
            else RewardConfig()
        )
        self.correction = recipe.rollout.error_correction if recipe else ErrorCorrectionConfig()
        """kimina's second-turn limits (feedback characters, prompt tokens, errors quoted) for the agent loop"""
        self.format = None if settings.prompt_format == RAW else get_format(settings.prompt_format)
        self.reward = RewardFn(reward)
        self.rules = reward.format
        self.server_url = verify.server_url if settings.server_url is None else settings.server_url
        self.api_key = verify.api_key if settings.api_key is None else settings.api_key
        self.timeout = settings.timeout or verify.timeout
        self.workers = settings.workers or verify.workers
        self.via = settings.via or ("server" if self.server_url else "pool")
        if self.via == "server" and not self.server_url:
            raise ConfigError(
                "reward_kwargs.via=server needs reward_kwargs.server_url (or the recipe's verify.server_url)"
            )
        self.ray_actor = settings.ray_actor

    # -- verdicts -----------------------------------------------------------------------------------------
    def proof_of(self, problem: Problem, text: str) -> str | None:
        """The proof the prover checks: the whole completion (``raw``), or what the prompt format extracts."""
        return text if self.format is None else self.format.extract(problem, text)

    async def verify(self, problem: Problem, proof: str | None) -> Verdict:
        if self.via == "ray":
            from proofrl.distributed.verification import averify_on_ray  # the Ray part; imported only when used

            (verdict,) = await averify_on_ray(
                [(problem, proof)], backend=problem.backend, timeout=self.timeout, actor_name=self.ray_actor
            )
            return verdict
        verifier = _verifier(self.via, problem.backend, self.server_url, self.api_key, self.timeout, self.workers)
        # The Verifier is synchronous; a thread keeps the worker's event loop free for the other samples, and
        # the pool's one backlog (or the server) groups the concurrent checks by header.
        (verdict,) = await asyncio.to_thread(verifier.verify, [(problem, proof)])
        return verdict

    # -- the result verl records --------------------------------------------------------------------------
    def result(self, problem: Problem, text: str, proof: str | None, verdict: Verdict) -> dict[str, Any]:
        """``score`` and the extra keys (:data:`EXTRA_KEYS`) for one judged completion."""
        score = self.reward.sample(Sample(problem, text, verdict, proof))
        format_ok = self.rules is None or check_format(text, problem, self.rules) is FormatError.NONE
        return {
            "score": float(score),
            "status": verdict.status.value,
            "reasons": "; ".join(verdict.reasons),
            "format_ok": bool(format_ok),
        }

    async def judge(self, problem: Problem, text: str) -> tuple[str | None, Verdict, dict[str, Any]]:
        """``(proof, verdict, result)`` for one completion of ``problem``."""
        try:
            proof = self.proof_of(problem, text)
        except ValueError as e:  # a prompt format for the other backend
            verdict = Verdict(Status.ERROR, (str(e),))
            return None, verdict, self.result(problem, text, None, verdict)
        verdict = await self.verify(problem, proof)
        return proof, verdict, self.result(problem, text, proof, verdict)

    async def score(self, record: Any, text: str) -> dict[str, Any]:
        """Judge one completion of the problem ``record`` (verl's ``extra_info``)."""
        try:
            problem = problem_of(record)
        except ValueError as e:
            return _broken(f"extra_info: {e}")
        return (await self.judge(problem, text))[2]


def problem_of(record: Any) -> Problem:
    """The problem in a row's ``extra_info``; ValueError naming what is missing or wrong."""
    if not isinstance(record, Mapping):
        raise ValueError(
            f"expected the problem record (name, header, formal_statement, backend), got {type(record).__name__}"
        )
    return Problem.from_json(record)


def _broken(reason: str) -> dict[str, Any]:
    return {"score": 0.0, "status": Status.ERROR.value, "reasons": reason, "format_ok": False}


@lru_cache(maxsize=32)
def _judge(key: str) -> Judge:
    return Judge(validate(JudgeConfig, json.loads(key), "reward_kwargs"))


def judge_for(kwargs: Mapping[str, Any]) -> Judge:
    """The :class:`Judge` for these ``reward_kwargs`` (one per distinct settings per process); a
    :class:`ConfigError` naming a wrong or unknown key."""
    settings = {k: v for k, v in kwargs.items() if k not in VERL_KWARGS}
    try:
        key = json.dumps(settings, sort_keys=True, default=_plain)
    except TypeError as e:
        raise ConfigError(f"reward_kwargs: {e}") from None
    return _judge(key)


def _plain(value: Any) -> Any:
    """OmegaConf containers (verl hands ``reward_kwargs`` over as a dict of them) as plain data."""
    try:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    except Exception:
        raise TypeError(f"{type(value).__name__} is not plain data") from None


_verifiers: dict[tuple, Verifier] = {}
_verifiers_lock = threading.Lock()


def _verifier(via: str, backend: str, server_url: str, api_key: str, timeout: float, workers: int) -> Verifier:
    """One Verifier per process and settings: its pool (or HTTP client) outlives the samples."""
    key = (via, backend, server_url, api_key, timeout, workers)
    with _verifiers_lock:
        if key not in _verifiers:
            if via == "server":
                _verifiers[key] = Verifier(
                    server_url=server_url, api_key=api_key or None, timeout=timeout, backend=backend
                )
            else:
                from proofrl.preflight import require_backend

                require_backend(backend)
                _verifiers[key] = Verifier(backend=backend, workers=workers, timeout=timeout)
        return _verifiers[key]


@atexit.register
def close_verifiers() -> None:
    """Close every Verifier this process made (their prover pools)."""
    with _verifiers_lock:
        for v in _verifiers.values():
            v.close()
        _verifiers.clear()


async def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any, **kwargs: Any
) -> dict[str, Any]:
    """verl's reward function: the recipe's reward for ``solution_str`` on the problem in ``extra_info``.

    ``data_source`` and ``ground_truth`` are not used (the proof assistant is the ground truth). ``kwargs`` are
    :class:`JudgeConfig` (``prompt_format``, ``recipe``, ``via``, …). Returns ``score`` and the keys of
    :data:`EXTRA_KEYS`, the same for every sample."""
    return await judge_for(kwargs).score(extra_info, solution_str)


if __name__ != "proofrl.verl.reward":  # loaded by path (verl's custom_reward_function): one cache per process
    # the package's own function (and its caches) replaces this copy's
    compute_score = importlib.import_module("proofrl.verl.reward").compute_score
