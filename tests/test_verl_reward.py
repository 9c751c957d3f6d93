"""verl's own reward-loop worker and naive reward manager, configured through verl's Hydra config, score real Coq
proofs through proofrl's reward function (valid, error, admitted, timeout, a broken record)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch
from conftest import requires_coq
from verl_support import ADMITTED, LOOP, RECORD, REWARD_PY, VALID, WRONG, compose_verl, tiny_model

pytestmark = requires_coq


def _batch(tokenizer, texts: list[str], records: list[dict]):
    """A DataProto shaped as verl's rollout hands it to the reward loop: left-padded prompts, right-padded responses."""
    from verl import DataProto

    prompt = tokenizer("Prove it.", add_special_tokens=False)["input_ids"]
    responses = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(map(len, responses)) + 3
    resp = torch.full((len(texts), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(texts), len(prompt) + width), dtype=torch.long)
    for i, r in enumerate(responses):
        resp[i, : len(r)] = torch.tensor(r)
        mask[i, : len(prompt) + len(r)] = 1
    prompts = torch.tensor([prompt] * len(texts))
    return DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": resp,
            "input_ids": torch.cat([prompts, resp], 1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": np.array(["proofrl"] * len(texts), dtype=object),
            "reward_model": np.array([{"ground_truth": ""}] * len(texts), dtype=object),
            "extra_info": np.array([dict(r) for r in records], dtype=object),
        },
    )


def test_reward_loop_worker_scores_real_coq_proofs(tmp_path) -> None:
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    model = tiny_model(tmp_path / "model")
    config = compose_verl(
        [
            f"actor_rollout_ref.model.path={model}",
            f"reward.custom_reward_function.path={REWARD_PY}",
            "reward.custom_reward_function.name=compute_score",
            "+reward.custom_reward_function.reward_kwargs.timeout=6",
            "+reward.custom_reward_function.reward_kwargs.workers=2",
        ]
    )
    worker = RewardLoopWorker(config)
    assert isinstance(worker.reward_manager, NaiveRewardManager)  # verl's own manager, picked by its config
    broken = {"name": "broken"}  # no statement: this sample gets a precise verdict, the batch goes on
    texts = [VALID, WRONG, ADMITTED, LOOP, VALID]
    data = _batch(worker.input_tokenizer, texts, [RECORD] * 4 + [broken])
    out = worker.loop.run_until_complete(worker.compute_score_batch(data))  # the loop verl's manager bound

    scores = [o["reward_score"] for o in out]
    infos = [o["reward_extra_info"] for o in out]
    assert scores == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [i["status"] for i in infos] == ["valid", "error", "rejected", "timeout", "error"]
    assert "admitted" in infos[2]["reasons"] and "formal_statement" in infos[4]["reasons"]
    keys = {k for k in infos[0] if k not in ("num_turns", "rollout_reward_scores")}
    assert keys == {"score", "status", "reasons", "format_ok"}
    assert all(set(i) == set(infos[0]) for i in infos)  # verl takes the extra keys from the first sample
    # verl's assembly puts each score on the last response token
    rm = NaiveRewardManager.assemble_rm_scores(data, scores)
    last = data.batch["attention_mask"][:, data.batch["prompts"].shape[1] :].sum(1) - 1
    assert rm[0, last[0]] == 1.0 and rm.sum() == 1.0


def test_format_reward_from_the_recipe(tmp_path) -> None:
    """kimina's recipe: a valid proof in a completion that breaks the format rules scores 0 (format_ok False);
    the same proof in a well-formed completion scores 1."""
    from proofrl.policy.prompts import get_format
    from proofrl.problems import Problem
    from proofrl.verl.reward import compute_score

    problem = Problem.from_json(RECORD)
    fmt = get_format("kimina-coq")
    block = f"```tactics\n{RECORD['formal_statement']}\nProof.\n```\n```tactics\nintros. lia.\nQed.\n```"
    good = fmt.completion(problem, "intros. lia.", reasoning=f"intros then lia.\n{block}")
    bad = fmt.completion(problem, "intros. lia.", reasoning="intros then lia.")  # no tactics blocks
    kw = {"prompt_format": "kimina-coq", "recipe": "kimina", "via": "pool", "timeout": 10}

    async def both():
        return await asyncio.gather(
            compute_score("proofrl", good, None, RECORD, **kw), compute_score("proofrl", bad, None, RECORD, **kw)
        )

    r_good, r_bad = asyncio.run(both())
    assert r_good == {"score": 1.0, "status": "valid", "reasons": "", "format_ok": True}
    assert r_bad["status"] == "valid" and r_bad["format_ok"] is False and r_bad["score"] == 0.0


def test_bad_reward_kwargs_are_one_line() -> None:
    from proofrl.errors import ConfigError
    from proofrl.verl.reward import compute_score

    with pytest.raises(ConfigError, match=r"unknown keys in reward_kwargs: \['prompt_fromat'\]"):
        asyncio.run(compute_score("proofrl", VALID, None, RECORD, prompt_fromat="raw"))
    with pytest.raises(ConfigError, match=r"prompt_format"):
        asyncio.run(compute_score("proofrl", VALID, None, RECORD, prompt_format="nope"))


def test_judge_settings_left_out_come_from_the_recipes_verify_section() -> None:
    from proofrl.train.config import load_recipe
    from proofrl.verl.reward import judge_for

    bare = judge_for({})  # no recipe: the verify section's defaults
    assert (bare.timeout, bare.workers, bare.server_url, bare.api_key, bare.via) == (60.0, 2, "", "", "pool")
    verify = load_recipe("kimina").verify
    j = judge_for({"recipe": "kimina"})
    assert (j.timeout, j.workers, j.server_url, j.api_key) == (
        verify.timeout,
        verify.workers,
        verify.server_url,
        verify.api_key,
    )
    given = {"recipe": "kimina", "timeout": 7, "workers": 3, "server_url": "http://verifier:8000", "api_key": ""}
    o = judge_for(given)
    assert (o.timeout, o.workers, o.server_url, o.api_key, o.via) == (7.0, 3, "http://verifier:8000", "", "server")
