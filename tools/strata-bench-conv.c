/*
 * strata-bench-conv: the convolution modules' speed on one core, per layer at a batch: the
 * GEMM phase alone (the module's own GEMM calls: forward, weight gradient and, unless the
 * layer is a model's first, column gradient, each sample's in turn, its columns in the one
 * place the module unfolds every sample into: decision 0093) and the whole module
 * (unfolding, bias, folding back included), in GFLOP/s of the GEMMs' 2 m n k. Medians of
 * --reps runs after 2 warm-up runs (--split: each GEMM alone too), fp32, the CPU driver's
 * native set with its packing buffer; the first layer's (:first, K = 9) forward is timed as
 * a GEMM, though the module runs it as nn/conv_small.c's direct product.
 * Times are the thread's CPU time (a core other processes share takes turns, which wall time
 * would count); each run is preceded by a measurement of the core's AVX2 FMA peak
 * (tools/peak.c, on the same clock: AVX-512's where the native set is libxsmm:avx512, else
 * AVX2's), and the share of the peak is the median of each run's rate over the peak measured
 * just before it.
 *
 *   strata-bench-conv [--reps 9] [--split] [CIN-COUT-HxW:BATCH[:first] ...]
 *                     (default 1-32-28x28:128:first 32-64-28x28:128 32-64-14x14:128)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "nn/conv_parts.h"
#include "tools/peak.h"
#include "tools/timing.h"

struct layer {
        int cin, cout, h, w, batch, first;
        struct strata_module desc;
        struct strata_layer l;
        struct strata_step_ctx c;
        float *x, *y, *dy, *dx;
};

/* Conv2d(cin, cout, 3, padding 1) of the spec on @p k's kernels, its buffers allocated. */
static int open_layer(struct layer *L, const char *spec, const struct strata_kernel_ops *k)
{
        struct strata_module_shape s;
        int in;

        memset(L, 0, sizeof(*L));
        if (sscanf(spec, "%d-%d-%dx%d:%d", &L->cin, &L->cout, &L->h, &L->w, &L->batch) != 5)
                return -1;
        L->first = strstr(spec, ":first") != NULL;
        in = L->cin * L->h * L->w;
        L->desc = (struct strata_module){ .ops = &strata_conv2d, .out = L->cout,
                                          .kernel = { 3 }, .padding = { 1 } };
        L->l = (struct strata_layer){ .desc = &L->desc, .in = in, .grad_fresh = 1,
                                      .in_dims = { L->cin, 2, { L->h, L->w } } };
        if (strata_conv2d.shape(&L->l, in, &s) != STRATA_OK)
                return -1;
        L->l.out = s.out;
        L->l.nparam = s.params;
        L->l.param = strata_tool_filled(s.params, 3);
        L->l.grad = strata_tool_filled(s.params, 4);
        L->l.aux = strata_tool_filled(s.aux_per_row * (size_t)L->batch, 5);
        L->x = strata_tool_filled((size_t)in * L->batch, 6);
        L->dx = strata_tool_filled((size_t)in * L->batch, 7);
        L->y = strata_tool_filled((size_t)s.out * L->batch, 8);
        L->dy = strata_tool_filled((size_t)s.out * L->batch, 9);
        L->c = (struct strata_step_ctx){ .k = k, .train = 1, .rows_global = L->batch };
        return L->l.param && L->l.grad && L->l.aux && L->x && L->dx && L->y && L->dy ? 0 : -1;
}

/* Which of the module's GEMMs gemm_phase() runs: all, or the forward, dW or dX alone. */
enum { ALL, FWD, DW, DX };
static int only = ALL;

/*
 * The module's GEMMs alone, as it calls them (nn/conv.c), over the batch: every sample's
 * columns, and its column gradient, in the first row's place of the saved values, where the
 * module unfolds each sample again (decision 0093; a batch's own columns, 29 MB at 14 x 14,
 * would be read from memory, as the module no longer does).
 */
static double gemm_phase(struct layer *L)
{
        const struct strata_kernel_ops *k = L->c.k;
        int p = L->h * L->w, kk = L->cin * 9, co = L->cout;
        int tf = strata__conv_transposed((size_t)co, (size_t)p, 1);
        int tb = strata__conv_transposed((size_t)kk, (size_t)p, 0);
        double t0 = strata_tool_cpu_now();

        for (int n = 0; n < L->batch && (only == ALL || only == FWD); n++) {
                float *yn = L->y + (size_t)n * L->l.out;

                if (tf && n + 1 < L->batch)
                        k->gemm(1, 1, p, co, kk, 1.0f, L->l.aux, p, L->l.param, kk, 0.0f,
                                yn + L->l.out, co);
                else
                        k->gemm(0, 0, co, p, kk, 1.0f, L->l.param, kk, L->l.aux, p, 0.0f, yn,
                                p);
        }
        for (int n = 0; n < L->batch && only != FWD; n++) {
                const float *dyn = L->dy + (size_t)n * L->l.out;
                float *c = L->l.aux;

                if (only != DX)
                        k->gemm(0, 1, co, kk, p, 1.0f, dyn, p, c, p, n ? 1.0f : 0.0f,
                                L->l.grad, kk);
                if (L->first || only == DW)
                        continue;
                if (tb)
                        k->gemm(1, 0, p, kk, co, 1.0f, dyn, p, L->l.param, kk, 0.0f, c, kk);
                else
                        k->gemm(1, 0, kk, p, co, 1.0f, L->l.param, kk, dyn, p, 0.0f, c, p);
        }
        return strata_tool_cpu_now() - t0;
}

/* The module's forward and backward. */
static double module_step(struct layer *L)
{
        double t0 = strata_tool_cpu_now();

        strata_conv2d.forward(&L->l, &L->c, L->x, L->y, L->batch);
        strata_conv2d.backward(&L->l, &L->c, L->x, L->y, L->dy, L->first ? NULL : L->dx,
                               L->batch);
        return strata_tool_cpu_now() - t0;
}

/* The native set runs AVX-512 kernels: its peak is AVX-512's (twice AVX2's on a Zen 5). */
static int peak512;

/* The best of three peak measurements of the native set's instructions. */
static double peak_now(void)
{
        double best = 0.0;

        for (int i = 0; i < 3; i++) {
                double v = peak512 ? strata_tool_peak_avx512_on(strata_tool_cpu_now)
                                   : strata_tool_peak_avx2_on(strata_tool_cpu_now);

                best = v > best ? v : best;
        }
        return best;
}

/*
 * @p reps runs of @p f after 2 warm-up ones, each after a peak measurement: the median time,
 * and into *share the median of (@p flops / time) / peak.
 */
static double median_of(double (*f)(struct layer *), struct layer *L, int reps, double flops,
                        double *t, double *share)
{
        double *r = t + reps;

        for (int i = 0; i < reps + 2; i++) {
                double pk = peak_now(), v = f(L);

                if (i >= 2) {
                        t[i - 2] = v;
                        r[i - 2] = pk > 0.0 ? flops / v * 1e-9 / pk : 0.0;
                }
        }
        *share = strata_tool_median(r, (size_t)reps);
        return strata_tool_median(t, (size_t)reps);
}

static void bench(const char *spec, int reps, int split, const struct strata_kernel_ops *k)
{
        struct layer L;
        double flops, g, m, gs, ms, *t = calloc(2 * (size_t)reps, sizeof(double));

        if (!t || open_layer(&L, spec, k)) {
                printf("%-24s refused (CIN-COUT-HxW:BATCH[:first])\n", spec);
                free(t);
                return;
        }
        flops = 2.0 * L.cout * L.cin * 9.0 * L.h * L.w * L.batch * (L.first ? 2 : 3);
        g = median_of(gemm_phase, &L, reps, flops, t, &gs);
        m = median_of(module_step, &L, reps, flops, t, &ms);
        printf("%-22s GEMM phase %7.2f ms %5.1f GFLOP/s %3.0f%% | module fwd+bwd %7.2f ms "
               "%5.1f GFLOP/s %3.0f%%\n", spec, g * 1e3, flops / g * 1e-9, 100.0 * gs, m * 1e3,
               flops / m * 1e-9, 100.0 * ms);
        if (split) { /* each GEMM alone: where the phase loses */
                static const char *name[] = { "", "forward", "weight gradient", "input gradient" };
                double f1 = flops / (L.first ? 2 : 3);

                for (only = FWD; only <= (L.first ? DW : DX); only++) {
                        g = median_of(gemm_phase, &L, reps, f1, t, &gs);
                        printf("  %-20s %7.2f ms %5.1f GFLOP/s %3.0f%%\n", name[only], g * 1e3,
                               f1 / g * 1e-9, 100.0 * gs);
                }
                only = ALL;
        }
        free(L.l.param), free(L.l.grad), free(L.l.aux);
        free(L.x), free(L.dx), free(L.y), free(L.dy), free(t);
}

int main(int argc, char **argv)
{
        const char *specs[16] = { "1-32-28x28:128:first", "32-64-28x28:128", "32-64-14x14:128" };
        int reps = 9, n = 0, split = 0;
        void *pack;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--reps") && i + 1 < argc)
                        reps = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--split"))
                        split = 1;
                else if (n < 16)
                        specs[n++] = argv[i];
        }
        n = n ? n : 3;
        reps = reps < 1 ? 1 : reps;
        if (strata__cpu_driver.prepare(1) != STRATA_OK) {
                fprintf(stderr, "strata-bench-conv: %s\n", strata_last_error());
                return 1;
        }
        pack = aligned_alloc(64, (strata__cpu_driver.scratch_bytes() + 63) / 64 * 64);
        strata__cpu_driver.warm_up(pack);
        peak512 = !strcmp(strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_F32), "libxsmm:avx512");
        printf("conv2d k3 pad 1, fp32, %s, one core; FLOPs 2 m n k of fwd, dW, dX (not :first); "
               "%% of the %s FMA peak (now %.1f GFLOP/s)\n",
               strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_F32), peak512 ? "AVX-512" : "AVX2",
               peak_now());
        for (int i = 0; i < n; i++)
                bench(specs[i], reps, split, strata__cpu_driver.kernels);
        strata__cpu_driver.forget(pack);
        free(pack);
        return 0;
}
