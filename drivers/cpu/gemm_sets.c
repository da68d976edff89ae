/*
 * The CPU driver's kernel sets (drivers/cpu/gemm.c multiplies with them; decision 0034): the
 * native set compiled for the instruction set libxsmm finds in the CPU's features (CPUID:
 * AVX-512 or AVX2+FMA, never a table of models), the avx2 set for AVX2+FMA on any CPU that has
 * them (portable mode, or a forced older set). Both are compiled once, when the driver
 * prepares; every kernel is checked to sum each element as one chain of fused multiply-adds in
 * k order before a set keeps it (decision 0053), the tail kernels to go on with the chains
 * (decision 0119). A CPU without AVX2+FMA, or a libxsmm that generates nothing, gets the scalar
 * set: the same arithmetic in C with fmaf.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "strata/status.h"
#include "base/base.h"
#include "drivers/cpu/gemm.h"
#include "drivers/cpu/gemm_sets.h"

#define BM STRATA__SGEMM_BM
#define BN STRATA__SGEMM_BN
#define KB STRATA__SGEMM_KB
#define NROWS STRATA__SGEMM_NROWS
#define NWIDTH STRATA__SGEMM_NWIDTH
#define NTAIL STRATA__SGEMM_NTAIL
#define LDT_MAX STRATA__SGEMM_LDT_MAX
#define LDT_PROBE (BM + 32) /* compile_set()'s trial kernels */

typedef strata__sgemm_kernel kernel_fn;
typedef struct strata__sgemm_kset kset_t;

static kset_t sets[2]; /* STRATA_KERNELS_NATIVE, STRATA_KERNELS_PORTABLE */
/* Each set's in-place kernels (decision 0122): entries written under direct_lock, then
 * published by the count (release); callers read the count (acquire) and those entries. */
static struct {
        _Atomic int n;
        struct strata__sgemm_direct e[STRATA__SGEMM_DIRECT_MAX];
} direct[2];
static pthread_mutex_t direct_lock = PTHREAD_MUTEX_INITIALIZER;
struct strata__sgemm_cpu_features strata__sgemm_cpu; /* set once, by compile() */
static pthread_once_t compiled = PTHREAD_ONCE_INIT;
const int strata__sgemm_tile_rows[NROWS] = { BN, 16, 8, 4, 2, 1 };

/*
 * @p n operands of the kernels' checks, fixed pseudo-random from the generator state *@p x:
 * uniform in [@p lo, @p lo + @p span).
 */
static void draw(float *v, int n, uint32_t *x, float span, float lo)
{
        for (int i = 0; i < n; i++) {
                *x = *x * 1664525u + 1013904223u;
                v[i] = (float)(*x >> 8) * 0x1p-24f * span + lo;
        }
}

/*
 * A kernel for a tile of @p width x @p rows: @p k products a batch-reduce block (KB, or a
 * tail's fewer), onto zero (@p beta 0) or onto the tile's values (1: the chains go on); op(A)'
 * read from blocks of rows @p lb floats apart (KB: packed, [rows][KB] a block; else A's own
 * rows, a block KB floats after the last: decision 0122).
 */
static kernel_fn dispatch_in(int width, int rows, int k, int lb, int ldt, float beta)
{
        libxsmm_blasint lda = width, ldb = lb, ldc = ldt;
        float alpha = 1.0f;
        int flags = LIBXSMM_GEMM_FLAGS('N', 'N'), prefetch = LIBXSMM_PREFETCH_NONE;
        int block = lb == KB ? KB * rows : KB; /* floats from one block of A's rows to the next */

        return libxsmm_smmdispatch_reducebatch_strd(width, rows, k,
                                                    (libxsmm_blasint)(sizeof(float) * width * KB),
                                                    (libxsmm_blasint)(sizeof(float) * block),
                                                    &lda, &ldb, &ldc, &alpha, &beta, &flags,
                                                    &prefetch);
}

static kernel_fn dispatch_k(int width, int rows, int k, int ldt, float beta)
{
        return dispatch_in(width, rows, k, KB, ldt, beta);
}

static kernel_fn dispatch(int width, int rows, int ldt)
{
        return dispatch_k(width, rows, KB, ldt, 0.0f);
}

/*
 * Whether @p k sums each element as one chain of fused multiply-adds in k order: the bits the
 * scalar set gives. Some of libxsmm 1.17's AVX-512 kernels for narrow tiles (16 or 8 columns,
 * 2 to 8 rows) split k over several accumulators, which changes the bits with the tile's
 * shape; such a kernel is replaced (compile_set()). Checked on two batch-reduce blocks of
 * fixed pseudo-random operands: a split order rounds differently almost everywhere. @p lb:
 * how the kernel reads op(A)' (dispatch_in()). Callers hold `compiled` or direct_lock.
 */
static int chains_in_k_order(kernel_fn k, int width, int rows, int lb, int ldt)
{
        static float a[2 * KB * BM], b[(BN - 1) * STRATA__SGEMM_DIRECT_LD_MAX + 2 * KB],
                c[LDT_PROBE * BN];
        int block = lb == KB ? KB * rows : KB; /* as dispatch_in() */
        unsigned long long count = 2;
        uint32_t x = 12345u;

        draw(a, 2 * KB * width, &x, 1.0f, -0.5f);
        for (int t = 0; t < 2; t++)
                for (int j = 0; j < rows; j++)
                        draw(b + t * block + (size_t)j * lb, KB, &x, 1.0f, -0.5f);
        k(a, b, c, &count);
        for (int j = 0; j < rows; j++)
                for (int i = 0; i < width; i++) {
                        float s = 0.0f;

                        for (int t = 0; t < 2; t++)
                                for (int q = 0; q < KB; q++)
                                        s = fmaf(a[(t * KB + q) * width + i],
                                                 b[t * block + (size_t)j * lb + q], s);
                        if (memcmp(&s, &c[j * ldt + i], sizeof(s)))
                                return 0;
                }
        return 1;
}

/*
 * Whether the tail kernel @p k goes on with each element's chain: its @p t products, in k
 * order, fused onto the values the tile holds (the chains' after the chunk's whole blocks).
 * The tile's values are of the products' size, where a tail summed apart (or one product
 * rounded before its addition) rounds differently in a good share of the elements; three
 * rounds of operands, so that a tile of 8 elements is not left to chance.
 */
static int tail_goes_on(kernel_fn k, int width, int rows, int t, int ldt)
{
        static float a[KB * BM], b[KB * BN], c[LDT_MAX * BN], c0[LDT_MAX * BN]; /* compiled */
        unsigned long long count = 1;
        uint32_t x = 54321u;

        for (int round = 0; round < 3; round++) {
                draw(a, KB * width, &x, 1.0f, -0.5f);
                draw(b, KB * rows, &x, 1.0f, -0.5f);
                draw(c0, ldt * rows, &x, 0.25f, -0.125f);
                memcpy(c, c0, sizeof(float) * (size_t)(ldt * rows));
                k(a, b, c, &count);
                for (int j = 0; j < rows; j++)
                        for (int i = 0; i < width; i++) {
                                float s = c0[j * ldt + i];

                                for (int q = 0; q < t; q++)
                                        s = fmaf(a[q * width + i], b[j * KB + q], s);
                                if (memcmp(&s, &c[j * ldt + i], sizeof(s)))
                                        return 0;
                        }
        }
        return 1;
}

/*
 * The tail kernels of @p s (its target's, for 1 to NTAIL products at the leading dimension
 * @p ldt that no other set uses): each one kept only where it goes on with the chains.
 */
static void compile_tails(kset_t *s, int ldt)
{
        for (int i = 0; i < NROWS * NWIDTH; i++)
                for (int t = 1; t <= NTAIL; t++) {
                        int w = BM >> (i / NROWS), r = strata__sgemm_tile_rows[i % NROWS];
                        kernel_fn k = dispatch_k(w, r, t, ldt, 1.0f);

                        s->tail[i / NROWS][i % NROWS][t - 1] =
                                k && tail_goes_on(k, w, r, t, ldt) ? k : NULL;
                }
}

/*
 * Set @p s to libxsmm's kernels for its current target, a shape whose kernel does not sum in k
 * order given the AVX2 one (the same bits, fewer lanes), or to none when a shape has no kernel
 * that does. libxsmm caches a kernel by its descriptor, not its target, so a shape is first
 * tried at the leading dimension @p probe_ldt, which no set uses, and compiled for @p ldt
 * only once its target is known.
 */
static void compile_set(kset_t *s, const char *name, int ldt, int probe_ldt)
{
        int target = libxsmm_get_target_archid();

        s->name = name;
        s->ldt = ldt;
        for (int i = 0; i < NROWS * NWIDTH; i++) {
                int w = BM >> (i / NROWS), r = strata__sgemm_tile_rows[i % NROWS];
                kernel_fn k = target > LIBXSMM_X86_AVX2 ? dispatch(w, r, probe_ldt) : NULL;

                if (k && !chains_in_k_order(k, w, r, KB, probe_ldt)) {
                        libxsmm_set_target_archid(LIBXSMM_X86_AVX2);
                        k = dispatch(w, r, ldt);
                        libxsmm_set_target_archid(target);
                } else {
                        k = dispatch(w, r, ldt);
                }
                if (!k || !chains_in_k_order(k, w, r, KB, ldt)) {
                        memset(s->k, 0, sizeof(s->k));
                        s->name = "strata:scalar";
                        return;
                }
                s->k[i / NROWS][i % NROWS] = k;
        }
        compile_tails(s, ldt);
}

/*
 * libxsmm 1.17's init creates /tmp/.libxsmm.<uid> and keeps it open as a lock deciding which
 * process prints its statistics; only its clean exit removes it, so a job killed at its
 * wall-time limit leaves it on the node (issue 58, item 18). Nothing Strata uses depends on
 * it: the name goes at once, the open file with the process.
 */
static void forget_lock_file(void)
{
        char name[64];

        snprintf(name, sizeof(name), "/tmp/.libxsmm.%u", (unsigned)getuid());
        (void)unlink(name);
}

/*
 * Both sets under libxsmm's one global target: AVX2 ("hsw") first, then the CPU's own; the
 * tile's leading dimensions differ so that libxsmm's cache keeps them apart.
 */
static void compile(void)
{
        int native;

        __builtin_cpu_init();
        strata__sgemm_cpu.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        sets[STRATA_KERNELS_NATIVE].name = sets[STRATA_KERNELS_PORTABLE].name = "strata:scalar";
        sets[STRATA_KERNELS_NATIVE].ldt = sets[STRATA_KERNELS_PORTABLE].ldt = BM;
        if (!strata__sgemm_cpu.avx2)
                return;
        libxsmm_init();
        forget_lock_file();
        native = libxsmm_get_target_archid();
        if (native < LIBXSMM_X86_AVX2)
                return;
        libxsmm_set_target_archid(LIBXSMM_X86_AVX2);
        compile_set(&sets[STRATA_KERNELS_PORTABLE], "libxsmm:avx2", BM + 16, 0);
        libxsmm_set_target_archid(native);
        strata__sgemm_cpu.avx512 = native >= LIBXSMM_X86_AVX512;
        /* LIBXSMM_TARGET can name more than the CPU has: the portable set's packing runs
         * these transposes too, so they ask the CPU itself */
        strata__sgemm_cpu.t16 = strata__sgemm_cpu.avx512 && __builtin_cpu_supports("avx512f");
        if (strata__sgemm_cpu.avx512)
                compile_set(&sets[STRATA_KERNELS_NATIVE], "libxsmm:avx512", BM, LDT_PROBE);
        else
                sets[STRATA_KERNELS_NATIVE] = sets[STRATA_KERNELS_PORTABLE];
}

void strata__sgemm_compile(void)
{
        pthread_once(&compiled, compile);
}

const kset_t *strata__sgemm_kset(enum strata_kernels set)
{
        return &sets[set == STRATA_KERNELS_PORTABLE];
}

int strata__sgemm_direct_prepare(enum strata_kernels set, int ld)
{
        const kset_t *s = strata__sgemm_kset(set);
        int i = set == STRATA_KERNELS_PORTABLE, n;
        struct strata__sgemm_direct e = { .ld = ld };

        if (ld < 1)
                return strata__fail(STRATA_EINVAL, "cpu: a leading dimension of %d floats", ld);
        strata__sgemm_compile();
        if (set == STRATA_KERNELS_SCALAR || ld < KB || ld > STRATA__SGEMM_DIRECT_LD_MAX ||
            !s->k[0][0] || (i && strata__sgemm_cpu.avx512))
                return STRATA_OK;
        pthread_mutex_lock(&direct_lock);
        n = atomic_load_explicit(&direct[i].n, memory_order_relaxed);
        for (int j = 0; j < n; j++)
                if (direct[i].e[j].ld == ld)
                        n = -1 - j;
        for (int r = 0; n >= 0 && n < STRATA__SGEMM_DIRECT_MAX && r < NROWS; r++) {
                int rows = strata__sgemm_tile_rows[r];

                e.k[r] = dispatch_in(BM, rows, KB, ld, s->ldt, 0.0f);
                if (!e.k[r] || !chains_in_k_order(e.k[r], BM, rows, ld, s->ldt))
                        n = STRATA__SGEMM_DIRECT_MAX; /* none for this ld: A is packed */
        }
        if (n >= 0 && n < STRATA__SGEMM_DIRECT_MAX) {
                direct[i].e[n] = e;
                atomic_store_explicit(&direct[i].n, n + 1, memory_order_release);
        }
        pthread_mutex_unlock(&direct_lock);
        return STRATA_OK;
}

const kernel_fn *strata__sgemm_direct(const kset_t *s, int ld)
{
        int i = s == &sets[1]; /* strata__sgemm_kset()'s index */
        int n = atomic_load_explicit(&direct[i].n, memory_order_acquire);

        for (int j = 0; j < n; j++)
                if (direct[i].e[j].ld == ld)
                        return direct[i].e[j].k;
        return NULL;
}

int strata__sgemm_tails(enum strata_kernels set)
{
        const kset_t *s = strata__sgemm_kset(set);
        int n = 0;

        if (set == STRATA_KERNELS_SCALAR || !strata__sgemm_name(set))
                return 0;
        for (int i = 0; i < NWIDTH * NROWS * NTAIL; i++)
                n += (&s->tail[0][0][0])[i] != NULL;
        return n;
}


int strata__sgemm_prepare(enum strata_kernels set)
{
        strata__sgemm_compile();
        if (set == STRATA_KERNELS_AVX512 && !strata__sgemm_cpu.avx512)
                return strata__fail(STRATA_ENOTSUP, "cpu: the avx512 kernel set was asked for "
                                    "but this CPU (or libxsmm) has no AVX-512 (the native set "
                                    "here is %s)", sets[STRATA_KERNELS_NATIVE].name);
        if (set == STRATA_KERNELS_PORTABLE && !sets[STRATA_KERNELS_PORTABLE].k[0][0])
                return strata__fail(STRATA_ENOTSUP, "cpu: the avx2 (portable) kernel set needs "
                                    "AVX2 and FMA, which this CPU does not have%s",
                                    strata__sgemm_cpu.avx2 ? " (libxsmm generated no AVX2 kernel)"
                                                           : "");
        return STRATA_OK;
}

const char *strata__sgemm_name(enum strata_kernels set)
{
        strata__sgemm_compile();
        switch (set) {
        case STRATA_KERNELS_NATIVE: return sets[STRATA_KERNELS_NATIVE].name;
        case STRATA_KERNELS_PORTABLE:
                return sets[STRATA_KERNELS_PORTABLE].k[0][0] ? sets[STRATA_KERNELS_PORTABLE].name
                                                          : NULL;
        case STRATA_KERNELS_AVX512:
                return strata__sgemm_cpu.avx512 ? sets[STRATA_KERNELS_NATIVE].name : NULL;
        case STRATA_KERNELS_SCALAR: return "strata:scalar";
        default: return NULL;
        }
}

