"""A multi-node Ray cluster on one machine, for tests and benchmarks: Ray's own ``ray.cluster_utils.Cluster``
(one raylet per simulated node, each with its own resources, object store and worker processes).

    sim = SimCluster()               # the head: no CPUs, so work goes to the worker nodes (the driver's node)
    sim.ensure(3)                    # three worker nodes of one CPU each, resources nodeN and coq
    ray.init(address=sim.address)    # this process becomes the driver
    sim.remove(sim.nodes[1])         # SIGKILL that node's raylet and workers, as when a machine dies
    sim.shutdown()

Kept cheap: one declared CPU per node (a simulated node may declare more CPUs than the machine has; Ray only
counts them), 80 MiB object stores, and Ray's health check every 300 ms so that a dead node is noticed in about a
second rather than Ray's default half minute.
"""

from __future__ import annotations

import os
from typing import Any

STORE_BYTES = 80 * 2**20
FAST_HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 300,
    "health_check_timeout_ms": 300,
    "health_check_failure_threshold": 3,
}


class SimCluster:
    """The cluster and its worker nodes (``nodes``: the live ones, in the order they were added)."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token file for a throwaway cluster
        self.c = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "object_store_memory": STORE_BYTES,
                "include_dashboard": False,
                "_system_config": FAST_HEALTH,
            },
        )
        self.nodes: list[Any] = []
        self.without_coq: list[Any] = []
        self.added = 0

    @property
    def address(self) -> str:
        return self.c.address

    def add(self, path: str | None = None, cpus: int = 1) -> Any:
        """A worker node with resources ``nodeN`` and, unless its raylet gets ``path`` as PATH (a machine whose
        programs are those), ``coq``; its workers inherit the raylet's environment."""
        resources = {f"node{self.added}": 1.0, **({"coq": 1.0} if path is None else {})}
        old = os.environ.get("PATH", "")
        if path is not None:
            os.environ["PATH"] = path
        try:
            node = self.c.add_node(num_cpus=cpus, resources=resources, object_store_memory=STORE_BYTES)
        finally:
            os.environ["PATH"] = old
        self.added += 1
        self.nodes.append(node)
        if path is not None:
            self.without_coq.append(node)
        self.c.wait_for_nodes()
        return node

    def remove(self, node: Any) -> None:
        """Kill the node (SIGKILL to its raylet and workers: it dies, it does not drain)."""
        self.nodes.remove(node)
        self.c.remove_node(node, allow_graceful=False)

    def coq_nodes(self) -> list[Any]:
        return [x for x in self.nodes if x not in self.without_coq]

    def ensure(self, n: int) -> None:
        """At least ``n`` live nodes with Coq."""
        while len(self.coq_nodes()) < n:
            self.add()

    def shutdown(self) -> None:
        self.c.shutdown()
