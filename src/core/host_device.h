// D0_HOST_DEVICE marks a function both CUDA kernels and host code call (and so a CPU test can check it).
#pragma once

#if defined(__CUDACC__)
#define D0_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define D0_HOST_DEVICE inline
#endif
