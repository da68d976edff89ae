/* The CPU driver's f32 GEMM and its kernel sets (drivers/cpu/gemm.c; internal). */
#ifndef STRATA_DRIVERS_CPU_GEMM_H
#define STRATA_DRIVERS_CPU_GEMM_H

#include <stddef.h>

#include "strata/device.h"

/*
 * k per chunk of strata__sgemm(): an element's chain of products over more k is rounded into
 * C every STRATA__SGEMM_KC products (c = c + t), which drivers/cpu/gemm_tree.c reproduces.
 */
#define STRATA__SGEMM_KC 256

/*
 * k per batch-reduce block: libxsmm's kernels sum each chunk's kc products padded with zeros
 * to a multiple of STRATA__SGEMM_KB, so a chain whose kc is not one ends with fma(0, 0, t),
 * which is t except that -0 becomes +0. What does not pad (the scalar set, gemm_tree.c's
 * tiles and walk, and since decision 0119 a chunk of more than one block whose last holds 1
 * to 8 products: a tail kernel) adds t + 0 there: the same bits (decision 0095).
 */
#define STRATA__SGEMM_KB 16

/** One GEMM: C = alpha op(A) op(B) + beta C, row-major, op = transpose when ta / tb. */
struct strata__sgemm {
        int ta, tb, m, n, k;
        float alpha, beta;
        const float *a;
        int lda;
        const float *b;
        int ldb;
        float *c;
        int ldc;
};

/**
 * @brief Compute @p g with kernel set @p set (ready: strata__sgemm_prepare()), the packing
 *        in the calling thread's buffer; a thread that has none gets the scalar set's path
 *        (the same bits).
 */
void strata__sgemm(enum strata_kernels set, const struct strata__sgemm *g);

/**
 * strata__sgemm() with @p g->b's op(B)' already packed into @p pb by strata__sgemm_pack_b()
 * (from the same B, n x k, g->tb set): no packing of B per call. The same packed data and
 * kernels: the same bits. Where the call would not pack B that way (a narrow C, the scalar
 * set, no buffer) it runs as strata__sgemm() from g->b. @p pb NULL: strata__sgemm().
 */
void strata__sgemm_pb(enum strata_kernels set, const struct strata__sgemm *g, const float *pb);

/** Floats strata__sgemm_pack_b() writes for a B of @p n x @p k (0 when either is <= 0). */
size_t strata__sgemm_pack_b_floats(int n, int k);

/**
 * op(B)' of a transposed B (@p b: n x k, rows @p ldb apart) into @p dst
 * (strata__sgemm_pack_b_floats() floats): every (k, n) chunk as gemm_packed() packs it.
 */
void strata__sgemm_pack_b(const float *b, int ldb, int n, int k, float *dst);

/**
 * @brief Compile the kernel sets (once per process) and check that @p set runs here.
 * @retval STRATA_OK, STRATA_ENOTSUP (@p set cannot run on this CPU: the message says why).
 */
int strata__sgemm_prepare(enum strata_kernels set);

/**
 * @brief Make @p buf (strata__sgemm_scratch_bytes() bytes, 64-byte aligned; NULL: none) the
 *        calling thread's packing buffer until strata__sgemm_forget(@p buf).
 */
void strata__sgemm_use(void *buf);

/** @brief No thread packs into @p buf any more (those that used it run the scalar set). */
void strata__sgemm_forget(void *buf);

/** @brief "libxsmm:avx512", "libxsmm:avx2", "strata:scalar"; NULL: @p set cannot run here. */
const char *strata__sgemm_name(enum strata_kernels set);

/**
 * @brief Compile @p set's kernels that read a row-major A in place when its rows are @p ld
 * floats apart (a layer's activations or weights; decision 0122), so that a GEMM with such an
 * A need not pack it: the same chains, the same bits. Call before the steps (it compiles);
 * once per @p ld is enough, again is a no-op. Nothing is compiled (and A is packed as before)
 * for @p ld under STRATA__SGEMM_KB or over STRATA__SGEMM_DIRECT_LD_MAX, for the scalar set, for
 * the portable set on an AVX-512 CPU (libxsmm's one target is the native one after
 * preparing), once STRATA__SGEMM_DIRECT_MAX are registered, or where libxsmm generates no
 * kernel that sums in k order.
 * @return STRATA_OK, or STRATA_EINVAL for @p ld < 1 (nothing changed).
 */
int strata__sgemm_direct_prepare(enum strata_kernels set, int ld);

/**
 * @brief How many tail kernels @p set has (ready: strata__sgemm_prepare()): a chunk whose last
 *        batch-reduce block holds 1 to 8 products runs it as a kernel of just those where
 *        libxsmm's goes on with the chains (decision 0119); 0: every such block is padded.
 */
int strata__sgemm_tails(enum strata_kernels set);

/**
 * The calling thread's packing buffer while its registration holds (NULL: none), its size in
 * floats into *@p floats: drivers/cpu/gemm_tree.c packs into it too.
 */
float *strata__sgemm_buffer(size_t *floats);

/**
 * @brief strata_kernel_ops.gemm_tree() for kernel set @p set (ready:
 *        strata__sgemm_prepare()): AVX-512 or AVX2 tiles, or the scalar walk (decision 0095).
 */
int strata__sgemm_tree(enum strata_kernels set, const struct strata_gemm_tree *g);

/** @brief Bytes of one thread's packing buffer (the CPU driver's scratch per device). */
size_t strata__sgemm_scratch_bytes(void);

#endif /* STRATA_DRIVERS_CPU_GEMM_H */
