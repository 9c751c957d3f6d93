"""Training the EVA reward model: L = L_SFT + α · L_EVA in one forward pass (the paper's Algorithm 1).

* **Data** (:func:`read_records`): JSONL, one judged proposal a line — ``instruction`` (optional),
  ``state`` (the tactic state), ``proposal``, ``critique``, ``scores`` (``{"logic": 3.8, "align": 2.1,
  "clarity": 4.0}``, continuous 1.0–5.0; ``logic_score`` … keys are read too). The text target is the
  critique and the JSON scores *rounded* (:func:`~proofrl.rewards.eva.render_target`); the continuous values
  are the EVA loss's targets. A bad line is skipped and counted with its reason, never fatal.
* **Examples** (:func:`build_examples`): prompt ids as the generators encode them, target ids + EOS, and each
  score digit's index in the target (:func:`~proofrl.rewards.eva.score_token_positions`). An example whose
  positions are missing, ambiguous, merged with other characters, or cut off by the length limit keeps its
  LM loss and is left out of the EVA loss; :class:`IndexReport` counts them by reason.
* **Loss** (:func:`eva_loss`): rows ``[left-padded prompt | right-padded target]`` (the layout of
  :mod:`proofrl.policy.logprobs`), one forward pass; L_SFT = −mean log π(target tokens) (the same
  :func:`~proofrl.policy.logprobs.token_logprobs`); L_EVA = mean over score positions of
  (E[R_k] − R_GT,k)², E[R] = :func:`~proofrl.rewards.eva.expected_score` of the logits at the digit's
  index − 1. α = 0 is the SFT-only generative RM.
* **Table 4** (this loss at α = 0.5 and α = 0 against the paper's value-head RM) is an experiment:
  :mod:`proofrl.bench.eva_table4`.

Defaults are the paper's (§5): anchors 1–5, τ = 1, α = 0.5, LoRA r = 16, alpha = 32 on q/k/v/o/gate/up/down,
AdamW lr 2e-5, batch 8, 3 epochs, bf16 on a GPU (fp32 on a CPU). Run: ``proofrl train --recipe eva``.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from ..eval.rm import Record, parse_record, prompt_of, read_records  # noqa: F401  (the EVA data format)
from ..policy.model import LoraConfig, load_policy, load_weights
from ..rewards.eva import (
    ANCHORS,
    CONFIG_FILE,
    DIMENSIONS,
    ScorePositionError,
    anchor_token_ids,
    expected_score,
    render_target,
    score_key,
    score_token_positions,
)
from .checkpoints import load_state, save_state, set_rng_state
from .config import EvaConfig
from .rundir import RunDir


def load_config(recipe: str | Path = "eva", overrides: Sequence[str] = ()) -> EvaConfig:
    """The recipe's YAML with ``key.sub=value`` overrides (:mod:`proofrl.train.recipes`); one ConfigError line on
    any mistake."""
    from .recipes import LOOPS

    return LOOPS["eva"].config(recipe, overrides)


# -- data -----------------------------------------------------------------------------------------------------


@dataclass
class Example:
    prompt_ids: list[int]
    target_ids: list[int]
    positions: dict[str, int]
    """dimension → index of its score digit in ``target_ids`` (empty: not in the EVA loss)"""
    targets: dict[str, float]


@dataclass
class IndexReport:
    examples: int = 0
    in_eva_loss: int = 0
    left_out: Counter = field(default_factory=Counter)
    """reason (``missing``, ``ambiguous``, ``not-an-anchor``, ``truncated``) → examples"""

    def to_json(self) -> dict[str, Any]:
        return {"examples": self.examples, "in_eva_loss": self.in_eva_loss, "left_out": dict(self.left_out)}


def build_examples(
    records: Sequence[Record],
    tokenizer: Any,
    *,
    dims: Sequence[str] = DIMENSIONS,
    max_tokens: int = 1024,
    max_state_chars: int = 600,
    targets: Sequence[str] | None = None,
) -> tuple[list[Example], IndexReport]:
    """Tokenised examples with exact score positions (see the module docstring). ``targets`` replaces the
    rendered target texts (tests use it for malformed ones)."""
    from ..policy.generation import encode_prompts

    anchors = anchor_token_ids(tokenizer)
    keys = [score_key(d) for d in dims]
    texts = list(targets) if targets is not None else [render_target(r.critique, r.scores, dims) for r in records]
    prompts = encode_prompts(tokenizer, [prompt_of(r, max_state_chars) for r in records])
    rep = IndexReport()
    out = []
    for r, text, p in zip(records, texts, prompts, strict=True):
        enc = tokenizer(text, add_special_tokens=False)
        t_ids = [*enc["input_ids"], tokenizer.eos_token_id]
        try:
            pos = score_token_positions(text, tokenizer, keys, encoding=enc, anchor_ids=anchors)
        except ScorePositionError as e:
            pos, reason = {}, e.reason
        else:
            reason = ""
        room = max_tokens - len(t_ids)
        if room < 8:  # the target alone is too long: keep a little prompt, cut the target's end
            p = p[-8:]
            t_ids = t_ids[: max(1, max_tokens - len(p))]
        elif len(p) > room:
            p = p[:1] + p[len(p) - room + 1 :]  # keep BOS and the prompt's end (the proposal)
        if pos and max(pos.values()) >= len(t_ids):
            pos, reason = {}, "truncated"
        rep.examples += 1
        if pos:
            rep.in_eva_loss += 1
        else:
            rep.left_out[reason] += 1
        out.append(Example(p, t_ids, {d: pos[score_key(d)] for d in dims} if pos else {}, dict(r.scores)))
    return out, rep


# -- the loss -------------------------------------------------------------------------------------------------


def collate(examples: Sequence[Example], pad_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(input_ids, attention_mask, P)``: ``[left-padded prompt | right-padded target]``; a target token j of
    row i sits at column P + j."""
    from ..policy.logprobs import left_pad, right_pad

    q, qm = left_pad([e.prompt_ids for e in examples], pad_id, device)
    o, om = right_pad([e.target_ids for e in examples], pad_id, device)
    return torch.cat([q, o], 1), torch.cat([qm, om], 1), q.shape[1]


@dataclass
class LossParts:
    total: torch.Tensor
    lm: float
    eva: float
    positions: int


def eva_term(
    logits: torch.Tensor,
    examples: Sequence[Example],
    prompt_width: int,
    *,
    anchor_ids: Sequence[int],
    tau: float = 1.0,
    dims: Sequence[str] = DIMENSIONS,
) -> tuple[torch.Tensor | None, int]:
    """L_EVA = mean over the batch's score positions of (E[R_k] − R_GT,k)², E[R] read from the logits at each
    digit's column − 1 (rows laid out by :func:`collate`, ``prompt_width`` = P); ``(None, 0)`` when no example
    of the batch has its positions."""
    from ..rewards.eva import gather_positions

    rows, cols, gts = [], [], []
    for i, e in enumerate(examples):
        for d in dims:
            if d in e.positions:
                rows.append(i)
                cols.append(prompt_width + e.positions[d])  # the digit's column; its logits are read at column − 1
                gts.append(e.targets[d])
    if not rows:
        return None, 0
    er = expected_score(gather_positions(logits, rows, cols), anchor_ids, tau)
    return ((er - torch.tensor(gts, device=er.device)) ** 2).mean(), len(rows)


def eva_loss(
    model: Any,
    examples: Sequence[Example],
    *,
    anchor_ids: Sequence[int],
    alpha: float,
    tau: float,
    pad_id: int,
    dims: Sequence[str] = DIMENSIONS,
) -> LossParts:
    """L_SFT + α · L_EVA over one batch, one forward pass."""
    from ..policy.logprobs import position_ids, token_logprobs

    device = next(model.parameters()).device
    ids, mask, P = collate(examples, pad_id, device)
    T = ids.shape[1] - P
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask), use_cache=False).logits
    # LM: the logits at columns P−1 … P+T−2 predict the target tokens at P … P+T−1
    lp, _ = token_logprobs(logits[:, P - 1 : P + T - 1], ids[:, P:])
    tmask = mask[:, P:].float()
    lm = -(lp * tmask).sum() / tmask.sum()
    ev, n = eva_term(logits, examples, P, anchor_ids=anchor_ids, tau=tau, dims=dims)
    if ev is None:
        return LossParts(lm, float(lm.detach()), float("nan"), 0)
    return LossParts(lm + alpha * ev, float(lm.detach()), float(ev.detach()), n)


def train_eva(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    *,
    alpha: float,
    tau: float = 1.0,
    lr: float = 2e-5,
    batch: int = 8,
    epochs: int = 3,
    seed: int = 0,
    weight_decay: float = 0.01,
    dims: Sequence[str] = DIMENSIONS,
    console: Any = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    save: Callable[[int, dict[str, Any]], None] | None = None,
    resume: dict[str, Any] | None = None,
) -> list[dict[str, float]]:
    """AdamW on :func:`eva_loss` (gradient norm clipped at 1, a seeded shuffle per epoch, as the SFT loop of
    :mod:`proofrl.policy.sft`, whose loss it extends). Returns per-epoch means of total, LM and EVA loss.

    ``save(epochs done, state)`` after each epoch, ``state`` what a resumed run needs beside the weights
    (``optimizer``, the shuffle's ``generator``); ``resume``: such a state (with ``epoch``), to go on from there
    on a model that already holds that epoch's weights."""
    from ..policy.sft import BatchLoss, supervised_loop
    from ..progress import progress_bar

    anchors = anchor_token_ids(tokenizer)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    start = 0
    if resume is not None:
        opt.load_state_dict(resume["optimizer"])
        generator.set_state(resume["generator"])
        start = int(resume["epoch"])

    def batch_loss(idx: list[int]) -> BatchLoss:  # L_SFT and L_EVA read the logits of one forward pass
        part = [examples[i] for i in idx]
        loss = eva_loss(model, part, anchor_ids=anchors, alpha=alpha, tau=tau, pad_id=tokenizer.pad_token_id, dims=dims)
        parts: dict[str, tuple[float, float]] = {
            "loss": (float(loss.total.detach()), len(part)),
            "lm": (loss.lm, len(part)),
        }
        if loss.positions and not math.isnan(loss.eva):
            parts["eva_mse"] = (loss.eva, loss.positions)
        return BatchLoss(loss.total, parts)

    hist = []
    model.train()
    with progress_bar(transient=True, console=console) as bar:
        task = bar.add_task(
            "EVA training" if alpha else "SFT (generative RM)",
            total=epochs * len(examples),
            completed=start * len(examples),
        )

        def epoch_done(epoch: int, m: dict[str, float]) -> None:
            hist.append({"epoch": epoch, "loss": m["loss"], "lm": m["lm"], "eva_mse": m.get("eva_mse", float("nan"))})
            if on_epoch:
                on_epoch(epoch, hist[-1])
            if save:
                save(epoch + 1, {"optimizer": opt.state_dict(), "generator": generator.get_state()})

        supervised_loop(
            opt,
            len(examples),
            batch_loss,
            epochs=epochs,
            batch=batch,
            generator=generator,
            params=params,
            on_batch=lambda k: bar.advance(task, k),
            on_epoch=epoch_done,
            start_epoch=start,
        )
    model.eval()
    return hist


# -- models ------------------------------------------------------------------------------------------------------


def load_base(path: str | Path, *, lora: LoraConfig | None, device: str | None = None) -> tuple[Any, Any]:
    """The base model (a fresh copy each call) with LoRA when enabled."""
    model, tok = load_policy(path, device=device or None, lora=lora)
    if lora is None:
        for p in model.parameters():
            p.requires_grad_(True)
    return model, tok


def build_tiny_base(out_dir: Path, records: Sequence[Record], *, seed: int = 0) -> Path:
    """A tiny Llama whose byte-level BPE is trained on the records' prompts and targets (anchors stay single
    tokens: every byte is one, and the compact JSON keeps digits apart)."""
    from ..policy.tiny import build_tiny_model

    texts = [prompt_of(r) + render_target(r.critique, r.scores) for r in records]
    return build_tiny_model(out_dir, texts, seed=seed, vocab_size=1024, hidden=128, layers=2, heads=4)


def save_rm(model: Any, tokenizer: Any, out: Path, cfg: EvaConfig, extra: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    settings = {
        "dims": list(cfg.algorithm.dims),
        "anchors": list(ANCHORS),
        "tau": cfg.algorithm.tau,
        "weights": dict(cfg.algorithm.weights) or None,
        "max_state_chars": cfg.data.max_state_chars,
        "policy": cfg.policy,
        "alpha": cfg.algorithm.alpha,
        **extra,
    }
    (out / CONFIG_FILE).write_text(json.dumps(settings, indent=2))
    return out


# -- the recipe ---------------------------------------------------------------------------------------------------


def run(cfg: EvaConfig) -> dict[str, Any]:
    """``proofrl train --recipe eva``: read the data, train with L_SFT + α·L_EVA, save the model with its
    ``eva_config.json``, score the held-out file when there is one. The run folder (:class:`.rundir.RunDir`,
    step name ``epoch``) gets ``config.yaml``, one record per epoch and ``summary.json`` in the recipe's trackers."""
    from rich.console import Console

    console = Console()
    out = Path(cfg.out)
    run_dir = RunDir(out, step_key="epoch", loggers=cfg.logger, name="eva")
    ckpt = run_dir.latest()
    state = load_state(ckpt) if ckpt is not None else None
    run_dir.start(cfg, resumed_from=state["epoch"] if state is not None else None)
    try:
        return _train_and_score(cfg, out, run_dir, console, ckpt, state)
    finally:
        run_dir.close()


def _train_and_score(
    cfg: EvaConfig, out: Path, run_dir: Any, console: Any, ckpt: Path | None, state: dict[str, Any] | None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    train_path, eval_path = cfg.data.train, cfg.data.eval
    if not train_path:
        from ..preflight import require_backend

        require_backend("coq")
        from ..data.eva_labels import STEP_TIMEOUT, stdlib_labels

        if cfg.data.limit is None:
            raise ConfigError(
                "data.limit: the prover-labelled set needs a number of theorems per split (the recipe: 24)"
            )

        paths = stdlib_labels(
            out / "labels",
            theorems=cfg.data.limit,
            held_out_theorems=cfg.data.eval_limit,
            policy=cfg.policy,
            states_per_theorem=cfg.data.states_per_theorem,
            search=cfg.search,
            step_timeout=cfg.search.tactic_timeout if cfg.search is not None else STEP_TIMEOUT,
            seed=cfg.seed,
            console=console,
        )
        train_path, eval_path = str(paths["train"]), eval_path or str(paths["held-out"])
    records, skipped = read_records(train_path, cfg.algorithm.dims)
    if skipped:
        console.print(f"[yellow]skipped {sum(skipped.values())} lines of {train_path}[/]: {dict(skipped)}")
    if not records:
        raise ConfigError(f"{train_path}: no usable EVA record (skipped: {dict(skipped)})")
    base = cfg.model.path or str(build_tiny_base(out / "tiny-base", records, seed=cfg.seed))
    torch.manual_seed(cfg.seed)  # LoRA's initial weights, and anything else drawn from the global stream
    model, tok = load_base(base, lora=cfg.model.lora, device=cfg.model.device or None)
    if ckpt is not None and state is not None:
        load_weights(model, ckpt)
        set_rng_state(state["rng"])
        console.print(f"EVA: resumed from {ckpt.name} (epoch {state['epoch']})")
    examples, rep = build_examples(
        records, tok, dims=cfg.algorithm.dims, max_tokens=cfg.data.max_tokens, max_state_chars=cfg.data.max_state_chars
    )
    console.print(
        f"[bold]EVA[/]: {rep.examples} examples, {rep.in_eva_loss} in the EVA loss, left out {dict(rep.left_out)}"
    )

    def epoch_done(e: int, h: dict[str, float]) -> None:
        run_dir.log(e + 1, h)
        console.print(f"epoch {e + 1}: loss {h['loss']:.4f} (LM {h['lm']:.4f}, EVA MSE {h['eva_mse']:.4f})")

    def save(epochs_done: int, parts: dict[str, Any]) -> None:  # one checkpoint per epoch, the newest two kept
        with run_dir.checkpoint(f"epoch_{epochs_done:04d}", 2) as tmp:
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            save_state(tmp, epoch=epochs_done, **parts)

    hist = train_eva(
        model,
        tok,
        examples,
        alpha=cfg.algorithm.alpha,
        tau=cfg.algorithm.tau,
        lr=cfg.optim.lr,
        batch=cfg.optim.batch,
        epochs=cfg.optim.epochs,
        seed=cfg.seed,
        weight_decay=cfg.optim.weight_decay,
        dims=cfg.algorithm.dims,
        console=console,
        on_epoch=epoch_done,
        save=save,
        resume=state,
    )
    if state is not None:  # the epochs before the resume, as the folder's log has them
        before = [r for r in run_dir.rows() if r["epoch"] <= state["epoch"]]
        hist = [
            {"epoch": r["epoch"] - 1, **{k: r[k] for k in ("loss", "lm", "eva_mse") if k in r}} for r in before
        ] + hist
    model_dir = save_rm(model, tok, out / "model", cfg, {"base": base})
    summary: dict[str, Any] = {
        "train": train_path,
        "records": len(records),
        "skipped_lines": dict(skipped),
        "index": rep.to_json(),
        "history": hist,
        "model": str(model_dir),
    }
    if eval_path:
        from ..eval.rm import evaluate_generative  # eval only evaluates; training stays here

        ev, _ = read_records(eval_path, cfg.algorithm.dims)
        if ev:
            from ..rewards.eva import EvaScorer

            scorer = EvaScorer(
                model,
                tok,
                dims=cfg.algorithm.dims,
                tau=cfg.algorithm.tau,
                weights=cfg.algorithm.weights or None,
                max_new_tokens=cfg.eval.max_tokens,
                max_state_chars=cfg.data.max_state_chars,
            )
            summary["eval"] = evaluate_generative(scorer, ev)["eva"]
            m = summary["eval"]
            console.print(
                f"held-out ({len(ev)}): MSE {m['mse']}, Pearson r {m['pearson']:.3f}, ranking acc "
                f"{m['ranking_acc']:.3f}"
            )
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    run_dir.summary(summary)
    console.print(f"model: {model_dir}\nsummary: {out / 'summary.json'}")
    return summary
