"""Connecting to a Ray cluster, for the commands that spread work over machines.

Ray is an optional extra (``pip install 'ckspace[ray]'``): it is imported here, lazily, so that
ckspace without it still imports and runs everything local; a command that asks for it gets one
line saying what to install. Nothing here knows what the work is (``ckspace build --executor ray``
and ``ckspace bench`` both connect through :func:`connected`).

Where it connects: ``address`` given, that cluster (``"auto"`` is the one ``ray start`` runs on this
machine, ``HOST:PORT`` a head node's GCS address, ``ray://HOST:10001`` Ray Client); no address, Ray's
own default: ``$RAY_ADDRESS`` when set, else a private single-machine instance started for this
process and stopped with it. The private instance makes the Ray path usable (and testable) on one
machine without a ``ray start``; joining a cluster is always explicit, so a forgotten ``ray start``
on a shared machine is never picked up by surprise. When the process is already connected (a test or
a caller that called ``ray.init`` itself), that connection is used as it is and left open.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from types import ModuleType

from ckspace.core.errors import CkspaceError

log = logging.getLogger(__name__)


def import_ray(purpose: str = "--executor ray") -> ModuleType:
    """The ``ray`` module, or a :class:`CkspaceError` naming the extra to install (``purpose`` is
    what needed it, as the user asked for it)."""
    try:
        import ray
    except ImportError:
        raise CkspaceError(f"{purpose} needs Ray: pip install 'ckspace[ray]'") from None
    return ray


def describe(ray: ModuleType) -> str:
    """Where the connected cluster is and what it offers: ``GCS address, N nodes, C CPUs``."""
    context = ray.get_runtime_context()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = int(ray.cluster_resources().get("CPU", 0))
    return f"{context.gcs_address}, {len(nodes)} node(s), {cpus} CPU(s)"


def _check_reachable(address: str) -> None:
    """Fail in seconds, not minutes, when a ``HOST:PORT`` address has nothing listening: Ray
    itself retries an unreachable GCS for several minutes before giving up."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local" or a form Ray parses itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise CkspaceError(
            f"cannot connect to Ray at {address}: {exc.strerror or exc} (is `ray start --head` "
            "running there, and is the port the one it printed?)"
        ) from None


@contextlib.contextmanager
def connected(address: str | None = None, *, purpose: str = "--executor ray") -> Iterator[ModuleType]:
    """Connect to Ray (see the module docstring for where), yield the ``ray`` module, disconnect on
    exit (unless the connection was there before). A cluster that cannot be reached is a
    :class:`CkspaceError` naming the address."""
    ray = import_ray(purpose)
    if ray.is_initialized():
        log.info("using the open Ray connection: %s", describe(ray))
        yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    _check_reachable(address)
    try:
        ray.init(
            address=address,
            logging_level=logging.WARNING,
            log_to_driver=False,
            include_dashboard=False,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CkspaceError(f"cannot connect to Ray at {address}: {first}") from None
    try:
        log.info("connected to Ray: %s", describe(ray))
        yield ray
    finally:
        ray.shutdown()
