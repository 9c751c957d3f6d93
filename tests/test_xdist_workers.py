"""``-n auto`` counts the CPUs this process may use, a cgroup v2 quota included (tests/conftest.py)."""

import os

from conftest import usable_cpus


def test_a_cgroup_quota_caps_the_workers_and_no_quota_leaves_the_affinity(tmp_path):
    here = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    assert usable_cpus(tmp_path / "missing") == here
    for text, want in [("max 100000\n", here), ("150000 100000\n", 1), ("50000 100000\n", 1), ("garbage\n", here)]:
        cpu_max.write_text(text)
        assert usable_cpus(cpu_max) == min(want, here), text
    cpu_max.write_text(f"{(here + 8) * 100000} 100000\n")  # a quota above the affinity: the affinity
    assert usable_cpus(cpu_max) == here
