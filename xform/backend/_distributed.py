"""Multi-process: jaxlib's distributed runtime (coordination service) + gloo."""
from jaxlib import _jax

from ._client import _dist, client


def distributed_initialize(coordinator_address, num_processes, process_id,
                           num_local_devices=None, init_timeout_s=60,
                           heartbeat_timeout_s=30, shutdown_timeout_s=30):
    """Connect this process to the coordination service (process 0 starts it) and
    build a CPU client over all processes' devices with gloo TCP collectives.

    ``connect`` fails after ``init_timeout_s`` if the coordinator is unreachable."""
    port = coordinator_address.rsplit(":", 1)[1]
    if process_id == 0:
        _dist.service = _jax.get_distributed_runtime_service(
            f"[::]:{port}", num_processes, heartbeat_timeout=heartbeat_timeout_s,
            shutdown_timeout=shutdown_timeout_s)
    dclient = _jax.get_distributed_runtime_client(
        coordinator_address, process_id, init_timeout=init_timeout_s,
        heartbeat_timeout=heartbeat_timeout_s, shutdown_timeout=shutdown_timeout_s,
        use_compression=True, shutdown_on_destruction=False,
        # a callback keeps the runtime from aborting the process when the coordinator
        # cannot be reached: connect() then raises and the caller reports it
        missed_heartbeat_callback=_dist.errors.append)
    try:
        dclient.connect()
    except Exception as e:
        if _dist.service is not None:
            _dist.service.shutdown()
            _dist.service = None
        raise ConnectionError(str(e)) from None
    collectives = _jax.make_gloo_tcp_collectives(distributed_client=dclient)
    _dist.cpu_client = _jax.get_tfrt_cpu_client(
        asynchronous=True, distributed_client=dclient, node_id=process_id,
        num_nodes=num_processes, collectives=collectives, num_devices=num_local_devices,
        get_local_topology_timeout_minutes=max(1, init_timeout_s // 60),
        get_global_topology_timeout_minutes=max(1, init_timeout_s // 60))
    _dist.client = dclient
    _dist.process_id, _dist.num_processes = process_id, num_processes
    client.cache_clear()


def distributed_shutdown():
    if _dist.client is not None:
        _dist.client.shutdown()
    if _dist.service is not None:
        _dist.service.shutdown()
    _dist.client = _dist.service = _dist.cpu_client = None
    _dist.process_id, _dist.num_processes = 0, 1
    client.cache_clear()


def distributed_barrier(name, timeout_s=60):
    """Wait until every process reaches the barrier ``name`` (a no-op in one process);
    used by sharded checkpoints between writing shards and committing the index."""
    if _dist.client is not None:
        _dist.client.wait_at_barrier(name, timeout_s * 1000)
