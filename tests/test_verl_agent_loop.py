"""kimina's error-correction turn as a verl agent loop, run by verl's own AgentLoopWorker (registry from the YAML,
hydra instantiation, padding and post-processing) against a scripted generation server and real Coq."""

from __future__ import annotations

import asyncio
from importlib import resources

import numpy as np
import pytest
from conftest import requires_coq
from verl_support import RECORD, REWARD_PY, compose_verl, tiny_model

pytestmark = requires_coq


class ScriptedServer:
    """Answers each generate call with the next scripted text; log-probs -0.01·(call+1)·(k+1) per token k, so every
    token's log-prob says which call and position it came from."""

    def __init__(self, tokenizer, answers: list[str]):
        self.tokenizer, self.answers, self.prompts, self.params = tokenizer, list(answers), [], []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        call = len(self.prompts)
        self.prompts.append(list(prompt_ids))
        self.params.append(dict(sampling_params))
        ids = self.tokenizer(self.answers[call], add_special_tokens=False)["input_ids"] + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        ids = ids[: sampling_params.get("max_tokens", len(ids))]  # as vLLM does
        return TokenOutput(
            token_ids=ids, log_probs=[-0.01 * (call + 1) * (k + 1) for k in range(len(ids))], stop_reason="completed"
        )


def _answer(proof: str) -> str:
    return f"<think>\nTry it.\n</think>\n```coq\n{RECORD['formal_statement']}\nProof.\n{proof}\nQed.\n```"


def _run(tmp_path, answers: list[str], response_length: int = 1024):
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from proofrl.policy.prompts import get_format
    from proofrl.problems import Problem

    config = compose_verl(
        [
            f"actor_rollout_ref.model.path={tiny_model(tmp_path / 'model')}",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "data.max_prompt_length=1024",
            f"data.max_response_length={response_length}",
            "actor_rollout_ref.rollout.agent.agent_loop_config_path="
            f"{resources.files('proofrl.verl') / 'agent_loops.yaml'}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=proofrl_error_correction",
            f"reward.custom_reward_function.path={REWARD_PY}",
            "+reward.custom_reward_function.reward_kwargs.prompt_format=kimina-coq",
            "+reward.custom_reward_function.reward_kwargs.timeout=10",
        ]
    )

    class Client:  # verl hands the worker an LLM client; ours is scripted
        server = None

        async def generate(self, **kw):
            return await self.server.generate(**kw)

    client = Client()
    worker = AgentLoopWorker(config, llm_client=client)
    worker_tok = worker.tokenizer
    client.server = ScriptedServer(worker_tok, answers)
    messages = get_format("kimina-coq").messages(Problem.from_json(RECORD))
    batch = DataProto.from_dict(
        non_tensors={"raw_prompt": np.array([None], dtype=object), "extra_info": np.array([dict(RECORD)], dtype=object)}
    )
    batch.non_tensor_batch["raw_prompt"][0] = messages
    out = asyncio.run(worker.generate_sequences(batch))
    return out, client.server, worker_tok


def test_failed_first_turn_gets_proofrl_feedback_masked_and_a_second_turn(tmp_path) -> None:
    out, server, tok = _run(tmp_path, [_answer("intros. reflexivity."), _answer("intros. lia.")])
    assert len(server.prompts) == 2
    b = out.batch
    mask, resp = b["response_mask"][0], b["responses"][0]
    logps = b["rollout_log_probs"][0]
    n = int(b["attention_mask"][0, b["prompts"].shape[1] :].sum())
    first = tok(_answer("intros. reflexivity."), add_special_tokens=False)["input_ids"]
    # layout: first answer (mask 1) | feedback turn (mask 0) | second answer (mask 1) | padding (mask 0)
    m = mask[:n].tolist()
    k1 = len(first) + 1
    assert m[:k1] == [1] * k1 and m[k1] == 0
    tail = m[k1:]
    k2 = len(tail) - tail.index(1)
    assert tail[-k2:] == [1] * k2 and set(tail[:-k2]) == {0} and mask[n:].sum() == 0
    # log-probs line up token for token with what the server returned for each call; feedback tokens carry 0
    assert logps[:k1].tolist() == pytest.approx([-0.01 * (k + 1) for k in range(k1)])
    assert logps[n - k2 : n].tolist() == pytest.approx([-0.02 * (k + 1) for k in range(k2)])
    assert logps[k1 : n - k2].abs().sum() == 0
    # the second call's prompt is the whole context so far: prompt, first answer, feedback
    assert server.prompts[1] == b["input_ids"][0, b["attention_mask"][0].bool()].tolist()[: len(server.prompts[1])]
    feedback = tok.decode(resp[k1 : n - k2].tolist())
    assert "# Error 1:" in feedback and 'Unable to unify "n" with "n + 0".' in feedback  # proofrl's error report
    assert "reflexivity" in feedback and "Coq code snippet with error:" in feedback
    # the reward is the second answer's, set by the loop with the reward function's keys
    assert b["rm_scores"][0].sum() == 1.0 and b["rm_scores"][0, n - 1] == 1.0
    assert out.non_tensor_batch["status"][0] == "valid" and out.non_tensor_batch["proofrl_turns"][0] == 2


def test_valid_first_turn_ends_the_trajectory(tmp_path) -> None:
    out, server, _ = _run(tmp_path, [_answer("intros. lia.")])
    assert len(server.prompts) == 1
    n = int(out.batch["attention_mask"][0, out.batch["prompts"].shape[1] :].sum())
    assert out.batch["response_mask"][0, :n].tolist() == [1] * n
    assert out.batch["rm_scores"][0, n - 1] == 1.0 and out.non_tensor_batch["proofrl_turns"][0] == 1


def test_the_second_answer_is_judged_only_as_far_as_it_is_trained(tmp_path) -> None:
    """A second answer whose proof lies past the response budget: the call asks for the budget left, and the
    reward judges the kept tokens (no proof: 0), not the whole text (a valid proof, 1.0, on untrained text)."""
    long_second = _answer("intros. lia.").replace("Try it.", "Let me think about this. " * 400)
    out, server, _ = _run(tmp_path, [_answer("intros. reflexivity."), long_second])
    assert len(server.prompts) == 2
    b = out.batch
    n = int(b["attention_mask"][0, b["prompts"].shape[1] :].sum())
    assert n == 1024  # the response is full: the second answer was cut
    context = len(server.prompts[1]) - len(server.prompts[0])  # first answer + feedback turn, in the response
    assert server.params[1]["max_tokens"] == 1024 - context
    assert b["rm_scores"][0].sum() == 0.0 and out.non_tensor_batch["status"][0] != "valid"
