"""Generators: HF sampling (log-probs, stop strings, EOS, n, order, seeds) on a real tiny model; the OpenAI
client against a real uvicorn server on loopback; vLLM's clear error where it is missing."""

from __future__ import annotations

import importlib.util
import random
import socket
import threading
import time

import pytest
import torch

from proofrl.errors import ConfigError
from proofrl.policy import (
    Completion,
    GenerationError,
    Generator,
    HFGenerator,
    LoraConfig,
    OpenAIGenerator,
    SamplingConfig,
    VLLMGenerator,
    build_tiny_model,
    encode_prompts,
    load_policy,
    make_generator,
    response_logprobs,
)
from proofrl.policy.generation import _StopStrings, merged_weights
from proofrl.policy.tiny import sample_corpus

# The taught model answers each prompt with its own proof: alpha and beta close the code block, gamma ends
# with EOS. Sixty full-batch steps take about half a second.
TAUGHT = {
    "Theorem alpha : True.\nProof.\n": " exact I.\nQed.\n```",
    "Theorem beta : 1 = 1.\nProof.\n": " reflexivity.\nQed.\n```",
    "Lemma gamma : False.\n": " Abort.</s>",
}
A, B, C = TAUGHT
COLD = dict(temperature=0.2, seed=0)  # the taught model's answer, without a rare token from the tail


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), sample_corpus(), vocab_size=512, seed=0)


@pytest.fixture(scope="module")
def untrained(tiny_path):
    return load_policy(tiny_path)


@pytest.fixture(scope="module")
def taught(tiny_path):
    model, tok = load_policy(tiny_path)
    q = encode_prompts(tok, list(TAUGHT))
    o = [tok(t, add_special_tokens=False)["input_ids"] for t in TAUGHT.values()]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(60):
        logps, mask = response_logprobs(model, q, o, pad_id=tok.pad_token_id)
        loss = -(logps * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    assert loss.item() < 0.05
    return model, tok


def flat(groups):
    return [c for g in groups for c in g]


def assert_logprobs_match(model, tok, prompts, groups, n):
    q = [p for p in encode_prompts(tok, prompts) for _ in range(n)]
    comps = flat(groups)
    with torch.no_grad():
        logps, mask = response_logprobs(model, q, [c.token_ids for c in comps], pad_id=tok.pad_token_id)
    for i, c in enumerate(comps):
        k = len(c.token_ids)
        assert len(c.logprobs) == k and mask[i].sum() == k
        assert torch.allclose(torch.tensor(c.logprobs), logps[i, :k], atol=1e-4), i


# -- HF -------------------------------------------------------------------------------------------------


def test_logprobs_equal_recomputation_across_batches_and_prompt_lengths(untrained):
    model, tok = untrained
    prompts = ["Theorem t : True.", "x", "Complete the following Coq proof:\n\n```coq\nTheorem u : 1 = 1.\nProof.\n"]
    gen = HFGenerator(model, tok, batch_size=4)  # 9 rows: three generate calls, groups split across them
    groups = gen.generate(prompts, SamplingConfig(n=3, max_tokens=12, seed=0))
    assert [len(g) for g in groups] == [3, 3, 3]
    assert all(c.finish_reason == "length" and len(c.token_ids) == 12 for c in flat(groups))
    assert_logprobs_match(model, tok, prompts, groups, 3)


def test_logprobs_are_the_raw_distribution_whatever_the_sampling(untrained):
    model, tok = untrained
    prompts = ["Theorem t : True.", "Lemma v : 2 = 2."]
    groups = HFGenerator(model, tok).generate(
        prompts, SamplingConfig(n=2, max_tokens=10, temperature=0.6, top_p=0.8, seed=1)
    )
    assert_logprobs_match(model, tok, prompts, groups, 2)  # recomputed at temperature 1, no top-p


def test_sampling_runs_in_eval_mode_and_restores_train_mode(tiny_path):
    model, tok = load_policy(tiny_path, lora=LoraConfig(r=4, alpha=8, dropout=0.5))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # make the dropout visible in the output
    model.train()
    groups = HFGenerator(model, tok).generate(["Theorem t : True."], SamplingConfig(n=2, max_tokens=8, seed=0))
    assert model.training
    model.eval()
    assert_logprobs_match(model, tok, ["Theorem t : True."], groups, 2)


def test_n_per_prompt_in_prompt_order(taught):
    model, tok = taught
    gen = HFGenerator(model, tok, batch_size=5)
    groups = gen.generate([B, A, B, C], SamplingConfig(**COLD, n=3, max_tokens=24, stop=("```",)))
    texts = [[c.text for c in g] for g in groups]
    assert texts == [[TAUGHT[B]] * 3, [TAUGHT[A]] * 3, [TAUGHT[B]] * 3, [" Abort."] * 3]


def test_stop_string_cut_keeps_the_completing_token(taught):
    model, tok = taught
    gen = HFGenerator(model, tok)
    for stop in ("Qed.\n```", "``", "Qed"):  # several tokens; ends inside a token; a prefix of a longer token
        (c,) = gen.generate([A], SamplingConfig(**COLD, max_tokens=30, stop=(stop,)))[0]
        assert c.finish_reason == "stop", stop
        assert c.text == tok.decode(list(c.token_ids), skip_special_tokens=True)
        assert stop in c.text and stop not in tok.decode(list(c.token_ids[:-1]))
        assert TAUGHT[A].startswith(c.text)
    (c,) = gen.generate([A], SamplingConfig(**COLD, max_tokens=30, stop=("never", "Qed.")))[0]  # the first of several
    assert c.text == " exact I.\nQed."
    assert_logprobs_match(model, tok, [A], [[c]], 1)


def test_stop_string_in_the_prompt_or_across_its_end_does_not_stop(taught):
    model, tok = taught
    (c,) = HFGenerator(model, tok).generate(
        [A], SamplingConfig(**COLD, max_tokens=30, stop=("Proof.\n exact", "alpha"))
    )[0]
    assert c.text.startswith(TAUGHT[A])  # A was never taught to stop: it runs to the limit
    assert c.finish_reason == "length" and len(c.token_ids) == 30
    prompt = tok("Theorem alpha")["input_ids"]
    ids = torch.tensor([prompt + tok(" beta", add_special_tokens=False)["input_ids"]])
    assert _StopStrings(tok, ("alpha",), prompt_len=len(prompt))(ids, None).tolist() == [False]
    assert _StopStrings(tok, ("alpha",), prompt_len=1)(ids, None).tolist() == [True]


def test_eos_is_kept_in_ids_and_skipped_in_text(taught):
    model, tok = taught
    (c,) = HFGenerator(model, tok).generate([C], SamplingConfig(**COLD, max_tokens=30))[0]
    assert c.token_ids[-1] == tok.eos_token_id and c.finish_reason == "stop"
    assert c.text == " Abort." and tok.eos_token not in c.text
    assert_logprobs_match(model, tok, [C], [[c]], 1)


def test_length_limit(taught):
    model, tok = taught
    (c,) = HFGenerator(model, tok).generate([A], SamplingConfig(**COLD, max_tokens=3, stop=("```",)))[0]
    assert c.finish_reason == "length" and len(c.token_ids) == 3 and c.text == " exact I."


def test_seed_makes_sampling_reproducible_and_leaves_global_rng_alone(untrained):
    model, tok = untrained
    gen = HFGenerator(model, tok, batch_size=4)
    params = SamplingConfig(n=3, max_tokens=10, seed=7)
    torch.manual_seed(0)
    expected_next = torch.rand(1)
    torch.manual_seed(0)
    first = gen.generate(["Theorem t : True.", "x"], params)
    assert torch.equal(torch.rand(1), expected_next)
    assert gen.generate(["Theorem t : True.", "x"], params) == first
    other = gen.generate(["Theorem t : True.", "x"], SamplingConfig(n=3, max_tokens=10, seed=8))
    assert other != first
    assert len({c.token_ids for c in flat(first)}) == 6  # samples within a group differ


def test_tokens_generated_counts_returned_tokens(taught):
    model, tok = taught
    gen = make_generator("hf", model=model, tokenizer=tok)
    assert isinstance(gen, Generator) and gen.name == "hf" and gen.tokens_generated == 0
    groups = gen.generate([A, C], SamplingConfig(n=2, max_tokens=30, stop=("```",)))
    assert gen.tokens_generated == sum(len(c.token_ids) for c in flat(groups)) > 0


def test_no_prompts_and_empty_prompts(untrained, tiny_path):
    from tokenizers import processors
    from transformers import AutoTokenizer

    model, tok = untrained
    gen = HFGenerator(model, tok)
    assert gen.generate([], SamplingConfig(n=4)) == []
    (c,) = gen.generate([""], SamplingConfig(max_tokens=2, seed=0))[0]  # BOS alone is a prompt
    assert len(c.token_ids) == 2
    no_bos = AutoTokenizer.from_pretrained(tiny_path)
    no_bos.backend_tokenizer.post_processor = processors.ByteLevel()  # adds nothing, as Qwen's tokenizer
    assert no_bos("")["input_ids"] == []
    with pytest.raises(ValueError, match=r"prompts \[1\] encode to no tokens"):
        HFGenerator(model, no_bos).generate(["x", ""], SamplingConfig())


def test_make_generator_by_path_and_bad_names(tiny_path):
    gen = make_generator("hf", path=tiny_path, batch_size=2)
    assert gen.batch_size == 2 and gen.model.dtype == torch.float32
    with pytest.raises(ConfigError, match=r"unknown generator 'hf2'.*'hf', 'vllm', 'openai'"):
        make_generator("hf2")
    with pytest.raises(ConfigError, match="path="):
        make_generator("hf")
    with pytest.raises(TypeError, match="not one string"):
        gen.generate("Theorem t : True.", SamplingConfig())


def test_sampling_params_are_checked():
    for bad in (
        dict(n=0),
        dict(max_tokens=0),
        dict(temperature=0),
        dict(top_p=0),
        dict(top_p=1.5),
        dict(stop="```"),
        dict(stop=("",)),
    ):
        with pytest.raises(ValueError):
            SamplingConfig(**bad)


def test_merged_weights_are_the_lora_models_function_in_base_names(tiny_path):
    """What sync_weights hands an engine: base names, adapters merged, the model unchanged afterwards."""
    base, tok = load_policy(tiny_path)
    model, _ = load_policy(tiny_path, lora=LoraConfig(r=4, alpha=8, dropout=0.0))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.2)
    ids = torch.tensor([tok("Theorem t : True.")["input_ids"]])
    with torch.no_grad():
        want = model(ids).logits
        with merged_weights(model) as weights:
            assert [n for n, _ in weights] == list(base.state_dict())
            base.load_state_dict(dict(weights))
            assert torch.allclose(base(ids).logits, want, atol=1e-4)
        assert torch.allclose(model(ids).logits, want, atol=1e-5)  # unmerged again
        q = model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight
        assert not torch.allclose(q, base.model.layers[0].self_attn.q_proj.weight)
    with merged_weights(base) as plain:
        assert [n for n, _ in plain] == list(base.state_dict())


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_missing_is_a_clear_import_error(tiny_path):
    with pytest.raises(ImportError, match=r"pip install 'proofrl\[gpu\]'"):
        VLLMGenerator(tiny_path)
    with pytest.raises(ImportError, match="'hf' or 'openai'"):
        make_generator("vllm", path=tiny_path)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_hf_on_cuda_bf16_logprobs_close_to_recomputation(tiny_path):
    model, tok = load_policy(tiny_path)
    assert model.dtype == torch.bfloat16 and model.device.type == "cuda"
    groups = HFGenerator(model, tok).generate(["Theorem t : True."], SamplingConfig(n=4, max_tokens=16, seed=0))
    q = encode_prompts(tok, ["Theorem t : True."]) * 4
    with torch.no_grad():
        logps, _ = response_logprobs(model, q, [c.token_ids for c in groups[0]], pad_id=tok.pad_token_id)
    for i, c in enumerate(groups[0]):
        assert torch.allclose(torch.tensor(c.logprobs), logps[i, : len(c.token_ids)].cpu(), atol=5e-2)


@pytest.mark.gpu
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or not torch.cuda.is_available(), reason="needs vLLM and CUDA"
)
def test_vllm_logprobs_close_to_recomputation(tiny_path):
    gen = VLLMGenerator(tiny_path, gpu_memory_utilization=0.2, enforce_eager=True)
    groups = gen.generate([A], SamplingConfig(n=4, max_tokens=16, seed=0, stop=("```",)))
    model, tok = load_policy(tiny_path)
    q = encode_prompts(tok, [A]) * 4
    with torch.no_grad():
        logps, _ = response_logprobs(model, q, [c.token_ids for c in groups[0]], pad_id=tok.pad_token_id)
    for i, c in enumerate(groups[0]):
        assert c.text == tok.decode(list(c.token_ids), skip_special_tokens=True)
        assert torch.allclose(torch.tensor(c.logprobs), logps[i, : len(c.token_ids)].cpu(), atol=5e-2)


# -- OpenAI-compatible HTTP -----------------------------------------------------------------------------

KEY = "test-key"


def completions_app(model, tok):
    """A small OpenAI-style /v1/completions server over the tiny model (vLLM's reply shape: choices indexed
    prompt-major, ``text`` without the stop string, one log-prob per sampled token)."""
    from fastapi import FastAPI, Header, HTTPException
    from fastapi.responses import JSONResponse

    app = FastAPI()
    gen = HFGenerator(model, tok)
    seen: list[dict] = []

    @app.post("/v1/completions")
    def completions(body: dict, authorization: str | None = Header(default=None)):
        seen.append(body)
        if authorization != f"Bearer {KEY}":
            raise HTTPException(401, "bad key")
        if body.get("model") != "tiny":
            raise HTTPException(404, f"model {body.get('model')!r} not found")
        if body.get("max_tokens") == 999:  # a broken server
            return JSONResponse({"choices": [{"index": 0}]})
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        stop = tuple(body.get("stop") or ())
        params = SamplingConfig(
            n=body.get("n", 1),
            temperature=body["temperature"],
            top_p=body["top_p"],
            max_tokens=body["max_tokens"],
            stop=stop,
            seed=body.get("seed"),
        )
        choices = []
        for i, group in enumerate(gen.generate(prompts, params)):
            for j, c in enumerate(group):
                text = c.text
                for s in stop:
                    text = text.split(s, 1)[0]
                as_ids = body.get("return_tokens_as_token_ids")
                tokens = [f"token_id:{t}" if as_ids else tok.decode([t], skip_special_tokens=True) for t in c.token_ids]
                choices.append(
                    {
                        "index": i * params.n + j,
                        "text": text,
                        "finish_reason": c.finish_reason,
                        "logprobs": {"tokens": tokens, "token_logprobs": list(c.logprobs)},
                    }
                )
        random.Random(0).shuffle(choices)  # clients must order by index
        return {"id": "cmpl-1", "object": "text_completion", "model": "tiny", "choices": choices}

    return app, seen


def serve(app):
    """``app`` under uvicorn on a free loopback port, in a thread: ``(url, stop)``."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started

    def stop():
        srv.should_exit = True
        thread.join(10)

    return f"http://127.0.0.1:{port}", stop


@pytest.fixture(scope="module")
def server(taught):
    app, seen = completions_app(*taught)
    url, stop = serve(app)
    yield url, seen
    stop()


def test_openai_client_matches_direct_sampling(server, taught):
    url, seen = server
    model, tok = taught
    params = SamplingConfig(n=2, max_tokens=30, stop=("```",), seed=3, temperature=0.9, top_p=0.95)
    direct = HFGenerator(model, tok).generate([A, C, B], params)
    gen = OpenAIGenerator(url, "tiny", api_key=KEY, tokenizer=tok, extra_body={"return_tokens_as_token_ids": True})
    assert gen.name == "openai:tiny"
    assert gen.generate([A, C, B], params) == direct
    body = seen[-1]
    assert body["prompt"] == [A, C, B] and body["logprobs"] == 1 and body["stop"] == ["```"]
    assert (body["n"], body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (2, 0.9, 0.95, 30, 3)
    assert gen.tokens_generated == sum(len(c.token_ids) for c in flat(direct))


def test_openai_client_with_token_strings_only(server, taught):
    url, _ = server
    _, tok = taught
    gen = OpenAIGenerator(url + "/v1/", "tiny", api_key=KEY, batch_size=1)  # a base URL that ends in /v1
    groups = gen.generate([A, C], SamplingConfig(**COLD, max_tokens=30, stop=("```",)))
    a, c = flat(groups)
    assert (a.text, a.token_ids, a.finish_reason) == (TAUGHT[A], (), "stop")  # the stop string stays in text
    assert (c.text, c.finish_reason) == (" Abort.", "stop")
    assert len(a.logprobs) == len(tok(TAUGHT[A], add_special_tokens=False)["input_ids"])
    assert gen.tokens_generated == len(a.logprobs) + len(c.logprobs)


def test_openai_errors_carry_status_and_body(server):
    url, _ = server
    with pytest.raises(GenerationError, match="HTTP 401") as e:
        OpenAIGenerator(url, "tiny", api_key="wrong").generate([A], SamplingConfig())
    assert e.value.status == 401 and "bad key" in e.value.body
    with pytest.raises(GenerationError, match=r"HTTP 404.*not found"):
        OpenAIGenerator(url, "other", api_key=KEY).generate([A], SamplingConfig())
    with pytest.raises(GenerationError, match="malformed"):
        OpenAIGenerator(url, "tiny", api_key=KEY).generate([A], SamplingConfig(max_tokens=999))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with pytest.raises(GenerationError, match="failed"):
        OpenAIGenerator(f"http://127.0.0.1:{dead}", "tiny", timeout=2).generate([A], SamplingConfig())


def test_completion_is_a_frozen_value():
    c = Completion("x", (1,), (-0.5,), "stop")
    with pytest.raises(AttributeError):
        c.text = "y"  # type: ignore[misc]
    assert c == Completion("x", (1,), (-0.5,), "stop")
