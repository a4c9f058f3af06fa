#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(256) k(int* x) { extern __shared__ int s[]; if (x) x[0] = s[threadIdx.x]; }
int main() {
  int dev = 0, maxs = 0, persm = 0;
  cudaDeviceGetAttribute(&maxs, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  cudaDeviceGetAttribute(&persm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, maxs);
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  printf("optin %d per_sm %d\n", maxs, persm);
  int smems[4] = {maxs, 173056, 107520, 74752};
  for (int si = 0; si < 4; ++si) {
    printf("smem %6d:", smems[si]);
    for (int C = 1; C <= 8; ++C) {
      cudaLaunchAttribute a{}; a.id = cudaLaunchAttributeClusterDimension;
      a.val.clusterDim.x = C; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg{}; cfg.gridDim = dim3(C); cfg.blockDim = dim3(256);
      cfg.dynamicSmemBytes = smems[si]; cfg.attrs = &a; cfg.numAttrs = 1;
      int n = 0; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
      printf("  C%d=%d%s", C, n * C, e ? "(err)" : "");
    }
    printf("\n");
  }
}
