/* Counts the CUDA runtime's allocation calls made by anything in the test binary (interposed). */
#ifndef STRATA_TESTS_CUDACOUNT_H
#define STRATA_TESTS_CUDACOUNT_H

/** Calls to cudaMalloc, cudaMallocHost, cudaHostAlloc, cudaMallocManaged, cudaMallocAsync,
 *  cudaFree, cudaFreeHost and cudaFreeAsync so far (0 in a build without CUDA). */
long cudacount_calls(void);

#endif
