/*
 * The CPU's kernel sets (decision 0034): chosen by the CPU's features and named; a set the CPU
 * cannot run refused at init with the reason; every set exact against a double reference on
 * odd shapes and bitwise equal to every other; an element's bits independent of the call's row
 * count; two threads computing at once get the bits each gets alone; bf16-mixed on every CPU:
 * AMX tiles where the CPU has AMX-BF16 (bf16:amx, its exact code also run here through a scalar
 * emulator of the tile instructions on any CPU), else vdpbf16ps where the CPU has AVX512_BF16,
 * else bf16 operands summed by the f32 GEMM's fused multiply-adds (bf16:fma, also forced here
 * to test it on any CPU).
 */
#include <cpuid.h>
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "drivers/cpu/gemm.h"

static int cpu_has(const char *f)
{
        __builtin_cpu_init();
        if (!strcmp(f, "avx512"))
                return __builtin_cpu_supports("avx512f");
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit)
{
        unsigned r[4];

        return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) && ((r[reg] >> bit) & 1);
}

/* A packing buffer of the driver's scratch size, as a runtime's plan carves one per device. */
static void *scratch_buffer(void)
{
        size_t n = strata__cpu_driver.scratch_bytes();

        return aligned_alloc(64, (n + 63) / 64 * 64);
}

/* The set's kernels, the calling thread warmed up with a buffer as a device's thread is. */
static const struct strata_kernel_ops *kernels(enum strata_kernels set)
{
        static _Thread_local void *buf;
        const struct strata_device_ops *d;

        if (strata__cpu_driver_for(set, &d) != STRATA_OK || d->prepare(1) != STRATA_OK)
                return NULL;
        if (!buf)
                buf = scratch_buffer();
        cr_assert_not_null(buf);
        strata__cpu_driver.warm_up(buf);
        return d->kernels;
}

static void fill(float *x, size_t n, unsigned s)
{
        for (size_t i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                x[i] = (float)((s >> 9) & 0xffff) / 65536.0f - 0.5f;
        }
}

Test(cpu_kernel_sets, native_set_follows_the_cpu_features)
{
        const char *native = strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_F32);

        cr_assert_not_null(native);
        if (cpu_has("avx512"))
                cr_expect_str_eq(native, "libxsmm:avx512");
        else if (cpu_has("avx2"))
                cr_expect_str_eq(native, "libxsmm:avx2");
        else
                cr_expect_str_eq(native, "strata:scalar");
        cr_expect_str_eq(strata_kernel_set(STRATA_KERNELS_SCALAR, STRATA_F32), "strata:scalar");
        if (cpu_has("avx2"))
                cr_expect_str_eq(strata_kernel_set(STRATA_KERNELS_PORTABLE, STRATA_F32),
                                 "libxsmm:avx2");
        cr_expect_null(strata_kernel_set((enum strata_kernels)99, STRATA_F32));
}

/* A tiny runtime with kernel set @p set: strata_init's status. */
static int init_with(int set)
{
        static struct strata_module mods[] = { { .ops = &strata_linear, .out = 10 } };
        static struct strata_model model = { .in_features = 8, .nmodules = 1, .modules = mods };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt = NULL;
        int rc;

        c.model = &model;
        c.batch = 4;
        c.classes = 10;
        c.device.kernels = (enum strata_kernels)set;
        rc = strata_init(&rt, &c);
        if (rc == STRATA_OK)
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return rc;
}

Test(cpu_kernel_sets, a_forced_set_is_honoured_or_refused_with_the_reason)
{
        cr_expect_eq(init_with(STRATA_KERNELS_SCALAR), STRATA_OK, "%s", strata_last_error());
        if (cpu_has("avx2"))
                cr_expect_eq(init_with(STRATA_KERNELS_PORTABLE), STRATA_OK, "%s",
                             strata_last_error());
        if (cpu_has("avx512")) {
                cr_expect_eq(init_with(STRATA_KERNELS_AVX512), STRATA_OK, "%s",
                             strata_last_error());
        } else {
                cr_expect_eq(init_with(STRATA_KERNELS_AVX512), STRATA_ENOTSUP);
                cr_expect(strstr(strata_last_error(), "AVX-512"), "%s", strata_last_error());
        }
        cr_expect_eq(init_with(7), STRATA_EINVAL);
        cr_expect(strstr(strata_last_error(), "kernels"), "%s", strata_last_error());
}

/*
 * Odd shapes: tails of every block size, k past one chunk, strided operands, a last panel
 * of columns of every width (8: 70, 129, 520, 1030 and the CNN's forward 196; 16: 784; 32:
 * 90 and the CNN's gradients' 288; 64: 63).
 */
static const int shapes[][5] = { /* ta, tb, m, n, k */
        { 0, 1, 1, 1, 1 },     { 0, 1, 37, 70, 300 },  { 1, 0, 65, 129, 257 },
        { 0, 0, 33, 10, 513 }, { 1, 1, 31, 63, 17 },   { 0, 1, 300, 17, 784 },
        { 1, 0, 10, 784, 64 }, { 0, 0, 600, 520, 31 }, { 0, 1, 3, 1030, 5 },
        { 1, 1, 40, 90, 50 },  { 0, 0, 64, 196, 288 }, { 0, 1, 64, 288, 196 },
        { 1, 0, 196, 288, 64 },
};

struct gemm_case {
        int ta, tb, m, n, k, lda, ldb, ldc;
        float *a, *b, *c0;
        uint16_t *ah, *bh; /* bf16 gemm_lp_io only: A or B stored as bf16 where not NULL */
};

static void make_case(struct gemm_case *g, const int *s, unsigned seed)
{
        *g = (struct gemm_case){ .ta = s[0], .tb = s[1], .m = s[2], .n = s[3], .k = s[4] };
        g->lda = (g->ta ? g->m : g->k) + 3;
        g->ldb = (g->tb ? g->k : g->n) + 5;
        g->ldc = g->n + 2;
        g->a = malloc(sizeof(float) * (size_t)g->lda * (g->ta ? g->k : g->m));
        g->b = malloc(sizeof(float) * (size_t)g->ldb * (g->tb ? g->n : g->k));
        g->c0 = malloc(sizeof(float) * (size_t)g->ldc * g->m);
        fill(g->a, (size_t)g->lda * (g->ta ? g->k : g->m), seed);
        fill(g->b, (size_t)g->ldb * (g->tb ? g->n : g->k), seed + 1);
        fill(g->c0, (size_t)g->ldc * g->m, seed + 2);
}

static float *run_case(const struct strata_kernel_ops *k, const struct gemm_case *g, float alpha,
                       float beta)
{
        float *c = malloc(sizeof(float) * (size_t)g->ldc * g->m);

        memcpy(c, g->c0, sizeof(float) * (size_t)g->ldc * g->m);
        k->gemm(g->ta, g->tb, g->m, g->n, g->k, alpha, g->a, g->lda, g->b, g->ldb, beta, c,
                g->ldc);
        return c;
}

static void free_case(struct gemm_case *g)
{
        free(g->a), free(g->b), free(g->c0), free(g->ah), free(g->bh);
}

/* |c - ref| within f32's rounding of a k-term sum; the padding columns untouched. */
static void check_ref(const struct gemm_case *g, const float *c, float alpha, float beta)
{
        for (int i = 0; i < g->m; i++) {
                for (int j = 0; j < g->n; j++) {
                        double r = 0.0, mag = 0.0;

                        for (int kk = 0; kk < g->k; kk++) {
                                double x = g->ta ? g->a[(size_t)kk * g->lda + i]
                                                 : g->a[(size_t)i * g->lda + kk];
                                double y = g->tb ? g->b[(size_t)j * g->ldb + kk]
                                                 : g->b[(size_t)kk * g->ldb + j];

                                r += x * y;
                                mag += fabs(x * y);
                        }
                        r = alpha * r + beta * (double)g->c0[(size_t)i * g->ldc + j];
                        cr_assert_leq(fabs(r - c[(size_t)i * g->ldc + j]),
                                      1e-6 * (g->k + 4) * (mag + 1.0), "ta%d tb%d %dx%dx%d "
                                      "at (%d, %d): %.9g, reference %.9g", g->ta, g->tb, g->m,
                                      g->n, g->k, i, j, c[(size_t)i * g->ldc + j], r);
                }
                for (int j = g->n; j < g->ldc; j++)
                        cr_assert_eq(c[(size_t)i * g->ldc + j], g->c0[(size_t)i * g->ldc + j]);
        }
}

Test(cpu_kernel_sets, every_set_is_exact_and_all_give_the_same_bits, .timeout = 60)
{
        static const float ab[][2] = { { 1.0f, 0.0f }, { 1.0f, 1.0f }, { -0.5f, 0.25f } };
        const struct strata_kernel_ops *k[STRATA_KERNELS_COUNT];
        int ran = 0;

        for (int s = 0; s < STRATA_KERNELS_COUNT; s++)
                k[s] = kernels((enum strata_kernels)s);
        cr_assert_not_null(k[STRATA_KERNELS_NATIVE]);
        cr_assert_not_null(k[STRATA_KERNELS_SCALAR]);
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
                for (size_t v = 0; v < sizeof(ab) / sizeof(ab[0]); v++) {
                        struct gemm_case g;
                        float *c[STRATA_KERNELS_COUNT] = { 0 };

                        make_case(&g, shapes[i], (unsigned)(7 * i + v));
                        for (int s = 0; s < STRATA_KERNELS_COUNT; s++)
                                if (k[s])
                                        c[s] = run_case(k[s], &g, ab[v][0], ab[v][1]);
                        check_ref(&g, c[STRATA_KERNELS_NATIVE], ab[v][0], ab[v][1]);
                        for (int s = 1; s < STRATA_KERNELS_COUNT; s++)
                                if (c[s]) {
                                        cr_assert_eq(memcmp(c[s], c[0], sizeof(float) *
                                                            (size_t)g.ldc * g.m), 0,
                                                     "set %s differs from %s on shape %zu",
                                                     strata_kernel_set(s, STRATA_F32),
                                                     strata_kernel_set(0, STRATA_F32), i);
                                        ran++;
                                }
                        for (int s = 0; s < STRATA_KERNELS_COUNT; s++)
                                free(c[s]);
                        free_case(&g);
                }
        cr_assert_gt(ran, 0);
}

/*
 * Chains whose sum is -0 (every product a negative underflow, -2^-100 2^-100): libxsmm's
 * kernels pad each piece of k to a multiple of 16 with fma(0, 0, t), which makes -0 into +0;
 * every set gives those bits: +0 where k's last piece of 256 is not a multiple of 16, else -0.
 */
Test(cpu_kernel_sets, negative_zero_chains_get_the_same_bits_in_every_set)
{
        static const int sh[][5] = { /* ta, tb, m, n, k */
                { 0, 1, 1, 1, 3 },    { 0, 0, 3, 70, 3 },    { 1, 0, 37, 70, 259 },
                { 0, 1, 300, 17, 19 }, { 0, 0, 5, 70, 16 },  { 1, 1, 3, 70, 272 },
                { 0, 1, 40, 9, 512 },
        };

        for (int s = 0; s < STRATA_KERNELS_COUNT; s++) {
                const struct strata_kernel_ops *k = kernels((enum strata_kernels)s);

                for (size_t i = 0; k && i < sizeof(sh) / sizeof(sh[0]); i++) {
                        int last = sh[i][4] - (sh[i][4] - 1) / 256 * 256;
                        unsigned want = last % 16 ? 0x00000000u : 0x80000000u;
                        struct gemm_case g;
                        size_t na, nb;
                        float *c;

                        make_case(&g, sh[i], 3);
                        na = (size_t)g.lda * (g.ta ? g.k : g.m);
                        nb = (size_t)g.ldb * (g.tb ? g.n : g.k);
                        for (size_t q = 0; q < na; q++)
                                g.a[q] = -0x1p-100f;
                        for (size_t q = 0; q < nb; q++)
                                g.b[q] = 0x1p-100f;
                        c = run_case(k, &g, 1.0f, 0.0f);
                        for (int r = 0; r < g.m; r++)
                                for (int l = 0; l < g.n; l++) {
                                        unsigned u;

                                        memcpy(&u, &c[(size_t)r * g.ldc + l], sizeof(u));
                                        cr_assert_eq(u, want, "set %s, k %d: C[%d][%d] = "
                                                     "0x%08x, not 0x%08x",
                                                     strata_kernel_set(s, STRATA_F32), g.k, r,
                                                     l, u, want);
                                }
                        free(c);
                        free_case(&g);
                }
        }
}

/*
 * Decision 0119: a chunk whose last block of 16 holds 1 to 8 products runs them as a tail
 * kernel, not padded to 16, and must give the padded chains' bits. Every remainder 1 to 15
 * (9 to 15 stay padded), in the first chunk and after a whole one, on tiles of every width
 * (the last panel 8, 16, 32 or 64 wide) and every row block (63 rows: 32 + 16 + ... + 1), in
 * C's own form and the narrow one (C's transpose: 63 or 8 of its rows, whole panels),
 * beta 0 and not, and B packed once (gemm_pb): every set gives the scalar set's bits. Where
 * the avx2 set runs, every one of its tail kernels is there.
 */
Test(cpu_kernel_sets, a_chunks_last_few_products_give_the_padded_bits, .timeout = 120)
{
        static const int sh[][4] = { /* ta, tb, m, n */
                { 0, 1, 63, 72 }, { 1, 0, 63, 80 }, { 0, 0, 63, 96 }, { 1, 1, 63, 120 },
                { 0, 1, 100, 8 }, { 1, 1, 128, 63 },
        };
        static const float ab[][2] = { { 1.0f, 0.0f }, { 1.0f, 1.0f }, { -0.5f, 0.25f } };
        const struct strata_kernel_ops *sca = kernels(STRATA_KERNELS_SCALAR);
        const char *avx2 = strata_kernel_set(STRATA_KERNELS_PORTABLE, STRATA_F32);
        int ran = 0;

        cr_assert_not_null(kernels(STRATA_KERNELS_NATIVE));
        if (avx2 && !strcmp(avx2, "libxsmm:avx2"))
                cr_assert_eq(strata__sgemm_tails(STRATA_KERNELS_PORTABLE), 4 * 6 * 8);
        for (int t = 1; t < 16; t++)
                for (int base = 16; base <= 256 + 16; base += 256)
                        for (size_t i = 0; i < sizeof(sh) / sizeof(sh[0]); i++) {
                                int s5[5] = { sh[i][0], sh[i][1], sh[i][2], sh[i][3], base + t };
                                const float *v = ab[(t + i) % 3];
                                struct gemm_case g;
                                float *want;

                                make_case(&g, s5, (unsigned)(31 * t + i));
                                want = run_case(sca, &g, v[0], v[1]);
                                for (int s = 0; s < STRATA_KERNELS_SCALAR; s++) {
                                        const struct strata_kernel_ops *k =
                                                kernels((enum strata_kernels)s);
                                        float *c = k ? run_case(k, &g, v[0], v[1]) : NULL;

                                        cr_assert(!c || !memcmp(c, want, sizeof(float) *
                                                                (size_t)g.ldc * g.m),
                                                  "set %s, %d x %d x %d (ta %d tb %d): not the "
                                                  "scalar set's bits",
                                                  strata_kernel_set(s, STRATA_F32), g.m, g.n,
                                                  g.k, g.ta, g.tb);
                                        if (c && !g.ta && g.tb && v[0] == 1.0f) {
                                                float *pb = malloc(sizeof(float) *
                                                                   k->gemm_pack_floats(g.n, g.k));

                                                cr_assert_not_null(pb);
                                                memcpy(c, g.c0, sizeof(float) *
                                                                (size_t)g.ldc * g.m);
                                                k->gemm_pack(g.b, g.ldb, g.n, g.k, pb);
                                                k->gemm_pb(g.m, g.n, g.k, g.a, g.lda, g.b,
                                                           g.ldb, pb, v[1], c, g.ldc);
                                                cr_assert(!memcmp(c, want, sizeof(float) *
                                                                  (size_t)g.ldc * g.m),
                                                          "set %s, %d x %d x %d from B "
                                                          "packed once: not the scalar set's "
                                                          "bits", strata_kernel_set(s,
                                                          STRATA_F32), g.m, g.n, g.k);
                                                free(pb);
                                        }
                                        ran += c != NULL;
                                        free(c);
                                }
                                free(want);
                                free_case(&g);
                        }
        cr_assert_gt(ran, 0);
}

/* Issue 43, item 5: a row of C gets the same bits whether the call has 1, 7 or 300 rows. */
Test(cpu_kernel_sets, a_row_bits_do_not_depend_on_the_row_count)
{
        const struct strata_kernel_ops *k = kernels(STRATA_KERNELS_NATIVE);
        static const int forms[][2] = { { 0, 1 }, { 0, 0 } }; /* forward, input gradient */
        const int m = 300, n = 70, kk = 600, rows[] = { 1, 7, 33, 300 };

        cr_assert_not_null(k);
        for (size_t f = 0; f < 2; f++) {
                const int s[5] = { forms[f][0], forms[f][1], m, n, kk };
                struct gemm_case g;
                float *all;

                make_case(&g, s, 11);
                all = run_case(k, &g, 1.0f, 1.0f);
                for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
                        for (int r0 = 0; r0 + rows[r] <= m; r0 += rows[r] * 5 + 1) {
                                float *c = malloc(sizeof(float) * (size_t)g.ldc * rows[r]);

                                memcpy(c, g.c0 + (size_t)r0 * g.ldc,
                                       sizeof(float) * (size_t)g.ldc * rows[r]);
                                k->gemm(0, g.tb, rows[r], n, kk, 1.0f, g.a + (size_t)r0 * g.lda,
                                        g.lda, g.b, g.ldb, 1.0f, c, g.ldc);
                                cr_assert_eq(memcmp(c, all + (size_t)r0 * g.ldc,
                                                    sizeof(float) * (size_t)g.ldc * rows[r]),
                                             0, "rows %d.. of a %d-row call differ from the "
                                             "%d-row call's", r0, rows[r], m);
                                free(c);
                        }
                free(all);
                free_case(&g);
        }
}

struct worker {
        const struct strata_kernel_ops *k;
        int warm;
        int bad;
};

static const int conc_shape[5] = { 0, 1, 128, 256, 784 };
static float *conc_ref;
static pthread_barrier_t conc_bar;

static void *conc_run(void *arg)
{
        struct worker *w = arg;
        struct gemm_case g;

        void *buf = w->warm ? scratch_buffer() : NULL;

        if (w->warm)
                strata__cpu_driver.warm_up(buf);
        make_case(&g, conc_shape, 3);
        pthread_barrier_wait(&conc_bar);
        for (int it = 0; it < 20; it++) {
                float *c = run_case(w->k, &g, 1.0f, 1.0f);

                w->bad += memcmp(c, conc_ref, sizeof(float) * (size_t)g.ldc * g.m) != 0;
                free(c);
        }
        free_case(&g);
        strata__cpu_driver.forget(buf);
        free(buf);
        return NULL;
}

Test(cpu_kernel_sets, two_threads_at_once_get_the_bits_of_one_alone, .timeout = 60)
{
        const struct strata_kernel_ops *k = kernels(STRATA_KERNELS_NATIVE);
        struct worker w[2] = { { k, 1, 0 }, { k, 0, 0 } }; /* one warmed up, one not */
        pthread_t t[2];
        struct gemm_case g;

        cr_assert_not_null(k);
        make_case(&g, conc_shape, 3);
        conc_ref = run_case(k, &g, 1.0f, 1.0f);
        pthread_barrier_init(&conc_bar, NULL, 2);
        for (int i = 0; i < 2; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, conc_run, &w[i]), 0);
        for (int i = 0; i < 2; i++)
                pthread_join(t[i], NULL);
        cr_expect_eq(w[0].bad + w[1].bad, 0, "%d and %d of 20 concurrent GEMMs differ",
                     w[0].bad, w[1].bad);
        pthread_barrier_destroy(&conc_bar);
        free(conc_ref);
        free_case(&g);
}

/*
 * CPUID.(7, 0):EDX bits 22 and 24 (AMX-BF16, AMX-TILE), and Linux granting the process the
 * tile data (asked here directly, as the probe of decision 0049 does).
 */
static int cpu_has_amx(void)
{
        return cpuid_bit(7, 0, 3, 22) && cpuid_bit(7, 0, 3, 24) &&
               syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

/*
 * bf16-mixed runs on every CPU (decisions 0038, 0049): bf16:amx where the CPU has AMX-BF16,
 * else bf16:avx512_bf16 where it has AVX512_BF16, else bf16:fma, appended to every f32 set's
 * name.
 */
Test(cpu_kernel_sets, bf16_takes_amx_else_avx512_bf16_else_fma)
{
        const struct strata_kernel_ops *k = kernels(STRATA_KERNELS_NATIVE);
        const char *amx_env = getenv("STRATA_AMX");
        const char *path = cpu_has_amx() && amx_env && !strcmp(amx_env, "1") ? "bf16:amx"
                           : cpuid_bit(7, 1, 0, 5) ? "bf16:avx512_bf16"
                                                   : "bf16:fma";
        char want[64];

        cr_assert_not_null(k);
        cr_expect_eq(k->prepare_lp(STRATA_BF16), STRATA_OK, "%s", strata_last_error());
        cr_expect_str_eq(strata__cpu_lp_name(), path);
        for (int s = 0; s < STRATA_KERNELS_COUNT; s++) {
                const char *f32 = strata_kernel_set((enum strata_kernels)s, STRATA_F32);

                if (!f32) {
                        cr_expect_null(strata_kernel_set((enum strata_kernels)s, STRATA_BF16));
                        continue;
                }
                snprintf(want, sizeof(want), "%s %s", f32, path);
                cr_expect_str_eq(strata_kernel_set((enum strata_kernels)s, STRATA_BF16), want);
        }
}

static void bf16_fma(void)
{
        strata__cpu_lp_force_fma(1);
}

/* x rounded to bf16 by frexp/nearbyint (the values here are normal or zero). */
static double bf16_of(float x)
{
        int e;
        double m = frexp(x, &e);

        return x == 0.0f ? 0.0 : ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

static float bf16_widen(uint16_t h)
{
        uint32_t u = (uint32_t)h << 16;
        float f;

        memcpy(&f, &u, 4);
        return f;
}

/*
 * C of one bf16 GEMM through gemm_lp_io: f32 C (alpha, beta over c0) or, @p bf16_c, bf16 C
 * (alpha and the bias, beta 0) widened back to f32 for comparison.
 */
static float *run_bf16(const struct strata_kernel_ops *k, const struct gemm_case *g, float alpha,
                       float beta, const float *bias, int bf16_c, void *scratch)
{
        size_t cn = (size_t)g->ldc * g->m;
        float *c = malloc(sizeof(float) * cn);
        uint16_t *ch = malloc(sizeof(uint16_t) * cn);

        memcpy(c, g->c0, sizeof(float) * cn);
        memset(ch, 0, sizeof(uint16_t) * cn);
        k->gemm_lp_io(&(struct strata_gemm_io){ .dt = STRATA_BF16, .ta = g->ta, .tb = g->tb,
                                                .m = g->m, .n = g->n, .k = g->k,
                                                .alpha = alpha, .beta = bf16_c ? 0.0f : beta,
                                                .a = g->ah ? (const void *)g->ah : g->a,
                                                .at = g->ah ? STRATA_BF16 : STRATA_F32,
                                                .lda = g->lda,
                                                .b = g->bh ? (const void *)g->bh : g->b,
                                                .bt = g->bh ? STRATA_BF16 : STRATA_F32,
                                                .ldb = g->ldb, .c = bf16_c ? (void *)ch : c,
                                                .ldc = g->ldc,
                                                .ct = bf16_c ? STRATA_BF16 : STRATA_F32,
                                                .bias = bf16_c ? bias : NULL },
                      scratch);
        for (size_t i = 0; bf16_c && i < cn; i++)
                c[i] = bf16_widen(ch[i]);
        free(ch);
        return c;
}

/*
 * The double reference over bf16-rounded operands: alpha s + beta c0, or alpha s + bias
 * rounded once for a bf16 C; within f32's error on a k-term sum (plus bf16's half ulp).
 */
static void check_bf16_ref(const struct gemm_case *g, const float *c, float alpha, float beta,
                           const float *bias, int bf16_c)
{
        for (int i = 0; i < g->m; i++)
                for (int j = 0; j < g->n; j++) {
                        double r = 0.0, mag = 0.0, tol;

                        for (int kk = 0; kk < g->k; kk++) {
                                double x = bf16_of(g->ta ? g->a[(size_t)kk * g->lda + i]
                                                         : g->a[(size_t)i * g->lda + kk]);
                                double y = bf16_of(g->tb ? g->b[(size_t)j * g->ldb + kk]
                                                         : g->b[(size_t)kk * g->ldb + j]);

                                r += x * y;
                                mag += fabs(x * y);
                        }
                        r = alpha * r + (bf16_c ? bias[j] : beta * (double)g->c0[(size_t)i *
                                                                                 g->ldc + j]);
                        tol = 1e-6 * (g->k + 4) * (mag + 1.0) + (bf16_c ? 0x1p-8 * fabs(r) : 0);
                        cr_assert_leq(fabs(r - c[(size_t)i * g->ldc + j]), tol,
                                      "bf16 C %d, ta%d tb%d %dx%dx%d at (%d, %d): %.9g, "
                                      "reference %.9g", bf16_c, g->ta, g->tb, g->m, g->n, g->k,
                                      i, j, c[(size_t)i * g->ldc + j], r);
                }
}

/* @p n floats as bf16 bits, rounded to nearest even by bf16_of (a test's own rounding). */
static uint16_t *bf16_copy(const float *x, size_t n)
{
        uint16_t *h = malloc(sizeof(uint16_t) * (n ? n : 1));

        for (size_t i = 0; i < n; i++) {
                float f = (float)bf16_of(x[i]);
                uint32_t u;

                memcpy(&u, &f, 4);
                h[i] = (uint16_t)(u >> 16);
        }
        return h;
}

/*
 * The bf16 path @p path (forced or the CPU's) on @p ns shapes: every element within f32
 * accumulation error of the double reference over the bf16-rounded operands, with alpha,
 * beta and a bf16 C's bias, operands stored as f32 or bf16 (A, B or neither, by shape and
 * variant); a second call gives the same bits; a row's bits do not depend on the call's row
 * count. The scratch is exactly gemm_lp_bytes, filled with NaN before the first call.
 */
static void check_bf16_path(const char *path, const int (*sh)[5], size_t ns)
{
        static const float ab[][2] = { { 1.0f, 0.0f }, { 1.0f, 1.0f }, { -0.5f, 0.25f },
                                       { -0.5f, 0.0f } };
        const struct strata_kernel_ops *k = kernels(STRATA_KERNELS_NATIVE);

        cr_assert_not_null(k);
        cr_assert_eq(k->prepare_lp(STRATA_BF16), STRATA_OK, "%s", strata_last_error());
        cr_assert_str_eq(strata__cpu_lp_name(), path);
        for (size_t i = 0; i < ns; i++)
                for (size_t v = 0; v < sizeof(ab) / sizeof(ab[0]) * 2; v++) {
                        float alpha = ab[v / 2][0], beta = ab[v / 2][1], *bias, *c, *again;
                        int bf16_c = (int)(v & 1), stored = (int)((i + v / 2) % 3);
                        size_t dim, bytes;
                        struct gemm_case g;
                        void *scratch;

                        make_case(&g, sh[i], (unsigned)(5 * i + v));
                        if (stored == 1) /* A as bf16 */
                                g.ah = bf16_copy(g.a, (size_t)g.lda * (g.ta ? g.k : g.m));
                        if (stored == 2) /* B as bf16 */
                                g.bh = bf16_copy(g.b, (size_t)g.ldb * (g.tb ? g.n : g.k));
                        dim = (size_t)(g.m > g.n ? (g.m > g.k ? g.m : g.k)
                                                 : (g.n > g.k ? g.n : g.k));
                        bytes = k->gemm_lp_bytes(STRATA_BF16,
                                                 (size_t)g.k * ((size_t)g.m + (size_t)g.n), dim);
                        scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
                        memset(scratch, 0xff, bytes); /* NaN wherever padding is not zeroed */
                        bias = malloc(sizeof(float) * (size_t)g.n);
                        fill(bias, (size_t)g.n, (unsigned)(9 * i + v));
                        c = run_bf16(k, &g, alpha, beta, bias, bf16_c, scratch);
                        again = run_bf16(k, &g, alpha, beta, bias, bf16_c, scratch);
                        check_bf16_ref(&g, c, alpha, beta, bias, bf16_c);
                        cr_assert_eq(memcmp(c, again, sizeof(float) * (size_t)g.ldc * g.m), 0,
                                     "%s shape %zu: a second call differs", path, i);
                        if (g.m > 1 && !g.ta) { /* rows [m / 3, m / 3 + m / 2) alone */
                                struct gemm_case part = g;
                                int r0 = g.m / 3;

                                part.m = g.m / 2;
                                part.a = g.a + (size_t)r0 * g.lda;
                                part.ah = g.ah ? g.ah + (size_t)r0 * g.lda : NULL;
                                part.c0 = g.c0 + (size_t)r0 * g.ldc;
                                free(again);
                                again = run_bf16(k, &part, alpha, beta, bias, bf16_c, scratch);
                                cr_assert_eq(memcmp(again, c + (size_t)r0 * g.ldc,
                                                    sizeof(float) * (size_t)g.ldc * part.m),
                                             0, "%s shape %zu: rows %d.. of a %d-row call "
                                             "differ", path, i, r0, part.m);
                        }
                        free(c), free(again), free(bias), free(scratch);
                        free_case(&g);
                }
}

/*
 * bf16:fma, forced whatever the CPU, on the odd shapes (m past its row block of 256, k past
 * the f32 GEMM's chunk of 256).
 */
Test(cpu_kernel_sets, bf16_fma_matches_a_reference_and_repeats_bitwise, .timeout = 120,
     .init = bf16_fma)
{
        check_bf16_path("bf16:fma", shapes, sizeof(shapes) / sizeof(shapes[0]));
}

/*
 * bf16:amx's shapes: all four transposes, m, n, k odd, below, at and past a tile (16), a
 * block (64 x 32), a k step (32), a k block (64) and the packers' stage (128 k; 2048 columns
 * of op(B)); m past a group of row blocks (JG * 64 = 256); k = 0.
 */
static const int amx_shapes[][5] = { /* ta, tb, m, n, k */
        { 0, 0, 1, 1, 1 },      { 0, 1, 15, 17, 31 },   { 1, 0, 17, 15, 33 },
        { 1, 1, 33, 31, 65 },   { 0, 1, 200, 65, 784 }, { 1, 0, 65, 200, 17 },
        { 0, 0, 31, 33, 200 },  { 1, 1, 64, 32, 64 },   { 0, 0, 129, 97, 0 },
        { 0, 1, 784, 10, 15 },  { 1, 0, 10, 784, 33 },  { 0, 0, 300, 300, 129 },
        { 1, 1, 257, 47, 96 },  { 0, 0, 3, 2100, 5 },   { 1, 0, 5, 2077, 3 },
};

static void amx_emulated(void)
{
        strata__cpu_lp_force_amx(STRATA__AMX_EMULATED);
}

/*
 * bf16:amx's own code (panel addresses, tile loops, edge blocks, the tile configuration's
 * shapes) on any CPU: its tile instructions run by the scalar emulator.
 */
Test(cpu_kernel_sets, bf16_amx_emulated_matches_a_reference_and_repeats_bitwise, .timeout = 240,
     .init = amx_emulated)
{
        check_bf16_path("bf16:amx", amx_shapes, sizeof(amx_shapes) / sizeof(amx_shapes[0]));
}

/*
 * The same on the real tile instructions, where the CPU has AMX-BF16 (asked for here: the
 * default waits for STRATA_AMX=1).
 */
Test(cpu_kernel_sets, bf16_amx_matches_a_reference_and_repeats_bitwise, .timeout = 120)
{
        if (!cpu_has_amx())
                cr_skip_test("this CPU has no AMX-BF16, or Linux grants no tile data");
        strata__cpu_lp_force_amx(STRATA__AMX_ON);
        check_bf16_path("bf16:amx", amx_shapes, sizeof(amx_shapes) / sizeof(amx_shapes[0]));
        check_bf16_path("bf16:amx", shapes, sizeof(shapes) / sizeof(shapes[0]));
}

/*
 * On an AMX CPU, AMX forced off runs bf16:avx512_bf16 (every AMX CPU has AVX512_BF16), named
 * so, with results near bf16:amx's on the same operands (each within f32 accumulation error
 * of the double reference).
 */
Test(cpu_kernel_sets, an_amx_cpu_without_amx_runs_avx512_bf16_near_amx, .timeout = 120)
{
        const struct strata_kernel_ops *k;
        size_t ns = sizeof(amx_shapes) / sizeof(amx_shapes[0]);

        if (!cpu_has_amx())
                cr_skip_test("this CPU has no AMX-BF16, or Linux grants no tile data");
        k = kernels(STRATA_KERNELS_NATIVE);
        cr_assert_not_null(k);
        for (size_t i = 0; i < ns; i++) {
                struct gemm_case g;
                float *c[2];
                size_t bytes;
                void *scratch;

                make_case(&g, amx_shapes[i], (unsigned)(3 * i + 1));
                for (int off = 0; off < 2; off++) {
                        strata__cpu_lp_force_amx(off ? STRATA__AMX_OFF : STRATA__AMX_ON);
                        cr_assert_eq(k->prepare_lp(STRATA_BF16), STRATA_OK, "%s",
                                     strata_last_error());
                        cr_assert_str_eq(strata__cpu_lp_name(),
                                         off ? "bf16:avx512_bf16" : "bf16:amx");
                        cr_assert(strstr(strata_kernel_set(STRATA_KERNELS_NATIVE, STRATA_BF16),
                                         off ? "bf16:avx512_bf16" : "bf16:amx"));
                        bytes = k->gemm_lp_bytes(STRATA_BF16, (size_t)g.k * (g.m + g.n) + 1,
                                                 (size_t)(g.m + g.n + g.k));
                        scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
                        c[off] = run_bf16(k, &g, -0.5f, 0.25f, NULL, 0, scratch);
                        free(scratch);
                }
                for (int r = 0; r < g.m; r++) /* the paths' sums differ by rounding only */
                        for (int j = 0; j < g.n; j++) {
                                float x = c[0][(size_t)r * g.ldc + j],
                                      y = c[1][(size_t)r * g.ldc + j];

                                cr_assert_leq(fabsf(x - y), 2e-6f * (g.k + 4) * (0.25f * g.k + 1),
                                              "shape %zu at (%d, %d): amx %a, avx512_bf16 %a",
                                              i, r, j, x, y);
                        }
                check_bf16_ref(&g, c[0], -0.5f, 0.25f, NULL, 0);
                check_bf16_ref(&g, c[1], -0.5f, 0.25f, NULL, 0);
                free(c[0]), free(c[1]);
                free_case(&g);
        }
}

