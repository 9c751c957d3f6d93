"""`proofrl serve`'s file and flags are checked when they load, with the same schema as the recipes."""

from __future__ import annotations

import pytest

from proofrl.errors import ConfigError
from proofrl.provers.pool import PoolConfig
from proofrl.server.config import load_serve_config


def test_the_pool_section_is_the_pools_own_settings_with_ranges():
    assert load_serve_config().pool == PoolConfig() and type(load_serve_config().pool) is PoolConfig
    with pytest.raises(ConfigError, match=r"workers must be >= 1, got 0"):
        PoolConfig(workers=0)


def test_defaults_files_and_flags(tmp_path):
    cfg = load_serve_config()
    assert cfg.backends == ["coq"] and cfg.port == 8000 and cfg.pool == PoolConfig()
    assert (cfg.backend, cfg.max_batch, cfg.api_key) == ("coq", 1024, None)
    path = tmp_path / "serve.yaml"
    path.write_text("backends: [lean, coq]\npool: {workers: 3}\nmax_batch: 8\nprover: {memory_mb: 100}\n")
    cfg = load_serve_config(path, backend="coq", workers=5, api_key="k", port=9000)
    assert cfg.backends == ["coq", "lean"] and cfg.backend == "coq" and cfg.port == 9000
    assert (cfg.pool.workers, cfg.max_batch, cfg.api_key, cfg.prover) == (5, 8, "k", {"memory_mb": 100})


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        ("", {"workers": 0}, r"^pool.workers must be >= 1, got 0$"),
        ("", {"timeout": -1.0}, r"^pool.timeout must be > 0, got -1.0$"),
        ("", {"sandbox": "chroot"}, r"^sandbox must be one of \['auto', 'bwrap', 'unshare', 'off'\], got 'chroot'$"),
        ("backends: [coq, isabelle]", {}, r"^backends\[1\] must be one of \['coq', 'lean'\], got 'isabelle'$"),
        ("port: 70000", {}, r"^port must be in \[0, 65535\], got 70000$"),
        ("max_batch: lots", {}, r"^max_batch: expected int, got 'lots'$"),
        ("max_batch: 0", {}, r"^max_batch must be >= 1, got 0$"),
        ("max_bach: 1", {}, r"^unknown keys in the config: \['max_bach'\]; known: \[.*'max_batch'"),
        ("server: {max_batch: 8}", {}, r"^server: no longer a section, its keys are one level up \(max_batch\)$"),
        ("prover: {memory_mb: lots}", {}, r"^prover.memory_mb: expected int, got 'lots'$"),
        ("hosts: x", {}, r"^unknown keys in the config: \['hosts'\]"),
        ("pool: [1]", {}, r"^pool: expected a mapping, got \[1\]$"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(tmp_path, text, flags, message):
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_serve_config(path, **flags)
