/*
 * strata-bench-gemm: the GEMMs of one MLP training step, timed alone through the CPU driver's
 * gemm op (the native kernel set, this thread pinned nowhere), with the shapes and transposes the
 * linear module uses. Their sum is the floor under a step on one device: no runtime can train
 * faster with these kernels, so it bounds the speed-up over a peer that calls the same GEMMs.
 *
 *   strata-bench-gemm [--model 784-256-128-10] [--batch 128] [--reps 200] [--json] [--bf16]
 *                     [--chunks N]
 *
 * --chunks N (a power of two, 2 to 256): beside each dW, the same dW as invariant mode makes it
 * on one device whose batch is N chunks: the driver's gemm_tree over the chunks' rows in their
 * pairwise tree (decisions 0095, 0118), its time and the whole product's over its time.
 *
 * --bf16 (built with oneDNN, libdnnl-dev): beside each fp32 GEMM, the same shape through the
 * driver's gemm_lp (bf16 operands on libxsmm, their packing included: what bf16-mixed runs)
 * and as a oneDNN matmul with bf16 inputs and f32 output on one thread (measured, not used:
 * decision 0013), and the core's bf16 peak measured with a vdpbf16ps loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata/strata.h"
#include "nn/chunks.h"
#include "tools/timing.h"
#include "tools/widths.h"

#ifdef STRATA_HAVE_DNNL
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>

void omp_set_num_threads(int n); /* libgomp, oneDNN's threading here: one thread */

/* Peak of one core's vdpbf16ps: 16 independent accumulators in registers, 64 FLOP each. */
#define DP16(X)                                                                                \
        X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
__attribute__((target("avx512f,avx512bf16"))) static double bf16_peak_gflops(void)
{
        __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
        const long iters = 20000000;
        struct timespec t0, t1;
        float sink = 0.0f;
#define DECL(i) __m512 a##i = _mm512_set1_ps((float)(i)); /* distinct: no two merge */
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
#define SUM(i) sink += _mm512_reduce_add_ps(a##i);
        DP16(DECL)
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long it = 0; it < iters; it++) {
                DP16(STEP)
                __asm__ volatile("" ::: "memory");
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        DP16(SUM)
        if (sink == 1.0f)
                printf(" ");
        return (double)iters * 16 * 64 /
               ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec));
}

/* One shape as a oneDNN matmul: bf16 A (m x k) and B (k x n), transposed by strides, f32 C. */
static double dnnl_bf16_us(int ta, int tb, int m, int n, int k, int reps, double *t,
                           const char **impl)
{
        static dnnl_engine_t eng;
        static dnnl_stream_t st;
        dnnl_memory_desc_t amd, bmd, cmd;
        dnnl_dims_t ad = { m, k }, as = { ta ? 1 : k, ta ? m : 1 };
        dnnl_dims_t bd = { k, n }, bs = { tb ? 1 : n, tb ? k : 1 };
        dnnl_dims_t cd = { m, n }, cs = { n, 1 };
        dnnl_matmul_desc_t md;
        dnnl_primitive_desc_t pd;
        dnnl_primitive_t p;
        dnnl_memory_t am, bm, cm;
        uint16_t *a = aligned_alloc(64, ((size_t)m * k * 2 + 63) / 64 * 64);
        uint16_t *b = aligned_alloc(64, ((size_t)k * n * 2 + 63) / 64 * 64);
        float *c = aligned_alloc(64, ((size_t)m * n * 4 + 63) / 64 * 64);

        if (!eng && (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
                     dnnl_stream_create(&st, eng, dnnl_stream_default_flags) != dnnl_success))
                return -1.0;
        for (size_t i = 0; i < (size_t)m * k; i++)
                a[i] = (uint16_t)(0x3c00 + i % 97); /* bf16 values near 0.008 */
        for (size_t i = 0; i < (size_t)k * n; i++)
                b[i] = (uint16_t)(0xbc00 + i % 89);
        dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_bf16, as);
        dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_bf16, bs);
        dnnl_memory_desc_init_by_strides(&cmd, 2, cd, dnnl_f32, cs);
        if (dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd) != dnnl_success ||
            dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success ||
            dnnl_primitive_create(&p, pd) != dnnl_success)
                return -1.0;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl);
        dnnl_memory_create(&am, &amd, eng, a);
        dnnl_memory_create(&bm, &bmd, eng, b);
        dnnl_memory_create(&cm, &cmd, eng, c);
        {
                dnnl_exec_arg_t args[3] = { { DNNL_ARG_SRC, am }, { DNNL_ARG_WEIGHTS, bm },
                                            { DNNL_ARG_DST, cm } };

                for (int r = 0; r < reps + 5; r++) {
                        struct timespec t0, t1;

                        clock_gettime(CLOCK_MONOTONIC, &t0);
                        dnnl_primitive_execute(p, st, 3, args);
                        dnnl_stream_wait(st);
                        clock_gettime(CLOCK_MONOTONIC, &t1);
                        if (r >= 5)
                                t[r - 5] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                                           (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3;
                }
        }
        qsort(t, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        dnnl_memory_destroy(am);
        dnnl_memory_destroy(bm);
        dnnl_memory_destroy(cm);
        dnnl_primitive_destroy(p); /* impl's string belongs to pd: copied by the caller first */
        free(a);
        free(b);
        free(c);
        return t[reps / 2];
}
#endif

#define MAX_LAYERS 16

struct shape {
        const char *what;
        int layer, ta, tb, m, n, k;
};

static double now_us(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}


/*
 * Median microseconds of @p reps calls of shape @p s through the driver: gemm (f32) or
 * gemm_lp (@p dt bf16/f16, with its operand packing); t is left sorted (t[0] the best).
 */
static double time_gemm(const struct strata_device_ops *d, const struct shape *s,
                        enum strata_dtype dt, const float *a, const float *b, float *c,
                        void *scratch, int reps, double *t)
{
        int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;

        for (int r = 0; r < reps + 5; r++) {
                double t0 = now_us();

                if (dt == STRATA_F32)
                        d->kernels->gemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda, b,
                                         ldb, 0.0f, c, s->n);
                else
                        d->kernels->gemm_lp(dt, s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda,
                                            b, ldb, 0.0f, c, s->n, scratch);
                if (r >= 5)
                        t[r - 5] = now_us() - t0; /* the first calls warm up */
        }
        qsort(t, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        return t[reps / 2];
}

/*
 * Median microseconds of @p reps gemm_tree() calls making dW of @p s over @p chunks chunks of
 * its k rows (a power of two; rows as even as they divide), in invariant mode's pairwise tree
 * (strata__chunks_program()'s, as one device holding every chunk makes it). -1 where the
 * driver has no gemm_tree or refuses the call (its message printed). t is left sorted.
 */
static double time_tree(const struct strata_device_ops *d, const struct shape *s, int chunks,
                        const float *a, const float *b, float *c, int reps, double *t)
{
        int lo[257];
        unsigned char op[256];
        struct strata_gemm_tree g = { s->m, s->n, a, s->m, b, s->n, c, s->n, chunks, lo, op };

        if (!d->kernels->gemm_tree)
                return -1.0;
        for (int j = 0; j <= chunks; j++)
                lo[j] = (int)((long)j * s->k / chunks);
        strata__chunks_program(&(struct strata_chunks){ .n = chunks }, 1, op);
        for (int r = 0; r < reps + 5; r++) {
                double t0 = now_us();
                int rc = d->kernels->gemm_tree(&g);

                if (rc != STRATA_OK) {
                        fprintf(stderr, "strata-bench-gemm: gemm_tree: %s\n", strata_last_error());
                        return -1.0;
                }
                if (r >= 5)
                        t[r - 5] = now_us() - t0;
        }
        qsort(t, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        return t[reps / 2];
}

static void usage(FILE *f)
{
        fprintf(f, "usage: strata-bench-gemm [--model 784-256-128-10] [--batch N] [--reps N] "
                   "[--json] [--bf16] [--chunks N]\n");
}

int main(int argc, char **argv)
{
        int w[MAX_LAYERS + 1], nw = 0, batch = 128, reps = 200, json = 0, ns = 0, bf16 = 0,
            chunks = 0;
#ifdef STRATA_HAVE_DNNL
        double sum_bf16 = 0.0, sum_lp = 0.0; /* bf16 arms' step sums */
#endif
        void *scratch = NULL, *pack = NULL;
        struct shape sh[3 * MAX_LAYERS];
        const struct strata_device_ops *d;
        size_t big = 0;
        float *a, *b, *c;
        double *t, sum_med = 0.0, sum_best = 0.0;

        nw = strata_tool_parse_widths("784-256-128-10", w, MAX_LAYERS + 1);
        for (int i = 1; i < argc; i++) {
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;

                if (!strcmp(argv[i], "--json")) {
                        json = 1;
                } else if (!strcmp(argv[i], "--bf16")) {
#ifdef STRATA_HAVE_DNNL
                        bf16 = 1;
#else
                        fprintf(stderr, "strata-bench-gemm: --bf16 needs a build with oneDNN "
                                        "(libdnnl-dev)\n");
                        return 2;
#endif
                } else if (!strcmp(argv[i], "--help")) {
                        usage(stdout);
                        return 0;
                } else if (v && !strcmp(argv[i], "--model")) {
                        if ((nw = strata_tool_parse_widths(v, w, MAX_LAYERS + 1)) < 0) {
                                fprintf(stderr, "strata-bench-gemm: bad --model %s\n", v);
                                return 2;
                        }
                        i++;
                } else if (v && (!strcmp(argv[i], "--batch") || !strcmp(argv[i], "--reps") ||
                                 !strcmp(argv[i], "--chunks"))) {
                        char *end;
                        long x = strtol(v, &end, 10);

                        if (*end || x < 1 || x > 1 << 20 ||
                            (argv[i][2] == 'c' && (x < 2 || x > 256 || (x & (x - 1))))) {
                                fprintf(stderr, "strata-bench-gemm: bad %s %s%s\n", argv[i], v,
                                        argv[i][2] == 'c' ? " (a power of two, 2 to 256)" : "");
                                return 2;
                        }
                        *(argv[i][2] == 'b' ? &batch : argv[i][2] == 'r' ? &reps : &chunks) =
                                (int)x;
                        i++;
                } else {
                        fprintf(stderr, "strata-bench-gemm: unknown option or missing value: %s\n",
                                argv[i]);
                        usage(stderr);
                        return 2;
                }
        }
        if (strata_device_driver(STRATA_ACCEL_CPU, &d) != STRATA_OK ||
            (d->prepare && d->prepare(1) != STRATA_OK)) {
                fprintf(stderr, "strata-bench-gemm: %s\n", strata_last_error());
                return 1;
        }
        /* This thread's packing buffer, as a device's worker takes it at warm-up: without it
         * the driver runs the scalar set (same bits, a fraction of the speed). */
        if (d->scratch_bytes && d->warm_up) {
                pack = aligned_alloc(64, (d->scratch_bytes() + 63) / 64 * 64);
                if (!pack) {
                        fprintf(stderr, "strata-bench-gemm: out of memory\n");
                        return 1;
                }
                d->warm_up(pack);
        }
        /* linear_forward, linear_backward (dW, then dX except for the first layer). */
        for (int l = 0; l + 1 < nw; l++) {
                int in = w[l], out = w[l + 1];

                sh[ns++] = (struct shape){ "forward", l, 0, 1, batch, out, in };
                sh[ns++] = (struct shape){ "dW", l, 1, 0, out, in, batch };
                if (l)
                        sh[ns++] = (struct shape){ "dX", l, 0, 0, batch, in, out };
        }
        for (int i = 0; i < ns; i++) {
                size_t x = (size_t)sh[i].m * sh[i].k, y = (size_t)sh[i].k * sh[i].n,
                       z = (size_t)sh[i].m * sh[i].n;

                big = x > big ? x : big;
                big = y > big ? y : big;
                big = z > big ? z : big;
        }
        if (big > ((size_t)1 << 29)) { /* three such matrices: 6 GiB */
                fprintf(stderr, "strata-bench-gemm: --model and --batch need matrices of %zu "
                                "floats; the limit is %zu\n", big, (size_t)1 << 29);
                return 2;
        }
        a = aligned_alloc(64, (big * sizeof(float) + 63) / 64 * 64);
        b = aligned_alloc(64, (big * sizeof(float) + 63) / 64 * 64);
        c = aligned_alloc(64, (big * sizeof(float) + 63) / 64 * 64);
        t = malloc(sizeof(double) * (size_t)reps);
        if (!a || !b || !c || !t) {
                fprintf(stderr, "strata-bench-gemm: out of memory\n");
                return 1;
        }
        if (bf16) {
                size_t elems = 0, dim = (size_t)batch;

                for (int i = 0; i < ns; i++) {
                        size_t e = (size_t)sh[i].m * sh[i].k + (size_t)sh[i].k * sh[i].n;

                        elems = e > elems ? e : elems;
                        dim = (size_t)sh[i].m > dim ? (size_t)sh[i].m : dim;
                        dim = (size_t)sh[i].n > dim ? (size_t)sh[i].n : dim;
                        dim = (size_t)sh[i].k > dim ? (size_t)sh[i].k : dim;
                }
                size_t bytes = d->kernels->gemm_lp_bytes(STRATA_BF16, elems, dim);

                scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
                if (!scratch || d->kernels->prepare_lp(STRATA_BF16) != STRATA_OK) {
                        fprintf(stderr, "strata-bench-gemm: bf16: %s\n",
                                scratch ? strata_last_error() : "out of memory");
                        return 1;
                }
        }
        for (size_t i = 0; i < big; i++) {
                a[i] = 0.01f * (float)(i % 97) - 0.4f;
                b[i] = 0.02f * (float)(i % 89) - 0.8f;
                c[i] = 0.0f;
        }
        if (!json)
                printf("GEMMs of one training step, batch %d, %d reps each, kernels %s\n"
                       "%-8s %5s %6s %6s %6s %10s %10s %8s%s\n",
                       batch, reps, strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_F32),
                       "gemm", "layer", "m", "n", "k", "median_us", "best_us", "GFLOP/s",
                       bf16 ? " strata_bf16_us x_fp32 oneDNN_us x_fp32  oneDNN kernel" : "");
        for (int i = 0; i < ns; i++) {
                const struct shape *s = &sh[i];
                double med, flop = 2.0 * s->m * s->n * s->k;

                med = time_gemm(d, s, STRATA_F32, a, b, c, NULL, reps, t);
                sum_med += med;
                sum_best += t[0];
                if (json)
                        printf("{\"gemm\":\"%s\",\"layer\":%d,\"m\":%d,\"n\":%d,\"k\":%d,"
                               "\"median_us\":%.2f,\"best_us\":%.2f}\n",
                               s->what, s->layer, s->m, s->n, s->k, med, t[0]);
                else
                        printf("%-8s %5d %6d %6d %6d %10.1f %10.1f %8.1f", s->what, s->layer,
                               s->m, s->n, s->k, med, t[0], flop / med * 1e-3);
#ifdef STRATA_HAVE_DNNL
                if (bf16) {
                        const char *impl = "?";
                        double bt;

                        double st = time_gemm(d, s, STRATA_BF16, a, b, c, scratch, reps, t);

                        sum_lp += st;
                        omp_set_num_threads(1);
                        bt = dnnl_bf16_us(s->ta, s->tb, s->m, s->n, s->k, reps, t, &impl);
                        sum_bf16 += bt;
                        if (json)
                                printf("{\"gemm\":\"%s\",\"layer\":%d,\"bf16_median_us\":%.2f,"
                                       "\"strata_bf16_median_us\":%.2f,\"onednn\":\"%s\"}\n",
                                       s->what, s->layer, bt, st, impl);
                        else
                                printf(" %8.1f %7.2f %8.1f %7.2f  %s", st, med / st, bt, med / bt,
                                       impl);
                }
#endif
                if (!json)
                        printf("\n");
                if (chunks && !strcmp(s->what, "dW")) {
                        double tt = time_tree(d, s, chunks, a, b, c, reps, t);

                        if (tt < 0.0 && !d->kernels->gemm_tree)
                                printf("%sthe driver has no gemm_tree%s\n",
                                       json ? "{\"note\":\"" : "", json ? "\"}" : "");
                        else if (tt < 0.0)
                                return 1;
                        else if (json)
                                printf("{\"gemm\":\"dW_tree\",\"layer\":%d,\"chunks\":%d,"
                                       "\"median_us\":%.2f,\"best_us\":%.2f,"
                                       "\"whole_over_tree\":%.3f}\n",
                                       s->layer, chunks, tt, t[0], med / tt);
                        else
                                printf("%-8s %5d %6d %6d %6d %10.1f %10.1f %8.1f  %d chunks; "
                                       "the whole dW's median / this: %.3f\n", "dW tree",
                                       s->layer, s->m, s->n, s->k, tt, t[0], flop / tt * 1e-3,
                                       chunks, med / tt);
                }
        }
        if (json)
                printf("{\"batch\":%d,\"step_gemm_us_median\":%.2f,\"step_gemm_us_best\":%.2f,"
                       "\"samples_per_s_ceiling\":%.0f}\n",
                       batch, sum_med, sum_best, batch / sum_best * 1e6);
        else
                printf("step floor: %.1f us (medians), %.1f us (best) -> at most %.0f samples/s "
                       "on one device with these kernels\n",
                       sum_med, sum_best, batch / sum_best * 1e6);
#ifdef STRATA_HAVE_DNNL
        if (bf16 && !__builtin_cpu_supports("avx512bf16")) {
                printf("%sbf16: this CPU has no AVX512_BF16: no vdpbf16ps peak to compare with "
                       "(gemm_lp runs bf16:fma, the f32 FMA)%s\n", json ? "{\"note\":\"" : "",
                       json ? "\"}" : "");
        } else if (bf16) {
                double peak = bf16_peak_gflops(), flops = 0.0;

                for (int i = 0; i < ns; i++)
                        flops += 2.0 * sh[i].m * sh[i].n * sh[i].k;
                printf("%sbf16, Strata's gemm_lp (libxsmm, operand packing included): %.1f us a "
                       "step, %.2fx fp32's medians, %.1f GFLOP/s = %.0f%% of this core's "
                       "vdpbf16ps peak (%.1f GFLOP/s)%s\n",
                       json ? "{\"note\":\"" : "", sum_lp, sum_med / sum_lp,
                       flops / sum_lp * 1e-3, 100.0 * flops / sum_lp * 1e-3 / peak, peak,
                       json ? "\"}" : "");
                printf("%sbf16, oneDNN matmul (1 thread, not used: it allocates per call): %.1f "
                       "us a step, %.2fx fp32's medians, %.0f%% of peak%s\n",
                       json ? "{\"note\":\"" : "", sum_bf16, sum_med / sum_bf16,
                       100.0 * flops / sum_bf16 * 1e-3 / peak, json ? "\"}" : "");
        }
#endif
        if (pack && d->forget)
                d->forget(pack);
        free(pack);
        free(scratch);
        free(t);
        free(a);
        free(b);
        free(c);
        return 0;
}
