"""The tactic policy: prompt format, merging of duplicate tactics, the tiny tactic model taught on transitions
(HF sampling and beam search), the OpenAI-compatible endpoint (completions and chat) served on loopback by the
tests' existing server, an endpoint dying mid-run, and the value functions."""

from __future__ import annotations

import importlib.util
import math

import pytest
from test_policy_generation import KEY, completions_app, serve

from proofrl.errors import ConfigError
from proofrl.policy.generation import GenerationError, HFGenerator, SamplingConfig
from proofrl.policy.model import load_policy
from proofrl.policy.tactic import (
    EndpointValue,
    HFTacticPolicy,
    ModelHeadValue,
    NoValue,
    OpenAITacticPolicy,
    PolicyEndpointError,
    Proposal,
    TacticPolicy,
    ValueFn,
    clean_tactic,
    make_tactic_policy,
    make_value_fn,
    merge_proposals,
    propose_batch,
    tactic_pairs,
    tactic_prompt,
    train_tiny_tactic_model,
)

S1 = "n : nat\n⊢ n + 0 = n"
S2 = "⊢ True"
S3 = "b : bool\n⊢ negb (negb b) = b"
TRANSITIONS = [
    {"state_before": S1, "tactic": "induction n.", "structural": False},
    {"state_before": S1, "tactic": "lia.", "structural": False},
    {"state_before": S2, "tactic": "exact I.", "structural": False},
    {"state_before": S3, "tactic": "destruct b; reflexivity.", "structural": False},
    {"state_before": "⊢ True\n\n⊢ True", "tactic": "-", "structural": True},
]


def test_prompt_format():
    assert tactic_prompt("  ⊢ True\n") == "[GOAL]\n⊢ True\n[PROOFSTEP]\n"
    assert clean_tactic("  intro n.\n") == "intro n."
    assert clean_tactic("```coq\nauto.\n```") == "auto."
    assert clean_tactic("lia.\n[GOAL]\n⊢ x") == "lia."
    assert clean_tactic("  \n") == ""
    assert tactic_pairs(TRANSITIONS) == [(tactic_prompt(t["state_before"]), t["tactic"]) for t in TRANSITIONS[:4]]
    assert len(tactic_pairs(TRANSITIONS, include_structural=True)) == 5
    assert len(tactic_pairs(TRANSITIONS, max_state_chars=10)) == 1  # only "⊢ True" is that short


def test_merging_duplicates_adds_the_probabilities_of_distinct_sequences():
    props = merge_proposals(
        [
            ("auto.", [-1.0, -1.0], (5, 6)),
            (" auto. ", [-0.5, -1.5], (7, 6)),
            ("auto.", [-1.0, -1.0], (5, 6)),
            ("```coq\nlia.\n```", [-0.5]),
            ("", [-0.1]),
            ("trivial.", [-3.0, -0.5, -0.5]),
            ("lia.", [-0.5]),
        ]
    )
    assert [p.tactic for p in props] == ["lia.", "auto.", "trivial."]  # sorted by logprob_sum, empty dropped
    lia, auto, trivial = props
    # two spellings of "auto." (tokens 5 6 and 7 6) add their probabilities; the repeat of 5 6 counts once
    assert auto.count == 3 and auto.tokens == 2
    assert auto.logprob_sum == pytest.approx(math.log(2 * math.exp(-2.0)))
    assert auto.logprob_mean == pytest.approx(auto.logprob_sum / 2)
    assert lia == Proposal("lia.", -0.5, -0.5, 1, 2)  # same log-probs and no ids: one sequence drawn twice
    assert trivial == Proposal("trivial.", -4.0, -4.0 / 3, 3, 1)
    assert all(p.logprob_sum <= 0 for p in props)
    assert merge_proposals([("a.", [-1.0]), ("b.", [-1.1]), ("c.", [-0.5])], k=2) == [
        Proposal("c.", -0.5, -0.5, 1),
        Proposal("a.", -1.0, -1.0, 1),
    ]


# -- the tiny tactic model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tactic-model")
    losses = []
    train_tiny_tactic_model(
        TRANSITIONS,
        out,
        epochs=60,
        seed=0,
        lr=3e-3,
        batch=8,
        model={"hidden": 64, "layers": 2, "heads": 4, "vocab_size": 400},
        on_epoch=lambda _epoch, loss: losses.append(loss),
    )
    assert losses[-1] < losses[0] / 4
    return out


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_policy(tiny_dir)


def test_hf_proposals_are_distinct_sorted_and_exact(tiny):
    model, tok = tiny
    policy = HFTacticPolicy(model, tok, temperature=1.0, max_tokens=24, seed=0)
    assert isinstance(policy, TacticPolicy)
    props = policy.propose(S2, 8)
    assert props and len(props) <= 8
    assert len({p.tactic for p in props}) == len(props)
    assert [p.logprob_sum for p in props] == sorted((p.logprob_sum for p in props), reverse=True)
    assert sum(p.count for p in props) <= 8 and any(p.count > 1 for p in props)  # a taught model repeats itself
    assert props[0].tactic == "exact I."
    assert all(p.logprob_mean * p.tokens == pytest.approx(p.logprob_sum) and p.tokens > 0 for p in props)
    assert all(p.logprob_sum < 0 for p in props)  # a tactic drawn several times is still a probability


def test_hf_proposals_for_many_states_and_new_samples_per_call(tiny):
    model, tok = tiny
    policy = HFTacticPolicy(model, tok, max_tokens=24, seed=1)
    first = propose_batch(policy, [S1, S2, S3], 6)
    assert len(first) == 3 and all(first)
    assert first[1][0].tactic == "exact I." and first[2][0].tactic == "destruct b; reflexivity."
    again = HFTacticPolicy(model, tok, max_tokens=24, seed=1).propose_many([S1, S2, S3], 6)
    assert again == first  # same seed, same proposals


def test_hf_beam_search_gives_distinct_tactics_best_first(tiny):
    model, tok = tiny
    props = HFTacticPolicy(model, tok, max_tokens=40, beam=True).propose(S3, 4)
    assert 1 <= len(props) <= 4 and len({p.tactic for p in props}) == len(props)
    assert [p.logprob_sum for p in props] == sorted((p.logprob_sum for p in props), reverse=True)
    assert props[0].tactic == "destruct b; reflexivity." and props[0].logprob_sum < 0


def test_long_states_are_cut_from_the_front(tiny):
    model, tok = tiny
    policy = HFTacticPolicy(model, tok, max_tokens=16)
    long = "\n".join(f"H{i} : n{i} = {i}" for i in range(2000)) + "\n⊢ True"
    prompt = policy.prompt(long)
    assert prompt.endswith("⊢ True\n[PROOFSTEP]\n") and len(tok(prompt)["input_ids"]) <= policy.max_prompt_tokens
    assert isinstance(policy.propose(long, 2), list)  # no indexing error past the model's positions


def test_factory(tiny_dir):
    p = make_tactic_policy(f"hf:{tiny_dir}", max_tokens=16, seed=0)
    assert isinstance(p, HFTacticPolicy) and p.propose(S2, 2)
    with pytest.raises(ConfigError, match="model"):
        make_tactic_policy("openai:http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="unknown tactic policy"):
        make_tactic_policy("gpt:x")
    with pytest.raises(ConfigError, match="unknown tactic policy"):
        make_tactic_policy("hf")
    o = make_tactic_policy("openai-chat:http://127.0.0.1:9/v1", model="m")
    assert isinstance(o, OpenAITacticPolicy) and o.url == "http://127.0.0.1:9/v1/chat/completions"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_missing_is_a_clear_import_error(tiny_dir):
    with pytest.raises(ImportError, match="proofrl\\[gpu\\]"):
        make_tactic_policy(f"vllm:{tiny_dir}")


# -- OpenAI-compatible endpoint ------------------------------------------------------------------------------


def policy_app(model, tok):
    """The tests' OpenAI-compatible completions server (test_policy_generation), plus ``/v1/chat/completions``
    in the OpenAI chat reply shape (``message.content``, ``logprobs.content[*].logprob``) and a value route."""
    from fastapi import Header, HTTPException

    app, seen = completions_app(model, tok)
    gen = HFGenerator(model, tok)

    @app.post("/v1/chat/completions")
    def chat(body: dict, authorization: str | None = Header(default=None)):
        seen.append(body)
        if authorization != f"Bearer {KEY}":
            raise HTTPException(401, "bad key")
        (msg,) = [m for m in body["messages"] if m["role"] == "user"]
        params = SamplingConfig(
            n=body.get("n", 1),
            temperature=body.get("temperature", 1.0),
            top_p=body.get("top_p", 1.0),
            max_tokens=body.get("max_tokens", 16),
            seed=body.get("seed"),
        )
        (group,) = gen.generate([msg["content"]], params)
        choices = [
            {
                "index": j,
                "finish_reason": c.finish_reason,
                "message": {"role": "assistant", "content": c.text},
                "logprobs": {
                    "content": [
                        {"token": tok.decode([t]), "logprob": lp, "top_logprobs": []}
                        for t, lp in zip(c.token_ids, c.logprobs, strict=True)
                    ]
                    if body.get("logprobs")
                    else None
                },
            }
            for j, c in enumerate(group)
        ]
        return {"id": "chat-1", "object": "chat.completion", "model": body["model"], "choices": choices[::-1]}

    @app.post("/value")
    def value(body: dict):
        seen.append(body)
        if body["state"] == "broken":
            return {"value": 1}
        return {"score": float(body["state"].count("⊢"))}

    return app, seen


@pytest.fixture()
def endpoint(tiny):
    app, seen = policy_app(*tiny)
    url, stop = serve(app)
    yield url, seen, stop
    stop()


def test_openai_completions_policy_matches_the_local_model(endpoint, tiny):
    url, seen, _ = endpoint
    model, tok = tiny
    direct = HFTacticPolicy(model, tok, max_tokens=24, seed=5).propose_many([S1, S2], 6)
    remote = OpenAITacticPolicy(
        url, "tiny", api_key=KEY, max_tokens=24, seed=5, extra_body={"return_tokens_as_token_ids": True}
    )
    assert isinstance(remote, TacticPolicy) and remote.name == "openai:tiny"
    got = remote.propose_many([S1, S2], 6)
    assert [[p.tactic for p in g] for g in got] == [[p.tactic for p in g] for g in direct]
    for g, d in zip(got, direct, strict=True):
        assert [p.logprob_sum for p in g] == pytest.approx([p.logprob_sum for p in d], abs=1e-5)
    body = seen[-1]
    assert body["prompt"] == [tactic_prompt(S1), tactic_prompt(S2)] and body["n"] == 6 and body["logprobs"] == 1


def test_openai_chat_policy(endpoint, tiny):
    url, seen, _ = endpoint
    model, tok = tiny
    direct = HFTacticPolicy(model, tok, max_tokens=24, seed=7).propose(S3, 5)
    chat = make_tactic_policy(
        f"openai-chat:{url}/v1", model="tiny", api_key=KEY, max_tokens=24, seed=7, system="You prove Coq goals."
    )
    got = chat.propose(S3, 5)
    assert [p.tactic for p in got] == [p.tactic for p in direct]
    assert [p.logprob_sum for p in got] == pytest.approx([p.logprob_sum for p in direct], abs=1e-5)
    body = seen[-1]
    assert body["logprobs"] is True and body["n"] == 5
    assert body["messages"] == [
        {"role": "system", "content": "You prove Coq goals."},
        {"role": "user", "content": tactic_prompt(S3)},
    ]


def test_endpoint_errors_are_clear(endpoint):
    url, _, _ = endpoint
    with pytest.raises(PolicyEndpointError, match=r"refused.*HTTP 401"):
        OpenAITacticPolicy(url, "tiny", api_key="wrong").propose(S2, 2)
    with pytest.raises(PolicyEndpointError, match=r"refused.*HTTP 401"):
        OpenAITacticPolicy(url, "tiny", chat=True, api_key="wrong").propose(S2, 2)
    with pytest.raises(PolicyEndpointError, match="malformed"):
        OpenAITacticPolicy(url, "tiny", api_key=KEY, max_tokens=999).propose(S2, 1)  # the server's broken reply
    assert issubclass(PolicyEndpointError, GenerationError)


def test_endpoint_dying_mid_run_is_a_clear_error(endpoint):
    url, _, stop = endpoint
    completions = OpenAITacticPolicy(url, "tiny", api_key=KEY, max_tokens=16, timeout=5)
    chat = OpenAITacticPolicy(url, "tiny", api_key=KEY, chat=True, max_tokens=16, timeout=5)
    value = EndpointValue(url + "/value", timeout=5)
    assert completions.propose(S2, 2) and chat.propose(S2, 2) and value.value(S2) == -1.0
    stop()  # the server goes away between two expansions
    with pytest.raises(
        PolicyEndpointError, match=r"tactic policy endpoint http://127\.0\.0\.1:\d+/v1/completions: unreachable or died"
    ):
        completions.propose(S2, 2)
    with pytest.raises(
        PolicyEndpointError,
        match=r"tactic policy endpoint http://127\.0\.0\.1:\d+/v1/chat/completions is unreachable or died",
    ):
        chat.propose(S2, 2)
    with pytest.raises(PolicyEndpointError, match=r"value endpoint .* unreachable or died"):
        value.value(S2)


# -- values ------------------------------------------------------------------------------------------------


def test_value_functions(endpoint):
    url, seen, _ = endpoint
    none = make_value_fn(None)
    assert (
        isinstance(none, ValueFn)
        and isinstance(none, NoValue)
        and none.value(S1) == -1.0 == make_value_fn("none").value(S2)
    )
    ep = make_value_fn(f"endpoint:{url}/value")
    assert isinstance(ep, EndpointValue) and ep.value("⊢ a\n\n⊢ b") == -2.0  # reap: value = −score
    assert seen[-1] == {"state": "⊢ a\n\n⊢ b"}
    assert EndpointValue(f"{url}/value", negate=False).value("⊢ a") == 1.0
    with pytest.raises(PolicyEndpointError, match="malformed value reply"):
        ep.value("broken")  # answers, but not {"score": x}
    assert ModelHeadValue(lambda s: 0.25).value(S1) == 0.25
    with pytest.raises(NotImplementedError, match="expert-iteration"):
        ModelHeadValue().value(S1)
    with pytest.raises(ConfigError):
        make_value_fn("magic")
