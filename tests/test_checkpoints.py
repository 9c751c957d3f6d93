"""proofrl.train.checkpoints: the one atomic checkpoint-folder mechanism of the three training loops."""

from __future__ import annotations

import pytest

from proofrl.train import checkpoints


def _write(folder, name, fail=False):
    with checkpoints.atomic_dir(folder / name) as tmp:
        (tmp / "weights").write_text(name)
        if fail:
            raise KeyboardInterrupt  # killed mid-write
        (tmp / "state.pt").write_text(name)


def test_a_write_killed_midway_leaves_the_previous_checkpoint_newest(tmp_path):
    _write(tmp_path, "step_000001")
    with pytest.raises(KeyboardInterrupt):
        _write(tmp_path, "step_000002", fail=True)
    assert (tmp_path / "step_000002.tmp").is_dir() and not (tmp_path / "step_000002").exists()
    assert checkpoints.latest(tmp_path, "step_", "state.pt") == tmp_path / "step_000001"
    _write(tmp_path, "step_000002")  # the next write clears the stale .tmp
    assert not (tmp_path / "step_000002.tmp").exists()
    assert checkpoints.latest(tmp_path, "step_", "state.pt") == tmp_path / "step_000002"


def test_a_folder_without_its_marker_is_not_complete(tmp_path):
    _write(tmp_path, "round_0001")
    (tmp_path / "round_0002").mkdir()  # e.g. written by hand, or by an older version
    assert checkpoints.latest(tmp_path, "round_", "state.pt") == tmp_path / "round_0001"


def test_prune_keeps_the_newest_and_never_counts_a_tmp(tmp_path):
    for i in range(1, 5):
        _write(tmp_path, f"v{i:04d}")
    (tmp_path / "v0005.tmp").mkdir()
    checkpoints.prune(tmp_path, "v", 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v0003", "v0004", "v0005.tmp"]
