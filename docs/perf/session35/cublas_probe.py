"""cuBLAS's fp16 GEMM alone in CUDA graphs (torch), timed as tools/latency_probe.cu
times our kernels: 64 GEMMs a graph over weight copies rotated past the L2, the
median of 3 x 30 replays, us a GEMM. For session 35's fixed-cost question: does
cuBLAS's time at M = 512 fall with K as ours does (its intercept against ours)?
    python3 docs/perf/session35/cublas_probe.py [MxKxN ...]
"""
import os
import statistics
import sys

import torch

ITEMS = 64
# CUBLAS_PROBE_REPLAYS (session 36): longer timings, for the power cap's clock
# (tools/power_sample.py; the board's power is a 1-second average).
REPLAYS = int(os.environ.get("CUBLAS_PROBE_REPLAYS", "30"))


def gemm_us(M, K, N, dtype=torch.float16):
    bytes_w = K * N * 2
    copies = max(2, min(ITEMS, int(200e6 / bytes_w) + 1))
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.rand((M, K), device="cuda", generator=gen, dtype=torch.float32) * 4 - 2).to(dtype)
    ws = [(torch.randn((K, N), device="cuda", generator=gen) * K ** -0.5).to(dtype)
          for _ in range(copies)]
    outs = [torch.empty((M, N), device="cuda", dtype=dtype) for _ in range(copies)]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(copies):  # warm up cuBLAS's handles and workspace
            torch.matmul(x, ws[i], out=outs[i])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(ITEMS):
            torch.matmul(x, ws[i % copies], out=outs[i % copies])
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    round_means = []  # us a GEMM, each over REPLAYS replays
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPLAYS):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        round_means.append(start.elapsed_time(end) * 1e3 / (REPLAYS * ITEMS))
    return statistics.median(round_means), copies


def main(argv):
    shapes = [tuple(int(v) for v in a.split("x")) for a in argv] or [
        (256, 4096, 4096), (512, 4096, 4096), (1024, 4096, 4096), (512, 1024, 4096),
        (512, 2048, 4096), (512, 8192, 4096), (512, 28672, 8192)]
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; fp16, us a GEMM in graphs")
    for M, K, N in shapes:
        us, copies = gemm_us(M, K, N)
        print(f"{M:6d} {K:6d} {N:6d}  copies {copies:3d}  {us:8.2f} us  "
              f"{2 * M * K * N / us / 1e6:7.1f} TFLOP/s")


if __name__ == "__main__":
    main(sys.argv[1:])
