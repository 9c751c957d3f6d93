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


def test_one_saved_state_holds_every_random_stream_and_older_layouts_are_refused(tmp_path):
    """``state.pt``: the loop's named parts and every RNG (Python's, torch's, the loop's own), put back exactly;
    a folder whose checkpoints are in an older layout is one line naming it, never a silent fresh start."""
    import random

    import torch

    from proofrl.errors import ConfigError

    own = random.Random(7)
    random.seed(1)
    torch.manual_seed(2)
    with checkpoints.atomic_dir(tmp_path / "step_000003") as tmp:
        checkpoints.save_state(tmp, own_rng=own, step=3, optimizer={"lr": 0.1})
    expected = (random.random(), torch.rand(2), own.random())
    random.seed(9), torch.manual_seed(9), own.seed(9)
    state = checkpoints.load_state(checkpoints.latest(tmp_path, "step_"))
    assert state["step"] == 3 and state["optimizer"] == {"lr": 0.1} and state["format"] == checkpoints.STATE_FORMAT
    checkpoints.set_rng_state(state["rng"], own=own)
    got = (random.random(), torch.rand(2), own.random())
    assert got[0] == expected[0] and torch.equal(got[1], expected[1]) and got[2] == expected[2]

    old = tmp_path / "old"
    (old / "round_0002").mkdir(parents=True)
    (old / "round_0002" / "learner_state.pt").write_text("")
    with pytest.raises(ConfigError, match=r"round_0002 is a checkpoint of an older proofrl \(learner_state.pt"):
        checkpoints.latest(old, "round_")
    assert checkpoints.latest(tmp_path / "nothing", "round_") is None
