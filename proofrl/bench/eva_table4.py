"""The EVA paper's Table 4 as an experiment: the SFT-only generative RM, the value-head RM and EVA, each
trained from one base model on the same judged proposals, then scored with the untrained base on held-out ones.

* **Training** comes from :mod:`proofrl.train.eva` (L_SFT + α · L_EVA; α = 0 is the SFT-only generative RM);
  the **value-head baseline** (:class:`RegressionHeadRM`: a linear head on the last hidden state of the prompt,
  one output per dimension, MSE on the continuous scores; the paper's "Value-head RM") is trained here, since
  only this comparison uses it.
* **Scoring** is :mod:`proofrl.eval.rm`'s (MSE per dimension, Pearson r, ranking accuracy; greedy decoding).

``proofrl eval rm --train T --base B`` runs it (:func:`cli_table4`); ``benchmarks/eva.py`` too (:func:`table4`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..eval.rm import Record, prompt_of, read_records
from ..rewards.eva import DIMENSIONS
from ..train.config import EvaConfig
from ..train.eva import build_examples, load_base, train_eva

# -- the value-head baseline ------------------------------------------------------------------------------------


class RegressionHeadRM(nn.Module):
    """The paper's value-head RM: Linear(hidden, K) on the last hidden state of the prompt, trained with MSE
    on the K continuous scores (no critique)."""

    def __init__(self, lm: Any, tokenizer: Any, dims: Sequence[str] = DIMENSIONS, max_state_chars: int = 600):
        super().__init__()
        self.lm, self.tokenizer, self.dims, self.max_state_chars = lm, tokenizer, tuple(dims), max_state_chars
        self.head = nn.Linear(int(lm.config.hidden_size), len(self.dims)).to(next(lm.parameters()).device)
        nn.init.zeros_(self.head.weight)
        nn.init.constant_(self.head.bias, 3.0)  # the middle of 1–5: no opinion until taught

    def forward(self, prompts: Sequence[str]) -> torch.Tensor:
        from ..policy.generation import encode_prompts
        from ..policy.logprobs import left_pad, position_ids

        limit = getattr(self.lm.config, "max_position_embeddings", None)
        rows = [r[-limit:] if limit else r for r in encode_prompts(self.tokenizer, prompts)]
        ids, mask = left_pad(rows, self.tokenizer.pad_token_id, self.head.weight.device)
        out = self.lm(
            input_ids=ids,
            attention_mask=mask,
            position_ids=position_ids(mask),
            output_hidden_states=True,
            use_cache=False,
        )
        return self.head(out.hidden_states[-1][:, -1].float())  # left padding: the last column is the last token

    def predict(self, records: Sequence[Record], batch: int = 16) -> list[dict[str, float]]:
        self.eval()
        out = []
        with torch.no_grad():
            for s in range(0, len(records), batch):
                y = self([prompt_of(r, self.max_state_chars) for r in records[s : s + batch]])
                out += [{d: float(v) for d, v in zip(self.dims, row, strict=True)} for row in y.tolist()]
        return out


def train_value_head(
    rm: RegressionHeadRM,
    records: Sequence[Record],
    *,
    lr: float,
    batch: int,
    epochs: int,
    seed: int = 0,
    weight_decay: float = 0.01,
) -> list[float]:
    """MSE on the continuous scores; the head learns at 10× ``lr`` (it starts from nothing). Per-epoch MSE."""
    from ..policy.sft import BatchLoss, supervised_loop

    head_params = list(rm.head.parameters())
    lm_params = [p for p in rm.lm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        [{"params": lm_params, "lr": lr}, {"params": head_params, "lr": 10 * lr}], weight_decay=weight_decay
    )

    def batch_loss(idx: list[int]) -> BatchLoss:
        part = [records[i] for i in idx]
        y = rm([prompt_of(r, rm.max_state_chars) for r in part])
        t = torch.tensor([[r.scores[d] for d in rm.dims] for r in part], device=y.device)
        loss = ((y - t) ** 2).mean()
        return BatchLoss(loss, {"mse": (float(loss.detach()), len(part))})

    rm.train()
    res = supervised_loop(
        opt,
        len(records),
        batch_loss,
        epochs=epochs,
        batch=batch,
        generator=torch.Generator().manual_seed(seed),
        params=[*lm_params, *head_params],
    )
    rm.eval()
    return [h["mse"] for h in res.epochs]


# -- Table 4 ----------------------------------------------------------------------------------------------------


def table4(
    base: str | Path,
    train: Sequence[Any],
    held_out: Sequence[Any],
    cfg: EvaConfig | None = None,
    *,
    console: Any = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """The EVA paper's Table 4: train the SFT-only generative RM, the value-head RM and EVA from ``base`` on
    ``train``; score them and the untrained base on ``held_out`` (:mod:`proofrl.eval.rm`). ``cfg`` is the ``eva``
    recipe with overrides (None: the recipe; ``model.lora=null``: full fine-tuning); its ``algorithm.alpha``,
    ``tau``, ``optim``, ``seed``, ``eval.max_tokens``, ``data.max_state_chars`` and ``model.lora``/``device`` are
    read. Returns ``{"rows": {name: metrics}, "flags", "seconds", "index"}``; with ``out``, the EVA model is saved
    in ``out/eva-model``."""
    from ..eval.rm import evaluate_generative, metrics
    from ..rewards.eva import EvaScorer

    if cfg is None:
        from ..train.eva import load_config

        cfg = load_config("eva")
    seed, lora, device = cfg.seed, cfg.model.lora, cfg.model.device or None
    max_state_chars, o = cfg.data.max_state_chars, cfg.optim
    torch.manual_seed(seed)
    rows: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    kw: dict[str, Any] = dict(
        max_new_tokens=cfg.eval.max_tokens, max_state_chars=max_state_chars, tau=cfg.algorithm.tau
    )

    def log(msg: str) -> None:
        if console is not None:
            console.print(msg)

    t = time.perf_counter()
    m, tok = load_base(base, lora=None, device=device)
    r = evaluate_generative(EvaScorer(m, tok, **kw), held_out)
    rows["zero-shot"], flags["zero-shot"] = r["eva"], r["flags"]
    seconds["zero-shot"] = time.perf_counter() - t
    index = None
    for name, alpha in (("sft", 0.0), ("eva", cfg.algorithm.alpha)):
        t = time.perf_counter()
        m, tok = load_base(base, lora=lora, device=device)
        ex, rep = build_examples(train, tok, max_state_chars=max_state_chars)
        index = rep.to_json()
        train_eva(
            m,
            tok,
            ex,
            alpha=alpha,
            tau=cfg.algorithm.tau,
            lr=o.lr,
            batch=o.batch,
            epochs=o.epochs,
            seed=seed,
            console=console,
        )
        r = evaluate_generative(EvaScorer(m, tok, **kw), held_out)
        if name == "sft":
            rows["sft-text"], rows["sft-eR"] = r["text"], r["eva"]
        else:
            rows["eva"], rows["eva-text"] = r["eva"], r["text"]
            if out is not None:
                m.save_pretrained(out / "eva-model")
                tok.save_pretrained(out / "eva-model")
        flags[name] = r["flags"]
        seconds[name] = time.perf_counter() - t
        log(f"{name}: trained and scored in {seconds[name]:.0f} s; flags {r['flags']}")
    t = time.perf_counter()
    m, tok = load_base(base, lora=lora, device=device)
    vh = RegressionHeadRM(m, tok, max_state_chars=max_state_chars)
    train_value_head(vh, train, lr=o.lr, batch=o.batch, epochs=o.epochs, seed=seed)
    rows["value-head"] = metrics(vh.predict(held_out), held_out)
    seconds["value-head"] = time.perf_counter() - t
    order = ["zero-shot", "sft-text", "sft-eR", "value-head", "eva-text", "eva"]
    return {
        "rows": {k: rows[k] for k in order},
        "flags": flags,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "index": index,
        "train": len(train),
        "held_out": len(held_out),
    }


def cli_table4(
    data: Path,
    *,
    train: Path,
    base: Path,
    out: Path = Path("runs/eval-rm"),
    epochs: int = 3,
    lr: float = 2e-5,
    batch: int = 8,
    alpha: float = 0.5,
    max_new_tokens: int = 96,
    seed: int = 0,
) -> dict[str, Any]:
    """``proofrl eval rm --train T --base B``: Table 4 trained here and scored by :mod:`proofrl.eval.rm` on
    ``data``; writes ``out/report.md``, ``out/summary.json``, ``out/table4.png``."""
    from rich.console import Console

    from ..eval.rm import held_out_records, write_report

    console = Console()
    held, skipped = held_out_records(data)
    tr, _ = read_records(train)
    if not tr:
        raise ConfigError(f"{train}: no usable EVA record")
    out.mkdir(parents=True, exist_ok=True)
    from ..train.eva import load_config

    cfg = load_config(
        "eva",
        [
            f"algorithm.alpha={alpha}",
            f"optim.lr={lr}",
            f"optim.batch={batch}",
            f"optim.epochs={epochs}",
            f"seed={seed}",
            f"eval.max_tokens={max_new_tokens}",
        ],
    )
    res = table4(base, tr, held, cfg, console=console, out=out)
    console.print(write_report(res, len(held), data, out, skipped))
    console.print(f"report: {out / 'report.md'}")
    return res
