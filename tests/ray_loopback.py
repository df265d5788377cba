"""A Ray cluster on this machine for the tests, on 127.0.0.1 only.

Ray on Linux advertises the machine's outward address unless told otherwise, and its switch for that
is read when Ray is imported: it is set in the environment (for the nodes and for any ckspace process
a test starts) and patched in this process.

Ray starts its workers at niceness 15 (so that a driver on the same machine stays responsive):
beside any ordinary CPU-bound process a worker then gets a few percent of a core, and one real
CK Tile compile in a Ray task took the better part of an hour on a busy 2-core CI machine. The
test nodes run their workers at the tests' own priority (``RAY_worker_niceness=0``): what the
tests check is what the cluster computes, not how politely.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def loopback_cluster(*nodes: dict) -> Iterator[str]:
    """A head with ``nodes[0]``'s arguments and one more node per further entry (``num_cpus``,
    ``resources``, ...), all on 127.0.0.1; yields the head's address and tears everything down."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        patch.setenv("RAY_worker_niceness", "0")
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        cluster = Cluster(initialize_head=True, head_node_args={**nodes[0], "node_ip_address": "127.0.0.1"})
        try:
            for node in nodes[1:]:
                cluster.add_node(**node, node_ip_address="127.0.0.1")
            cluster.wait_for_nodes()
            yield cluster.address
        finally:
            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()
