"""What a person reads from `proofrl demo`: each long step draws one bar of its own, so the bars transformers draws
on every save_pretrained / from_pretrained ("Writing model shards", "Loading weights") stay off in every part,
including a part run alone (--part)."""

from __future__ import annotations

from typing import Any

import pytest


def save_and_load_part(ctx: Any) -> dict[str, Any]:
    """A demo part that saves and loads a tiny model, as the parts that build or read the tactic model do."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    LlamaForCausalLM(config).save_pretrained(ctx.out / "model")
    LlamaForCausalLM.from_pretrained(ctx.out / "model")
    (ctx.out / "report.md").write_text("# probe\n")
    return {}


@pytest.fixture
def hf_bars_on():
    """transformers' bars as a fresh process has them (another test may have switched them off)."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    yield
    hf_logging.enable_progress_bar()


def test_a_part_run_alone_shows_no_library_progress_bars(tmp_path, monkeypatch, capfd, hf_bars_on):
    from proofrl.demo import DEMO_PARTS, DemoPart, run_parts

    probe = DemoPart("probe", "test_demo_output:save_and_load_part", "saves and loads a model")
    monkeypatch.setitem(DEMO_PARTS, "probe", probe)
    run_parts(tmp_path, ["probe"], workers=1)
    out, err = capfd.readouterr()
    assert (tmp_path / "probe" / "model" / "config.json").is_file()
    for bar in ("Writing model shards", "Loading weights", "it/s]"):
        assert bar not in out + err


def test_the_index_report_points_at_the_bench_for_the_claims(tmp_path, monkeypatch):
    from proofrl.demo import DEMO_PARTS, DemoPart, run_parts

    probe = DemoPart("probe", "test_demo_output:save_and_load_part", "saves and loads a model")
    monkeypatch.setitem(DEMO_PARTS, "probe", probe)
    run_parts(tmp_path, ["probe"], workers=1)
    assert "`proofrl bench`" in (tmp_path / "report.md").read_text()
