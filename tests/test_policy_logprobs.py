"""response_logprobs against a plain one-row forward pass: padding, micro-batches, temperature, gradients."""

from __future__ import annotations

import pytest
import torch

from proofrl.policy import LoraConfig, build_tiny_model, load_policy, response_logprobs
from proofrl.policy.logprobs import left_pad, position_ids, right_pad
from proofrl.policy.tiny import sample_corpus


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), sample_corpus(), vocab_size=512, seed=1)
    return load_policy(path)


def reference(model, prompt, response, temperature=1.0):
    """log π(o_t | q, o_<t) from one unpadded row: the definition."""
    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logits = model(ids).logits[0].float() / temperature  # (L, V)
    logps = torch.log_softmax(logits, -1)
    return torch.tensor([logps[len(prompt) - 1 + t, tok].item() for t, tok in enumerate(response)])


def batch(tok):
    prompts = [
        "Theorem add_zero : forall n : nat, n + 0 = n.\nProof.\n",
        "Lemma t : True.",
        "Complete the following Coq proof:\n\n```coq\nRequire Import Arith Lia.\nTheorem x : 1 = 1.\nProof.\n",
        "x",
    ]
    responses = ["intros n. lia.\nQed.", " exact I. Qed.\n```", "reflexivity.", "y"]
    q = [tok(p)["input_ids"] for p in prompts]
    o = [tok(r, add_special_tokens=False)["input_ids"] for r in responses]
    return q, o


def test_matches_one_row_forward_with_different_prompt_lengths(policy):
    model, tok = policy
    q, o = batch(tok)
    assert len({len(p) for p in q}) == len(q) and len({len(r) for r in o}) == len(o)
    with torch.no_grad():
        logps, mask = response_logprobs(model, q, o, pad_id=tok.pad_token_id)
    T = max(len(r) for r in o)
    assert logps.shape == mask.shape == (4, T) and logps.dtype == torch.float32
    for i in range(4):
        n = len(o[i])
        assert mask[i].tolist() == [1.0] * n + [0.0] * (T - n)
        assert torch.allclose(logps[i, :n], reference(model, q[i], o[i]), atol=1e-5)
        assert torch.all(logps[i, n:] == 0)


def test_micro_batches_change_nothing(policy):
    model, tok = policy
    q, o = batch(tok)
    with torch.no_grad():
        whole, m1 = response_logprobs(model, q, o, pad_id=tok.pad_token_id, micro_batch=16)
        ones, m2 = response_logprobs(model, q, o, pad_id=tok.pad_token_id, micro_batch=1)
    assert torch.equal(m1, m2)
    assert torch.allclose(whole, ones, atol=1e-5)


def test_temperature_scales_the_logits(policy):
    model, tok = policy
    q, o = batch(tok)
    with torch.no_grad():
        hot, _ = response_logprobs(model, q[:1], o[:1], pad_id=tok.pad_token_id, temperature=0.7)
    assert torch.allclose(hot[0], reference(model, q[0], o[0], temperature=0.7), atol=1e-5)
    assert not torch.allclose(hot[0], reference(model, q[0], o[0]), atol=1e-3)


def test_gradients_flow_to_the_policy_only_when_enabled(policy, tmp_path):
    model, tok = policy
    q, o = batch(tok)
    logps, mask = response_logprobs(model, q, o, pad_id=tok.pad_token_id, micro_batch=2)
    (-(logps * mask).sum()).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads) and any(g.abs().sum() > 0 for g in grads)
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        logps, _ = response_logprobs(model, q, o, pad_id=tok.pad_token_id)
    assert not logps.requires_grad


def test_lora_model_gets_adapter_gradients(policy, tmp_path):
    model, tok = policy
    path = tmp_path / "m"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    lora_model, _ = load_policy(path, lora=LoraConfig(r=2, alpha=4, dropout=0.0))
    q, o = batch(tok)
    logps, mask = response_logprobs(lora_model, q, o, pad_id=tok.pad_token_id)
    with torch.no_grad():
        base, _ = response_logprobs(model, q, o, pad_id=tok.pad_token_id)
    assert torch.allclose(logps.detach(), base, atol=1e-5)  # B starts at zero: same function at first
    (logps * mask).sum().backward()
    a_grads = [p.grad for n, p in lora_model.named_parameters() if "lora_A" in n]
    b_grads = [p.grad for n, p in lora_model.named_parameters() if "lora_B" in n]
    assert all(g is None or g.abs().sum() == 0 for g in a_grads)  # dL/dA ∝ B = 0
    assert all(g is not None and g.abs().sum() > 0 for g in b_grads)


def test_empty_responses_and_empty_batch(policy):
    model, tok = policy
    q, o = batch(tok)
    logps, mask = response_logprobs(model, q[:2], [[], o[1]], pad_id=tok.pad_token_id, micro_batch=1)
    assert mask[0].sum() == 0 and mask[1].sum() == len(o[1])
    logps, mask = response_logprobs(model, q[:2], [[], []], pad_id=tok.pad_token_id)
    assert logps.shape == (2, 0)
    logps, mask = response_logprobs(model, [], [], pad_id=tok.pad_token_id)
    assert logps.shape == (0, 0)


def test_bad_inputs_are_refused(policy):
    model, _ = policy
    with pytest.raises(ValueError, match="at least one token"):
        response_logprobs(model, [[]], [[5]], pad_id=0)
    with pytest.raises(ValueError, match="2 prompts but 1 responses"):
        response_logprobs(model, [[1], [1]], [[5]], pad_id=0)
    with pytest.raises(ValueError, match="temperature"):
        response_logprobs(model, [[1]], [[5]], pad_id=0, temperature=0)


def test_padding_helpers():
    ids, mask = left_pad([[7, 8, 9], [5]], pad_id=0)
    assert ids.tolist() == [[7, 8, 9], [0, 0, 5]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert position_ids(mask).tolist() == [[0, 1, 2], [0, 0, 0]]
    ids, mask = right_pad([[7, 8, 9], [5]], pad_id=0)
    assert ids.tolist() == [[7, 8, 9], [5, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]


# ---------------------------------------------------------------------------------- the chunked kernel


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_value_gradient_and_entropy_match_log_softmax(temperature):
    from proofrl.policy.logprobs import token_logprobs

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (3, 5), generator=g)
    weights = torch.randn(3, 5, generator=g, dtype=torch.float64)
    # 3 positions per chunk: 15 positions in 5 chunks
    lp, ent = token_logprobs(logits, targets, temperature=temperature, entropy=True, chunk_bytes=4 * 11 * 3)
    (lp * weights).sum().backward()
    got = logits.grad.clone()
    logits.grad = None
    lsm = torch.log_softmax(logits / temperature, -1)
    ref = lsm.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    (ref * weights).sum().backward()
    assert torch.allclose(lp.double(), ref, atol=1e-6)
    assert torch.allclose(got, logits.grad, atol=1e-6)
    assert torch.allclose(ent.double(), -(lsm.exp() * lsm).sum(-1).detach(), atol=1e-5)
    assert not ent.requires_grad and lp.dtype == torch.float32


def test_no_fp32_vocabulary_sized_tensor_is_kept_for_backward(policy):
    """With bf16 logits, what autograd keeps from the log-prob step is the model's own bf16 logits (and
    per-position floats), never an fp32 (B, T, V) log-softmax."""
    model, tok = policy
    q, o = batch(tok)
    vocab = model.config.vocab_size
    saved = []

    def pack(t):
        saved.append((t.dtype, tuple(t.shape)))
        return t

    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logps, mask = response_logprobs(model, q, o, pad_id=tok.pad_token_id)
    (logps * mask).sum().backward()
    model.zero_grad(set_to_none=True)
    wide = [s for s in saved if s[1] and s[1][-1] == vocab]
    assert wide and all(dtype == torch.bfloat16 for dtype, _ in wide), wide
