"""Across processes: one global batch solved by 2 processes (`jax.distributed`, CPU).

Two worker processes on this machine each call ``jax.distributed.initialize``
(coordinator on 127.0.0.1; gloo CPU collectives, jax 0.10's default, set explicitly),
see 2 CPU devices each (4 global devices), hold only their own rows of one global batch
(``jax.make_array_from_process_local_data``), and solve it twice: per device with
``jax.jit(jax.shard_map(...))`` (each device its own rows through its own lanes, no
communication while solving), and with plain ``jax.jit`` over the globally sharded
inputs (as XLA partitions it, every device runs the whole lane batch, replicated, and
each refill gathers its rows from both processes with an all-reduce over gloo). Each
worker writes its local rows of both results; the test process checks them against one
process solving the whole batch (x to 1e-10, steps and statuses exactly).
"""

import os
import pathlib
import socket
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np

from fixedopt import Status
from tests.helpers import two_process_batch, two_process_solve

PROCESSES = 2
DEVICES_PER_PROCESS = 2
TIMEOUT_S = 240  # a hard bound per worker (20-45 s on 2 busy cores)


WORKER = textwrap.dedent(
    """
    import sys
    import time
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    port, process_id, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
        initialization_timeout=60, heartbeat_timeout_seconds=30,
        shutdown_timeout_seconds=30)
    assert jax.process_count() == 2 and len(jax.devices()) == 4, jax.devices()
    assert len(jax.local_devices()) == 2, jax.local_devices()

    from tests.helpers import two_process_batch as global_batch  # after initialize
    from tests.helpers import two_process_solve as solve

    mesh = Mesh(np.array(jax.devices()), ("batch",))  # both processes' devices
    rows = NamedSharding(mesh, P("batch"))
    arrays = global_batch()
    size = len(arrays[0])
    # This process's rows: what its devices hold of the global batch (one block).
    starts = sorted(i[0].start for i in rows.addressable_devices_indices_map(
        arrays[0].shape).values())
    local = slice(starts[0], starts[-1] + size // len(jax.devices()))
    inputs = [jax.make_array_from_process_local_data(rows, a[local], a.shape)
              for a in arrays]
    assert not inputs[0].is_fully_addressable
    # device_put of the same global array in every process (the README's single-host
    # line) gives the same shards. It first gathers the whole array from every process
    # to check they agree, with ==, so an array with a NaN (center) is refused.
    for array, full in zip(inputs[:3], [jax.device_put(a, rows) for a in arrays[:3]]):
        for ours, theirs in zip(array.addressable_shards, full.addressable_shards):
            assert ours.index == theirs.index
            np.testing.assert_array_equal(ours.data, theirs.data)

    per_device = jax.jit(jax.shard_map(
        solve, mesh=mesh, in_specs=P("batch"), out_specs=P("batch"), check_vma=False))
    partitioned = jax.jit(solve)

    def local_rows(solution):
        assert len(solution.x.sharding.device_set) == 4, solution.x.sharding
        assert solution.x.sharding.is_equivalent_to(rows, 2), solution.x.sharding
        fields = {}
        for name in ("x", "steps", "status"):
            shards = sorted(getattr(solution, name).addressable_shards,
                            key=lambda s: s.index[0].start)
            assert [s.index[0].start for s in shards] == starts
            fields[name] = np.concatenate([np.asarray(s.data) for s in shards])
        return fields

    results, solutions = {"rows": np.arange(size)[local]}, {}
    for tag, program in (("shard_map", per_device), ("jit", partitioned)):
        start = time.perf_counter()
        solution = solutions[tag] = program(*inputs)
        for name, value in local_rows(solution).items():
            results[f"{tag}_{name}"] = value
        print(tag, f"compile and solve {time.perf_counter() - start:.1f} s", flush=True)
    # The whole result on every process (np.asarray of it raises: not addressable).
    results["all_x"] = multihost_utils.process_allgather(solutions["shard_map"].x, tiled=True)
    for tag, program in (("shard_map", per_device), ("jit", partitioned)):
        text = program.lower(*inputs).compile().as_text()  # cached: compiled above
        results[f"{tag}_all_reduces"] = np.array(text.count("all-reduce("))
    np.savez(out, **results)
    jax.distributed.shutdown()
    print("worker", process_id, "ok")
    """
)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_worker(process_id, port, output, log):
    root = pathlib.Path(__file__).resolve().parents[2]
    environment = dict(
        os.environ, PYTHONPATH=str(root), JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS}",
    )  # fmt: skip
    command = [sys.executable, "-c", WORKER, str(port), str(process_id), str(output)]
    return subprocess.Popen(command, env=environment, cwd=root, stdout=log, stderr=log)


def test_two_processes_solve_one_global_batch(tmp_path):
    port = free_port()
    outputs = [tmp_path / f"process{i}.npz" for i in range(PROCESSES)]
    logs = [open(tmp_path / f"process{i}.log", "w+") for i in range(PROCESSES)]  # noqa: SIM115
    workers = [start_worker(i, port, outputs[i], logs[i]) for i in range(PROCESSES)]
    try:
        # One process alone, the whole batch, while the workers compile.
        reference = two_process_solve(*map(jnp.asarray, two_process_batch()))
        codes = [worker.wait(timeout=TIMEOUT_S) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        text = []
        for log in logs:
            log.seek(0)
            text.append(log.read()[-3000:])
            log.close()
    assert codes == [0] * PROCESSES, "\n---\n".join(text)

    statuses = np.asarray(reference.status)
    assert {Status(int(s)) for s in statuses} == {
        Status.CONVERGED, Status.MAX_STEPS, Status.NONFINITE,
    }  # fmt: skip
    covered = []
    for output in outputs:
        with np.load(output) as saved:
            local = dict(saved)
        rows = local["rows"]
        covered.extend(rows)
        for tag in ("shard_map", "jit"):
            np.testing.assert_allclose(
                local[f"{tag}_x"], reference.x[rows], rtol=0, atol=1e-10, equal_nan=True
            )
            np.testing.assert_array_equal(local[f"{tag}_steps"], reference.steps[rows])
            np.testing.assert_array_equal(local[f"{tag}_status"], reference.status[rows])
        # The plain-jit program communicates across the processes while it solves (XLA
        # runs the lanes' loop on every device and gathers each refill's rows from both
        # processes with an all-reduce, over gloo); the shard_map program never does.
        assert int(local["jit_all_reduces"]) > 0
        assert int(local["shard_map_all_reduces"]) == 0
        np.testing.assert_allclose(local["all_x"], reference.x, rtol=0, atol=1e-10, equal_nan=True)
    assert sorted(covered) == list(range(len(statuses)))
