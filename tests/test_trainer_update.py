"""The trainer's update path on a real tiny Llama: its gradient against the definition, wiring that must not
drift (groups, the KL reference, the temperature, Dr.GRPO's H, gradient accumulation), mixed precision and
gradient checkpointing. Groups are built by hand (token ids and rewards), so no prover is needed here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from grpo_support import group_advantages_loop
from rl_support import problems

from proofrl.errors import ConfigError
from proofrl.objectives.grpo import AGG_MODES, ppo_clip_loss
from proofrl.policy import LoraConfig, build_tiny_model, load_policy
from proofrl.policy.generation import Completion
from proofrl.policy.prompts import get_format
from proofrl.policy.tiny import sample_corpus
from proofrl.rollout.proofs import Group, PromptItem
from proofrl.train.config import load_recipe
from proofrl.train.whole_proof import Trainer

MAX_TOKENS = 16
BASE = [
    "rollout.temperature=0.7",
    f"rollout.max_tokens={MAX_TOKENS}",
    "ppo.epochs=1",
    "ppo.kl_coef=0.2",
    "ppo.max_grad_norm=null",
    "ppo.skip_grad_norm=null",
    "optim.weight_decay=0.0",
    "optim.micro_batch=3",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(
        tmp_path_factory.mktemp("tiny"), sample_corpus(), vocab_size=512, hidden=64, layers=2, heads=4, seed=1
    )


class RecordingSGD(torch.optim.SGD):
    """SGD that keeps a copy of the gradient of every step it takes (lr 0: it only records)."""

    def __init__(self, params, lr: float = 0.0):
        super().__init__(params, lr=lr)
        self.grads: list[torch.Tensor] = []

    def step(self, closure=None):
        self.grads.append(
            torch.cat([p.grad.detach().flatten().clone() for g in self.param_groups for p in g["params"]])
        )
        return super().step(closure)


def make_trainer(tiny: Path, tmp_path: Path, overrides=(), *, dtype=None, lora=None, perturb=0.02, lr=0.0) -> Trainer:
    """A trainer on the tiny model (no generator, no verifier: ``update`` is called directly). The policy is
    moved away from the reference copy taken at construction, so the KL term has a gradient."""
    cfg = load_recipe("demo", [*BASE, *overrides, f"out={tmp_path}"])
    model, tok = load_policy(tiny, device="cpu", dtype=dtype, lora=lora)
    tr = Trainer(cfg, model, tok, None, None, problems())
    if perturb:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in (p for p in tr.model.parameters() if p.requires_grad):
                p.add_(perturb * torch.randn(p.shape, generator=g).to(p.dtype))
    if lr is not None:
        tr.optimizer = RecordingSGD([p for p in tr.model.parameters() if p.requires_grad], lr=lr)
    return tr


def make_groups(
    tok, sizes=(4, 3, 4), rewards=((1, 0, 0, 0), (1, 1, 0), (0, 1, 1, 1)), lengths=None, seed=0
) -> list[Group]:
    fmt, probs = get_format("coq"), problems()
    g = torch.Generator().manual_seed(seed)
    groups = []
    for gi, n in enumerate(sizes):
        prob = probs[gi % len(probs)]
        text = fmt.prompt(prob, tok)
        comps = []
        for j in range(n):
            k = lengths[gi][j] if lengths else int(torch.randint(1, MAX_TOKENS + 1, (1,), generator=g))
            ids = tuple(int(t) for t in torch.randint(5, len(tok), (k,), generator=g))
            comps.append(Completion(tok.decode(ids), ids, (0.0,) * k, "stop"))
        groups.append(
            Group(PromptItem(prob, text, 1, text), comps, [None] * n, rewards=[float(r) for r in rewards[gi]])
        )
    return groups


def reference_gradient(tr: Trainer, groups: list[Group]) -> tuple[torch.Tensor, float]:
    """The definition, row by row: log π(o_t | q, o_<t) = log softmax(z / τ)[o_t] from one unpadded forward
    pass; advantages by the plain-loop group reference; the loss of :mod:`proofrl.objectives.grpo` over the whole
    batch with H = max_tokens. Returns the gradient and the mean token entropy at τ."""
    cfg, ppo = tr.cfg, tr.cfg.ppo
    tau = cfg.rollout.temperature
    from proofrl.policy.generation import encode_prompts

    def row_logps(model, prompt, resp):
        logits = model(torch.tensor([list(prompt) + list(resp)])).logits[0].float() / tau
        lsm = torch.log_softmax(logits[len(prompt) - 1 : len(prompt) - 1 + len(resp)], -1)
        ent = -(lsm.exp() * lsm).sum(-1)
        return lsm.gather(-1, torch.tensor(resp).unsqueeze(-1)).squeeze(-1), ent

    rows = [
        (p, c.token_ids)
        for g, p in zip(groups, encode_prompts(tr.tokenizer, [g.item.prompt for g in groups]), strict=True)
        for c in g.completions
    ]
    width = max(len(r) for _, r in rows)
    pad = lambda xs: torch.stack([torch.nn.functional.pad(x, (0, width - len(x))) for x in xs])  # noqa: E731
    mask = pad([torch.ones(len(r)) for _, r in rows])
    params = [p for p in tr.model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    tr.model.eval()
    new, ents = zip(*(row_logps(tr.model, p, r) for p, r in rows), strict=True)
    logp = pad(list(new))
    with torch.no_grad():
        if tr.lm.ref_model == "adapter-off":
            with tr.model.disable_adapter():
                ref = pad([row_logps(tr.model, p, r)[0] for p, r in rows])
        else:
            ref = pad([row_logps(tr.lm.ref_model, p, r)[0] for p, r in rows])
    rewards = torch.tensor([r for g in groups for r in g.rewards])
    gids = torch.tensor([gi for gi, g in enumerate(groups) for _ in g.completions])
    adv = group_advantages_loop(rewards, gids, scale_by_std=cfg.algorithm.advantage == "grpo")
    loss = ppo_clip_loss(
        logp,
        logp.detach(),
        adv,
        mask,
        clip_ratio_low=ppo.clip_ratio_low,
        clip_ratio_high=ppo.clip_ratio_high,
        agg_mode=ppo.agg_mode,
        ref_logp=ref,
        kl_coef=ppo.kl_coef,
        kl_kind=ppo.kl_kind,
        horizon=MAX_TOKENS,
    ).loss
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in params])
    entropy = float(torch.cat(ents).detach().mean())
    for p in params:
        p.grad = None
    return grad, entropy


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("agg_mode", sorted(AGG_MODES.names()))
def test_update_gradient_is_the_definition(tiny, tmp_path, agg_mode):
    """Groups, advantages, temperature (π_old, π_θ and π_ref), KL to the reference copy, H, micro-batches of 3
    rows: the trainer's gradient equals the loss written out row by row. Putting every sample into one group,
    dropping the KL reference or scoring at τ = 1 each changes it."""
    tr = make_trainer(tiny, tmp_path, [f"ppo.agg_mode={agg_mode}"])
    groups = make_groups(tr.tokenizer)
    expected, entropy = reference_gradient(tr, groups)
    metrics = tr.update(groups)
    assert len(tr.optimizer.grads) == 1 and metrics["loss/steps"] == 1
    assert rel(tr.optimizer.grads[0], expected) < 1e-5
    assert metrics["policy/entropy"] == pytest.approx(entropy, rel=1e-5)
    assert metrics["loss/kl"] > 0


@pytest.mark.parametrize("ref", ["copy-on-cpu", "lora-adapter-off"])
def test_update_gradient_is_the_definition_for_each_reference(tiny, tmp_path, ref):
    if ref == "lora-adapter-off":
        tr = make_trainer(tiny, tmp_path, lora=LoraConfig(r=4, alpha=8, dropout=0.0), perturb=0.05)
        assert tr.lm.ref_model == "adapter-off"
    else:
        tr = make_trainer(tiny, tmp_path, ["model.ref_device=cpu"])
        assert next(tr.lm.ref_model.parameters()).device.type == "cpu"
    groups = make_groups(tr.tokenizer)
    expected, _ = reference_gradient(tr, groups)
    tr.update(groups)
    assert rel(tr.optimizer.grads[0], expected) < 1e-5


@pytest.mark.parametrize("agg_mode", sorted(AGG_MODES.names()))
def test_micro_batch_of_one_row_equals_the_whole_mini_batch(tiny, tmp_path, agg_mode):
    """``micro_batch`` rows per forward and backward pass, divisors fixed before the loop: the accumulated
    gradient is the mini-batch's (KL on, two epochs with an SGD step between them so ρ ≠ 1 in the second)."""
    grads = {}
    for micro in (1, 64):
        tr = make_trainer(
            tiny,
            tmp_path / str(micro),
            [f"ppo.agg_mode={agg_mode}", f"optim.micro_batch={micro}", "ppo.epochs=2"],
            lr=0.5,
        )
        tr.update(make_groups(tr.tokenizer))
        grads[micro] = tr.optimizer.grads
    assert len(grads[1]) == len(grads[64]) == 2
    for a, b in zip(grads[1], grads[64], strict=True):
        assert rel(a, b) < 1e-5


def test_dr_grpo_divisor_does_not_depend_on_the_neighbours(tiny, tmp_path):
    """Dr.GRPO divides by a constant H (the rollout's max_tokens): the same group gets the same gradient next to
    short or long neighbours (the neighbours' group is uninformative, so they add no gradient of their own)."""
    grads = []
    for k, neighbour_len in enumerate((1, MAX_TOKENS)):
        tr = make_trainer(
            tiny,
            tmp_path / str(k),
            [
                "algorithm.advantage=dr_grpo",
                "ppo.kl_coef=0.0",
                "ppo.agg_mode=seq-mean-token-sum-norm",
            ],
        )
        groups = make_groups(
            tr.tokenizer, sizes=(3, 2), rewards=((1, 0, 0), (1, 1)), lengths=((2, 5, 3), (neighbour_len, neighbour_len))
        )
        tr.update(groups)
        grads.append(tr.optimizer.grads[0])
    assert grads[0].norm() > 0 and rel(grads[1], grads[0]) < 1e-5


def test_bf16_compute_keeps_fp32_master_weights_that_move_at_lr_1e_6(tiny, tmp_path):
    """At lr 1e-6 AdamW's steps are far below bf16's resolution (~4e-3 relative): bf16 weights updated in place
    would almost never change. Master weights are fp32 (so is the optimiser state); forward passes run in bf16."""
    tr = make_trainer(
        tiny,
        tmp_path,
        ["model.dtype=bfloat16", "optim.lr=1e-6", "ppo.kl_coef=0.0"],
        dtype=torch.bfloat16,
        perturb=0.0,
        lr=None,
    )
    params = [p for p in tr.model.parameters() if p.requires_grad]
    assert tr.lm.compute_dtype == torch.bfloat16 and all(p.dtype == torch.float32 for p in params)
    seen = set()
    layer = tr.model.model.layers[0].self_attn.q_proj
    hook = layer.register_forward_hook(lambda m, i, o: seen.add(o.dtype))
    before = [p.detach().clone() for p in params]
    groups = make_groups(tr.tokenizer)
    for _ in range(10):
        tr.update(groups)
    hook.remove()
    assert seen == {torch.bfloat16}
    changed = sum(int((p.detach() != b).sum()) for p, b in zip(params, before, strict=True))
    total = sum(p.numel() for p in params)
    assert changed / total > 0.95, changed / total
    state = tr.optimizer.state[params[0]]
    assert state["exp_avg"].dtype == torch.float32


def test_float16_is_refused_with_one_line(tiny, tmp_path):
    for setting, dtype in (("float16", None), ("auto", torch.float16)):
        with pytest.raises(ConfigError, match="float16") as err:
            make_trainer(tiny, tmp_path, [f"model.dtype={setting}"], dtype=dtype)
        assert "\n" not in str(err.value)


def test_gradient_checkpointing_recomputes_and_gives_the_same_gradient(tiny, tmp_path):
    out = {}
    for ckpt in (False, True):
        tr = make_trainer(tiny, tmp_path / str(ckpt), [f"model.gradient_checkpointing={str(ckpt).lower()}"])
        calls = []
        hook = tr.model.model.layers[0].self_attn.register_forward_hook(
            lambda m, i, o, calls=calls: calls.append(torch.is_grad_enabled())
        )
        tr.update(make_groups(tr.tokenizer))
        hook.remove()
        out[ckpt] = (tr.optimizer.grads[0], calls.count(True))
        assert not any(m.training for m in tr.model.modules())  # dropout stayed off; flags restored
    assert out[True][1] > out[False][1]  # the layer ran again in the backward pass
    assert rel(out[True][0], out[False][0]) < 1e-5


def test_entropy_is_logged_and_large_for_an_untrained_model(tiny, tmp_path):
    tr = make_trainer(tiny, tmp_path, perturb=0.0)
    m = tr.update(make_groups(tr.tokenizer))
    assert 0 < m["policy/entropy"] <= math.log(len(tr.tokenizer)) + 1e-4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("ref_device", ["same", "cpu"])
def test_update_on_cuda_in_bf16(tiny, tmp_path, ref_device):
    cfg = load_recipe(
        "demo", [*BASE, "model.dtype=auto", f"model.ref_device={ref_device}", "optim.lr=1e-6", f"out={tmp_path}"]
    )
    model, tok = load_policy(tiny, device="cuda")  # auto: bf16 weights on CUDA
    tr = Trainer(cfg, model, tok, None, None, problems())
    assert tr.lm.compute_dtype == torch.bfloat16
    assert next(tr.lm.ref_model.parameters()).device.type == ("cpu" if ref_device == "cpu" else "cuda")
    params = [p for p in tr.model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    m = tr.update(make_groups(tok))
    assert m["loss/steps"] == 1 and m["loss/nonfinite"] == 0 and m["policy/entropy"] > 0
    assert all(p.dtype == torch.float32 and p.device.type == "cuda" for p in params)
    assert sum(int((p != b).sum()) for p, b in zip(params, before, strict=True)) > 0.9 * sum(p.numel() for p in params)
    if ref_device == "cpu":
        assert next(tr.lm.ref_model.parameters()).device.type == "cpu"  # back in CPU memory after its pass
