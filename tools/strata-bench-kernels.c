/*
 * strata-bench-kernels: each CPU kernel set's GFLOP/s over a training step's GEMMs (the
 * Linear module's shapes and transposes, packing included; conv:CIN-COUT-HxW, a Conv2d(3,
 * padding 1)'s per-sample GEMMs as nn/conv.c calls them), beside the peaks of this core
 * measured here (f32 FMA per ISA, AVX512_BF16 dot, AMX TDPBF16PS: the best of 21 bursts), one
 * thread. Where bf16-mixed runs bf16:amx, each shape's bf16 GF/s is listed too. The
 * sets run alternated, shape by shape, and each figure is a sum of medians. Times are the
 * thread's CPU time, the peaks' too: on a shared core, wall time would count the other
 * processes' turns (a long GEMM is interrupted more often than a short one).
 *
 *   strata-bench-kernels [--reps 40] [MODEL:BATCH | conv:CIN-COUT-HxW[:first] ...]
 *       (default 784-256-128-10:128 784-2048-2048-10:512 1024-1024:16
 *        conv:1-32-28x28:first conv:32-64-14x14: the Fashion-MNIST CNN's two layers)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "arch/amx.h"
#include "drivers/drivers.h"
#include "tools/peak.h"
#include "tools/timing.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>

#define R16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define ITERS 1000000L

/* The f32 peak is tools/peak.c's; the bf16 and AMX ones: accumulators in registers. */
static double peak_avx512(void)
{
        return strata_tool_peak_avx512_on(strata_tool_cpu_now);
}

__attribute__((target("avx512f,avx512bf16"))) static double peak_bf16(void)
{
        __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3f80);
        float sink = 0.0f;
        double t0;
#define DB(i) __m512 a##i = _mm512_set1_ps((float)(i));
#define SB(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
#define U5(i) sink += _mm512_reduce_add_ps(a##i);
        R16(DB)
        t0 = strata_tool_cpu_now();
        for (long it = 0; it < ITERS; it++) {
                R16(SB)
                __asm__ volatile("" ::: "memory");
        }
        t0 = strata_tool_cpu_now() - t0;
        R16(U5)
        return sink == 1.0f ? 0.0 : ITERS * 16.0 * 64 / t0 * 1e-9;
}

/*
 * AMX: 4 independent TDPBF16PS (tiles 0-3 += tiles 4, 5 x tiles 6, 7, 16 x 16 x 32 each) per
 * round, operands in the tile registers, as the kernels' 2 x 2 blocks use them.
 */
__attribute__((target("amx-tile,amx-bf16"))) static double peak_amx(void)
{
        static uint16_t ab[16][32];
        static float c[16][16];
        long iters = ITERS / 4;
        double t0;

        for (int i = 0; i < 16; i++)
                for (int j = 0; j < 32; j++)
                        ab[i][j] = 0x3f80; /* 1.0 */
        _tile_loadconfig(&strata__amx_16x64);
        _tile_loadd(4, ab, 64);
        _tile_loadd(5, ab, 64);
        _tile_loadd(6, ab, 64);
        _tile_loadd(7, ab, 64);
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        t0 = strata_tool_cpu_now();
        for (long it = 0; it < iters; it++) {
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
        }
        t0 = strata_tool_cpu_now() - t0;
        _tile_stored(0, c, 64);
        _tile_release();
        return c[0][0] == 1.0f ? 0.0 : iters * 4.0 * 16 * 16 * 32 * 2 / t0 * 1e-9;
}

static int cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit)
{
        unsigned r[4];

        if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]))
                return 0;
        return (r[reg] >> bit) & 1;
}

static double peak_avx2(void)
{
        return strata_tool_peak_avx2_on(strata_tool_cpu_now);
}

/* The best of 21 bursts of @p f: what the core can do (a shared machine lowers medians). */
static double peak(double (*f)(void))
{
        double best = 0.0;

        for (int i = 0; i < 21; i++) {
                double v = f();

                best = v > best ? v : best;
        }
        return best;
}
#endif

#define MAX_SHAPES 48

struct shape {
        const char *what;
        int ta, tb, m, n, k;
        float beta;
        float *a, *b, *c;
};

/* The Linear module's GEMMs for widths @p model at @p batch: forward, dW, dX (not layer 0). */
static int shapes_of(const char *model, int batch, struct shape *sh)
{
        int w[16], nw = 0, ns = 0;

        for (const char *p = model; *p && nw < 16;) {
                w[nw++] = atoi(p);
                while (*p && *p != '-')
                        p++;
                if (*p)
                        p++;
        }
        for (int l = 0; l + 1 < nw && ns + 3 <= MAX_SHAPES; l++) {
                sh[ns++] = (struct shape){ .what = "fwd", .tb = 1, .m = batch, .n = w[l + 1], .k = w[l], .beta = 1.0f };
                sh[ns++] = (struct shape){ .what = "dW", .ta = 1, .m = w[l + 1], .n = w[l], .k = batch };
                if (l)
                        sh[ns++] = (struct shape){ .what = "dX", .m = batch, .n = w[l], .k = w[l + 1] };
        }
        return ns;
}

/*
 * A Conv2d(cin -> cout, 3 x 3, padding 1) on h x w, one sample, as nn/conv.c multiplies it:
 * the forward y = W cols (or t = cols' W' where the result's 64-column tiles fit better),
 * the weight gradient dW += dy cols' and, unless @p first, the column gradient W' dy (or its
 * transpose); nn/conv_small.c's loops take a forward with K <= 16 terms, a weight gradient of
 * <= 64 elements and a column gradient with cout <= 16 (not GEMMs: left out here).
 */
static int conv_shapes(const char *spec, struct shape *sh)
{
        int cin, cout, h, w, p, kk, ns = 0;

        if (sscanf(spec, "conv:%d-%d-%dx%d", &cin, &cout, &h, &w) != 4)
                return 0;
        p = h * w;
        kk = 9 * cin;
#define TRANSPOSED(m, n) (((m) + 63) / 64 * 64 * (n) < ((n) + 63) / 64 * 64 * (m))
        if (kk > 16)
                sh[ns++] = TRANSPOSED(cout, p)
                        ? (struct shape){ .what = "fwd", .ta = 1, .tb = 1, .m = p, .n = cout, .k = kk }
                        : (struct shape){ .what = "fwd", .m = cout, .n = p, .k = kk };
        if (cout * kk > 64)
                sh[ns++] = (struct shape){ .what = "dW", .tb = 1, .m = cout, .n = kk, .k = p,
                                           .beta = 1.0f };
        if (!strstr(spec, ":first") && cout > 16)
                sh[ns++] = TRANSPOSED(kk, p)
                        ? (struct shape){ .what = "dX", .ta = 1, .m = p, .n = kk, .k = cout }
                        : (struct shape){ .what = "dX", .ta = 1, .m = kk, .n = p, .k = cout };
#undef TRANSPOSED
        return ns;
}

/* One call of shape @p s on set @p k (f32 gemm, or bf16 gemm_lp with @p scratch). */
static double run(const struct strata_kernel_ops *k, const struct shape *s, void *scratch)
{
        int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
        double t0 = strata_tool_cpu_now();

        if (scratch)
                k->gemm_lp(STRATA_BF16, s->ta, s->tb, s->m, s->n, s->k, 1.0f, s->a, lda, s->b,
                           ldb, s->beta, s->c, s->n, scratch);
        else
                k->gemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, s->a, lda, s->b, ldb, s->beta,
                        s->c, s->n);
        return strata_tool_cpu_now() - t0;
}

#define NSETS 3 /* native f32, portable f32, native bf16 */

static void bench_model(const char *spec, int reps, const double *peaks)
{
        static const char *label[NSETS] = { "f32 native", "f32 portable", "bf16-mixed" };
        static const enum strata_kernels set[NSETS] = { STRATA_KERNELS_NATIVE,
                                                        STRATA_KERNELS_PORTABLE,
                                                        STRATA_KERNELS_NATIVE };
        const struct strata_device_ops *d[NSETS];
        struct shape sh[MAX_SHAPES];
        char model[128];
        int batch = 128, ns;
        double flops = 0.0, *t = calloc((size_t)reps, sizeof(double)), lp_med[MAX_SHAPES];
        void *scratch = NULL, *pack;
        size_t elems = 0, dim = 0;
        const char *colon = strchr(spec, ':');

        snprintf(model, sizeof(model), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec),
                 spec);
        if (colon)
                batch = atoi(colon + 1);
        if (!strncmp(spec, "conv:", 5)) {
                snprintf(model, sizeof(model), "%s", spec);
                batch = 1;
                ns = conv_shapes(spec, sh);
        } else {
                ns = shapes_of(model, batch, sh);
        }
        for (int i = 0; i < ns; i++) {
                struct shape *s = &sh[i];
                size_t mk = (size_t)s->m * s->k, kn = (size_t)s->k * s->n;
                int big = s->m > s->n ? s->m : s->n;

                s->a = strata_tool_filled(mk, 7u * i + 1);
                s->b = strata_tool_filled(kn, 7u * i + 3);
                s->c = strata_tool_filled((size_t)s->m * s->n, 5);
                flops += 2.0 * s->m * s->n * s->k;
                elems = mk + kn > elems ? mk + kn : elems;
                big = big > s->k ? big : s->k;
                dim = (size_t)big > dim ? (size_t)big : dim;
        }
        for (int j = 0; j < NSETS; j++)
                if (strata__cpu_driver_for(set[j], &d[j]) != STRATA_OK ||
                    d[j]->prepare(1) != STRATA_OK)
                        d[j] = NULL;
        /* the packing buffer a runtime's plan carves per device */
        pack = aligned_alloc(64, (strata__cpu_driver.scratch_bytes() + 63) / 64 * 64);
        strata__cpu_driver.warm_up(pack);
        /* bf16:avx512_bf16 or bf16:fma: prepare_lp says which runs here */
        if (d[2] && d[2]->kernels->prepare_lp(STRATA_BF16) == STRATA_OK)
                scratch = aligned_alloc(64, (d[2]->kernels->gemm_lp_bytes(STRATA_BF16, elems,
                                                                          dim) + 63) / 64 * 64);
        if (!scratch)
                d[2] = NULL;
        printf("%-22s b%-4d", model, batch);
        for (int j = 0; j < NSETS; j++) {
                double sum = 0.0;

                if (!d[j]) {
                        printf(" | %-14s %-16s", label[j], "refused here");
                        continue;
                }
                for (int i = 0; i < ns; i++) {
                        for (int r = 0; r < 3; r++)
                                run(d[j]->kernels, &sh[i], j == 2 ? scratch : NULL);
                        for (int r = 0; r < reps; r++) /* alternated with the other sets */
                                for (int q = 0; q < NSETS; q++)
                                        if (q == j)
                                                t[r] = run(d[j]->kernels, &sh[i],
                                                           j == 2 ? scratch : NULL);
                                        else if (d[q])
                                                run(d[q]->kernels, &sh[i],
                                                    q == 2 ? scratch : NULL);
                        sum += strata_tool_median(t, (size_t)reps);
                        if (j == 2)
                                lp_med[i] = strata_tool_median(t, (size_t)reps);
                }
                printf(" | %-14s %6.1f GF/s %3.0f%%", strata_kernel_set(set[j], j == 2 ? STRATA_BF16 : STRATA_F32),
                       flops / sum * 1e-9, peaks[j] > 0 ? 100.0 * flops / sum * 1e-9 / peaks[j] : 0);
        }
        printf("\n");
        for (int i = 0; d[2] && !strcmp(strata__cpu_lp_name(), "bf16:amx") && i < ns; i++) {
                double gf = 2.0 * sh[i].m * sh[i].n * sh[i].k / lp_med[i] * 1e-9;

                printf("    bf16:amx %-3s %c%c %5dx%5dx%5d %7.1f GF/s %3.0f%%\n", sh[i].what,
                       sh[i].ta ? 'T' : 'N', sh[i].tb ? 'T' : 'N', sh[i].m, sh[i].n, sh[i].k, gf,
                       peaks[2] > 0 ? 100.0 * gf / peaks[2] : 0);
        }
        for (int i = 0; i < ns; i++)
                free(sh[i].a), free(sh[i].b), free(sh[i].c);
        strata__cpu_driver.forget(pack);
        free(pack);
        free(scratch);
        free(t);
}

int main(int argc, char **argv)
{
        double peaks[NSETS] = { 0 }, p512 = 0, p256 = 0, pbf = 0, pamx = 0;
        int reps = 40, have_bf16 = 0, have_amx = 0, amx_cpu = 0, nmodels = 0;
        const char *models[16];

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
                        reps = atoi(argv[++i]);
                } else if (!strcmp(argv[i], "--help")) {
                        printf("usage: strata-bench-kernels [--reps 40] [MODEL:BATCH | "
                               "conv:CIN-COUT-HxW[:first] ...]\n");
                        return 0;
                } else if (argv[i][0] == '-') {
                        fprintf(stderr, "strata-bench-kernels: unknown option %s (--help)\n",
                                argv[i]);
                        return 2;
                } else if (nmodels < 16) {
                        models[nmodels++] = argv[i];
                }
        }
        if (reps < 3)
                reps = 3;
        if (!nmodels) {
                models[nmodels++] = "784-256-128-10:128";
                models[nmodels++] = "784-2048-2048-10:512";
                models[nmodels++] = "1024-1024:16";
                models[nmodels++] = "conv:1-32-28x28:first";
                models[nmodels++] = "conv:32-64-14x14";
        }
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f"))
                p512 = peak(peak_avx512);
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                p256 = peak(peak_avx2);
        have_bf16 = cpuid_bit(7, 1, 0, 5);
        /* Linux grants the tile data on request (the library asks too, once) */
        amx_cpu = cpuid_bit(7, 0, 3, 22) && cpuid_bit(7, 0, 3, 24);
        have_amx = amx_cpu && strata__amx_request();
        if (have_bf16)
                pbf = peak(peak_bf16);
        if (have_amx)
                pamx = peak(peak_amx);
#endif
        printf("one-core peaks: f32 FMA avx512 %.1f, avx2 %.1f GFLOP/s; avx512_bf16 dot %.1f "
               "GFLOP/s; ", p512, p256, pbf);
        if (have_amx)
                printf("AMX tdpbf16ps %.1f GFLOP/s\n", pamx);
        else
                printf("AMX-BF16 %s\n", amx_cpu ? "present, tile data not granted" : "absent");
        peaks[0] = p512 > 0 && !strcmp(strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_F32),
                                        "libxsmm:avx512") ? p512 : p256;
        peaks[1] = p256;
        /* bf16:fma multiplies with the f32 FMA */
        peaks[2] = !strcmp(strata__cpu_lp_name(), "bf16:amx") ? pamx : have_bf16 ? pbf : peaks[0];
        printf("kernel sets: native %s, portable %s; %% of the matching peak\n",
               strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_F32),
               strata_kernel_set(STRATA_KERNELS_PORTABLE, STRATA_F32) ?
                       strata_kernel_set(STRATA_KERNELS_PORTABLE, STRATA_F32) : "refused");
        for (int i = 0; i < nmodels; i++)
                bench_model(models[i], reps, peaks);
        return 0;
}
