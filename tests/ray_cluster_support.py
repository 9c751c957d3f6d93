"""The Ray tests' cluster: :class:`proofrl.distributed.simulated.SimCluster` (Ray's own multi-node test cluster,
a raylet per simulated node), this process connected to it as the driver."""

from __future__ import annotations

import os
from pathlib import Path

import ray

from proofrl.distributed.simulated import SimCluster

TESTS = Path(__file__).parent


def start_cluster(nodes: int) -> SimCluster:
    """``nodes`` worker nodes of one CPU, this process their driver (namespace ``proofrl``; workers import the
    tests' support modules, e.g. the scripted policy). Stop it with :func:`stop_cluster`."""
    sim = SimCluster()
    sim.ensure(nodes)
    path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
    ray.init(
        address=sim.address, namespace="proofrl", log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}}
    )
    return sim


def stop_cluster(sim: SimCluster) -> None:
    ray.shutdown()
    sim.shutdown()
