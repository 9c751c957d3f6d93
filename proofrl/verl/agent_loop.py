"""kimina-prover-rl's error-correction turn as a verl agent loop, registered as ``proofrl_error_correction``.

One trajectory per sample, for chat models (the row's ``raw_prompt`` is a list of messages):

1. generate the first answer from the prompt;
2. judge it with proofrl (:mod:`proofrl.verl.reward`: the same prompt format, verifier and reward as the reward
   function); a valid proof, a completion with no extractable proof, or feedback over ``max_feedback_chars``
   ends the trajectory here;
3. append proofrl's error report as a user turn, exactly as the proofrl trainer builds it
   (:func:`proofrl.policy.correction.build_feedback`, :func:`~proofrl.policy.correction.second_turn_prompt`):
   these tokens get ``response_mask`` 0, so they are context, not loss;
4. generate one second answer, with ``max_tokens`` = the response budget left, and judge it; its result is the
   trajectory's reward. Only the tokens kept in the response (``response_length``) are ever judged, so the
   reward is always about text that is trained on.

The loop sets ``reward_score`` itself (verl then skips its reward loop for the sample) and records the same
extra keys as the reward function (``score``, ``status``, ``reasons``, ``format_ok``). Every generated token
keeps the log-prob the server returned, aligned with ``response_mask``; feedback tokens carry 0.

Difference from kimina's fork: there the second turn is a separate prompt drawn from a cache in a later step
(``rate`` 0.5 per slot), so it forms its own GRPO group. verl's V1 trainer no longer calls the dataset hook
the fork used; here the second turn follows in the same trajectory, and the first answer's tokens share the
final reward. ``rollout.error_correction.rate`` and ``cache_size`` therefore have no counterpart.

Use: ``actor_rollout_ref.rollout.agent.agent_loop_config_path=<proofrl/verl/agent_loops.yaml>`` (registers the
name in every agent-loop worker) and ``actor_rollout_ref.rollout.agent.default_agent_loop=proofrl_error_correction``
(or an ``agent_name`` column per row); the judge's settings are read from
``reward.custom_reward_function.reward_kwargs``.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from ..policy.correction import build_feedback, second_turn_prompt
from .reward import _broken, judge_for, problem_of

NAME = "proofrl_error_correction"


@register(NAME)
class ErrorCorrectionAgentLoop(AgentLoopBase):
    """First answer, proofrl's error report (masked), one second answer; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.response_length = self.rollout_config.response_length
        reward_kwargs = self.config.reward.custom_reward_function.get("reward_kwargs") or {}
        self.judge = judge_for(dict(reward_kwargs))

    async def _generate(self, ids: list[int], sampling_params: dict[str, Any]) -> Any:
        return await self.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=ids, sampling_params=sampling_params
        )

    def _kept_text(self, token_ids: list[int], start: int) -> str:
        """The text of an answer's tokens that stay in the response (which starts ``start`` tokens in) once it is
        cut to ``response_length``: a server that ignores ``max_tokens`` cannot get untrained text judged."""
        tok: Any = self.tokenizer  # verl annotates it as AutoTokenizer, the factory, not the tokenizer it made
        return tok.decode(token_ids[: max(0, self.response_length - start)], skip_special_tokens=True)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = [dict(m) for m in kwargs["raw_prompt"]]
        ids = await self.ct_build_initial_tokens(messages)
        first = await self._generate(ids, sampling_params)
        merged, mask, logps = await self.ct_merge_assistant_token(
            ids, first.token_ids, [], [] if first.log_probs else None, assistant_logprobs=first.log_probs or None
        )
        ids = merged.token_ids
        text = self._kept_text(first.token_ids, 0)
        turns = 1
        try:
            problem = problem_of(kwargs.get("extra_info"))
        except ValueError as e:
            result = _broken(f"extra_info: {e}")
        else:
            proof, verdict, result = await self.judge.judge(problem, text)
            ec = self.judge.correction
            feedback = None
            if not verdict.valid and proof is not None and len(mask) < self.response_length:
                feedback = build_feedback(
                    proof, verdict, max_errors=ec.max_errors, max_chars=ec.max_feedback_chars, backend=problem.backend
                )
            if feedback is not None:
                conversation = second_turn_prompt(messages, text, feedback)  # [..., assistant(text), user(feedback)]
                merged, mask2, logps2 = await self.ct_merge_context_msg(
                    conversation[:-1], conversation, ids, mask, logps
                )
                # kimina drops a second turn whose prompt is too long rather than cut it
                if len(merged.token_ids) <= ec.max_prompt_tokens and len(mask2) < self.response_length:
                    ids, mask, logps = merged.token_ids, mask2, logps2
                    used = len(mask)
                    # the second answer gets only the response budget left: what is judged is what is trained on
                    second = await self._generate(ids, {**sampling_params, "max_tokens": self.response_length - used})
                    merged, mask, logps = await self.ct_merge_assistant_token(
                        ids,
                        second.token_ids,
                        mask,
                        logps if logps else None,
                        assistant_logprobs=second.log_probs or None,
                    )
                    ids = merged.token_ids
                    text = self._kept_text(second.token_ids, used)
                    result = (await self.judge.judge(problem, text))[2]
                    turns = 2
        n = len(mask)
        return AgentLoopOutput(
            prompt_ids=ids[: len(ids) - n],
            response_ids=ids[len(ids) - n :][: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logps[: self.response_length] if logps else None,
            reward_score=result["score"],
            num_turns=2 * turns,
            metrics=AgentLoopMetrics(),
            extra_fields={"reward_extra_info": result, "proofrl_turns": turns, "turn_scores": [], "tool_rewards": []},
        )
