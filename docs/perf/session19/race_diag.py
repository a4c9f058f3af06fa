"""Racecheck diagnosis of the wgmma on-chip k-split, one cluster shape a run (session 19 call D; run then from .variants_bench/, now kept here)."""
import sys, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tools"))
import numpy as np, jax.numpy as jnp
import sanitize_sweep as s
from jax_marlin import ops
M, N, K, dt = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dtype = jnp.bfloat16 if dt == "bf16" else jnp.float16
rng = np.random.default_rng(1)
w, a, bias, ref = s._operands(rng, M, N, K, 128, dtype)
plan = ops.wgmma_plan(M, w, dtype)
print("plan", plan, flush=True)
s._check((M, N, K, "packed", dtype), a, w, bias, ref, "fused", 0)
print("checked", M, N, K, dt, flush=True)
