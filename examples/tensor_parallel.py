"""A 4-bit layer shared out over several devices: column- and row-parallel, in shard_map.

    python examples/tensor_parallel.py

Each device holds a part of the weight (``jm.split_weights``), prepared on its own, and
runs ``jm.matmul_nbits`` on it inside ``jax.shard_map``: column-parallel, each device
computes a slice of the outputs; row-parallel, each multiplies a slice of ``x`` and the
parts are summed (``psum``). (Under plain ``jit`` with sharded operands the op would
gather them and compute the whole product on every device.) Uses every GPU where there
are several, else four CPU devices. Prints each form's error against the ``jax.numpy``
oracle.
"""

import os

# Four host devices where there is one accelerator or none (set before jax starts).
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jax_marlin as jm  # noqa: E402


def prepare_stacked(parts, device_mesh):
    """The parts prepared one by one and stacked on a leading axis, a part a device."""
    prepared = [jm.prepare(q.packed, q.scales, q.zero_points, K=q.K, N=q.N, bits=q.bits,
                           block_size=q.block_size) for q in parts]
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *prepared)
    return jax.device_put(stacked, NamedSharding(device_mesh, P("model")))


def own_part(stacked):
    """Inside shard_map: this device's weight (the leading axis is 1 there)."""
    return jax.tree.map(lambda leaf: leaf[0], stacked)


def main():
    devices = jax.devices() if len(jax.devices()) > 1 else jax.devices("cpu")
    device_mesh = Mesh(np.array(devices), ("model",))
    parts = len(devices)
    K, N, M, block_size = 256 * parts, 96 * parts, 4, 128
    dtype = jnp.float16 if devices[0].platform == "gpu" else jnp.float32
    print(f"{parts} devices: {devices[0].device_kind}")

    key_w, key_x, key_b = jax.random.split(jax.random.key(0), 3)
    kernel = jax.random.normal(key_w, (K, N), jnp.float32) / np.sqrt(K)
    x = jax.random.normal(key_x, (M, K), jnp.float32).astype(dtype)
    bias = jax.random.normal(key_b, (N,), jnp.float32).astype(dtype)
    q = jm.quantize(kernel, bits=4, block_size=block_size)
    oracle = jm.reference.matmul_nbits(x.astype(jnp.float32), q.packed, q.scales,
                                       q.zero_points, K=K, N=N, bits=4,
                                       block_size=block_size, bias=bias.astype(jnp.float32))

    # Column-parallel: device p computes outputs [p N / parts, (p + 1) N / parts).
    columns = prepare_stacked(jm.split_weights(q, parts, axis="N"), device_mesh)

    @jax.jit
    def column_parallel(x, w, b):
        return jax.shard_map(lambda x, w, b: jm.matmul_nbits(x, own_part(w), b),
                             mesh=device_mesh, in_specs=(P(), P("model"), P("model")),
                             out_specs=P(None, "model"))(x, w, b)

    # Row-parallel: device p multiplies x[:, p K / parts ...] by its rows of W; psum adds.
    rows = prepare_stacked(jm.split_weights(q, parts, axis="K"), device_mesh)

    @jax.jit
    def row_parallel(x, w, b):
        return jax.shard_map(
            lambda x, w, b: jax.lax.psum(jm.matmul_nbits(x, own_part(w)), "model") + b,
            mesh=device_mesh, in_specs=(P(None, "model"), P("model"), P()),
            out_specs=P())(x, w, b)

    for name, fn, w in (("column-parallel", column_parallel, columns),
                        ("row-parallel", row_parallel, rows)):
        y = fn(x, w, bias)
        error = jnp.linalg.norm(y.astype(jnp.float32) - oracle) / jnp.linalg.norm(oracle)
        gathers = fn.lower(x, w, bias).compile().as_text().count("all-gather")
        print(f"{name}: y {y.shape} sharded {y.sharding.spec}; all-gathers {gathers}; "
              f"relative error vs the jax.numpy oracle: {float(error):.2e}")


if __name__ == "__main__":
    main()
