/*
 * The attention family (RMSNorm, LayerNorm per token, multi-head self-attention, the
 * positional embedding, tokens) against PyTorch in float64: the same weights, inputs and targets, three SGD steps of
 * sum((y - t)^2) / 2 on each side (tests/tools/attention_reference.py: nn.MultiheadAttention
 * with batch_first, with and without the causal mask; RMSNorm by its definition), the weights
 * within 1e-5 relative. Their backward against central differences; their groups by PyTorch's
 * names and shapes; bad arguments refused with the value named.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/shape.h"
#include "tests/support/fdcheck.h"
#include "tests/support/modcall.h"

#define ROWS 3
#define STEPS 3
#define LR 0.05f

static float x[MODCALL_MAX], y[MODCALL_MAX], t[MODCALL_MAX], dy[MODCALL_MAX], dx[MODCALL_MAX];
static double want[MODCALL_MAX];

static void write_f32(const char *dir, const char *name, const float *v, size_t n)
{
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        cr_assert_not_null(f = fopen(path, "wb"), "%s", path);
        cr_assert_eq(fwrite(v, sizeof(float), n, f), n);
        fclose(f);
}

static void read_f64(const char *dir, const char *name, double *v, size_t n)
{
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        cr_assert_not_null(f = fopen(path, "rb"), "%s", path);
        cr_assert_eq(fread(v, sizeof(double), n, f), n, "%s: too short", path);
        fclose(f);
}

/* @p steps SGD steps of sum((y - t)^2) / 2 over ROWS rows through the module's ops. */
static void sgd(struct modcall *m, int steps)
{
        int n = ROWS * m->l.out;

        for (int s = 0; s < steps; s++) {
                m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
                for (int i = 0; i < n; i++)
                        dy[i] = y[i] - t[i];
                m->l.grad_fresh = 1;
                m->desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
                for (size_t i = 0; i < m->s.params; i++)
                        m->param[i] -= LR * m->grad[i];
        }
}

/* Module @p desc over (L, E) samples: Strata's weights after the steps against PyTorch's. */
static void against_pytorch(const char *kind, struct strata_module desc, int l, int e)
{
        struct modcall *m = &(struct modcall){ 0 };
        struct strata_dims in = { l, 1, { e } };
        char dir[] = "/tmp/strata-attn-XXXXXX", cmd[1024], line[256];
        int n = ROWS * l * e, done = 0;
        FILE *py;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        modcall_init(m, &desc, in, ROWS);
        for (size_t i = 0; i < m->s.params; i++) /* distinct from init: biases not 0 */
                m->param[i] += 0.1f * (float)sin(0.37 * (double)i + 0.2);
        modcall_wave(x, n, 0.71, 0.3);
        modcall_wave(t, n, 0.23, 1.1);
        cr_assert_not_null(mkdtemp(dir));
        write_f32(dir, "w0.f32", m->param, m->s.params);
        write_f32(dir, "x.f32", x, (size_t)n);
        write_f32(dir, "t.f32", t, (size_t)n);
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/attention_reference.py "
                 "%s %d %d %d %d %.9g %d %d %.9g %s 2>&1", STRATA_SOURCE_DIR, kind, l, e,
                 desc.ops == &strata_mha ? desc.heads : desc.norm_dims, desc.causal,
                 (double)desc.eps, ROWS, STEPS, (double)LR, dir);
        cr_assert_not_null(py = popen(cmd, "r"));
        while (fgets(line, sizeof(line), py)) {
                cr_log_info("%s", line);
                done |= !strncmp(line, "done", 4);
        }
        cr_assert_eq(pclose(py), 0, "the reference failed (see the log)");
        cr_assert(done);
        read_f64(dir, "w.f64", want, m->s.params);
        cr_assert_geq(modcall_rel_diff(m->param, want, (int)m->s.params), 1e-3,
                      "the steps moved the weights");
        sgd(m, STEPS);
        cr_log_info("%s heads %d causal %d: %.3g relative\n", kind, desc.heads, desc.causal,
                    modcall_rel_diff(m->param, want, (int)m->s.params));
        cr_assert_leq(modcall_rel_diff(m->param, want, (int)m->s.params), 1e-5,
                      "%s heads %d causal %d: %g", kind, desc.heads, desc.causal,
                      modcall_rel_diff(m->param, want, (int)m->s.params));
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
}

Test(attention, mha_matches_pytorch)
{
        against_pytorch("mha", (struct strata_module){ .ops = &strata_mha, .heads = 2 }, 5, 8);
        against_pytorch("mha", (struct strata_module){ .ops = &strata_mha, .heads = 1 }, 4, 6);
        against_pytorch("mha", (struct strata_module){ .ops = &strata_mha, .heads = 4 }, 6, 8);
}

Test(attention, mha_causal_matches_pytorch)
{
        against_pytorch("mha", (struct strata_module){ .ops = &strata_mha, .heads = 2,
                                                       .causal = 1 }, 5, 8);
        against_pytorch("mha", (struct strata_module){ .ops = &strata_mha, .heads = 3,
                                                       .causal = 1 }, 7, 6);
}

Test(attention, rmsnorm_matches_pytorch)
{
        against_pytorch("rmsnorm", (struct strata_module){ .ops = &strata_rmsnorm,
                                                           .eps = 1e-3f }, 4, 6);
        against_pytorch("rmsnorm", (struct strata_module){ .ops = &strata_rmsnorm,
                                                           .eps = 0.25f }, 3, 5);
}

/* dims 1 on a sequence: PyTorch's RMSNorm(E) and nn.LayerNorm(E) on each token. */
Test(attention, norms_per_token_match_pytorch)
{
        against_pytorch("rmsnorm", (struct strata_module){ .ops = &strata_rmsnorm,
                                                           .eps = 1e-3f, .norm_dims = 1 },
                        5, 6);
        against_pytorch("layernorm", (struct strata_module){ .ops = &strata_layernorm,
                                                             .eps = 1e-3f, .norm_dims = 1 },
                        5, 6);
        against_pytorch("layernorm", (struct strata_module){ .ops = &strata_layernorm,
                                                             .eps = 1e-4f }, 3, 4);
}

Test(attention, posembed_matches_pytorch)
{
        against_pytorch("posembed", (struct strata_module){ .ops = &strata_posembed }, 4, 6);
}

/* ---- gradients against central differences of sum(y * w) ---- */

static double objective(void *ctx)
{
        struct modcall *m = ctx;
        double s = 0.0;

        m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        for (int i = 0; i < ROWS * m->l.out; i++)
                s += (double)y[i] * dy[i];
        return s;
}

static void gradcheck(struct strata_module desc, struct strata_dims in)
{
        struct modcall *m = &(struct modcall){ 0 };
        int n = ROWS * modcall_count(in);

        modcall_init(m, &desc, in, ROWS);
        for (size_t i = 0; i < m->s.params; i++)
                m->param[i] += 0.2f * (float)sin(0.53 * (double)i + 0.4);
        modcall_wave(x, n, 0.71, 0.3);
        modcall_wave(dy, n, 1.3, 0.0);
        objective(m);
        desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        fd_check(objective, m, x, dx, (size_t)n, 1e-2f, 2e-2, desc.ops->name, "dx");
        objective(m); /* the backward consumed the saved values */
        desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
        memcpy(t, m->grad, m->s.params * sizeof(float));
        fd_check(objective, m, m->param, t, m->s.params, 1e-2f, 2e-2, desc.ops->name,
                 "dparam");
}

Test(attention, gradients_match_differences)
{
        gradcheck((struct strata_module){ .ops = &strata_mha, .heads = 2 },
                  (struct strata_dims){ 4, 1, { 6 } });
        gradcheck((struct strata_module){ .ops = &strata_mha, .heads = 2, .causal = 1 },
                  (struct strata_dims){ 5, 1, { 4 } });
        gradcheck((struct strata_module){ .ops = &strata_rmsnorm },
                  (struct strata_dims){ 3, 1, { 5 } });
        gradcheck((struct strata_module){ .ops = &strata_rmsnorm, .eps = 0.1f },
                  (struct strata_dims){ 7, 0, { 0 } });
        gradcheck((struct strata_module){ .ops = &strata_rmsnorm, .norm_dims = 1 },
                  (struct strata_dims){ 4, 1, { 5 } });
        gradcheck((struct strata_module){ .ops = &strata_rmsnorm, .norm_dims = 2 },
                  (struct strata_dims){ 2, 2, { 3, 4 } });
        gradcheck((struct strata_module){ .ops = &strata_layernorm, .norm_dims = 1 },
                  (struct strata_dims){ 4, 1, { 5 } });
        gradcheck((struct strata_module){ .ops = &strata_layernorm, .norm_dims = 2 },
                  (struct strata_dims){ 2, 2, { 3, 4 } });
        gradcheck((struct strata_module){ .ops = &strata_posembed },
                  (struct strata_dims){ 3, 1, { 4 } });
        gradcheck((struct strata_module){ .ops = &strata_tokens },
                  (struct strata_dims){ 3, 2, { 2, 4 } });
}

/* tokens is x.flatten(2).transpose(1, 2): (C, H, W) -> (H W, C); twice on (L, E) is itself. */
Test(attention, tokens_transposes_channels_and_positions)
{
        struct modcall *m = &(struct modcall){ 0 };
        struct strata_module desc = { .ops = &strata_tokens };
        static float back[MODCALL_MAX];
        int c = 3, sp = 8, n = c * sp;

        modcall_init(m, &desc, (struct strata_dims){ c, 2, { 2, 4 } }, ROWS);
        cr_assert_eq(m->s.out_dims.channels, sp);
        cr_assert_eq(m->s.out_dims.ndim, 1);
        cr_assert_eq(m->s.out_dims.size[0], c);
        cr_assert_eq(m->s.params, 0);
        modcall_wave(x, ROWS * n, 0.71, 0.3);
        desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        for (int r = 0; r < ROWS; r++)
                for (int ch = 0; ch < c; ch++)
                        for (int s = 0; s < sp; s++)
                                cr_assert(y[r * n + s * c + ch] == x[r * n + ch * sp + s]);
        modcall_init(m, &desc, (struct strata_dims){ sp, 1, { c } }, ROWS);
        desc.ops->forward(&m->l, &m->c, y, back, ROWS);
        cr_assert_eq(memcmp(back, x, (size_t)ROWS * n * sizeof(float)), 0);
}

/* A second backward over the same forward adds its gradients (grad_fresh 0). */
Test(attention, gradients_accumulate)
{
        struct strata_module desc = { .ops = &strata_mha, .heads = 2, .causal = 1 };
        struct modcall *m = &(struct modcall){ 0 };
        struct strata_dims in = { 4, 1, { 6 } };
        int n = ROWS * 24;
        static float once[MODCALL_MAX];

        modcall_init(m, &desc, in, ROWS);
        modcall_wave(x, n, 0.71, 0.3);
        modcall_wave(dy, n, 1.3, 0.0);
        desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        desc.ops->backward(&m->l, &m->c, x, y, dy, NULL, ROWS);
        memcpy(once, m->grad, m->s.params * sizeof(float));
        m->l.grad_fresh = 0;
        desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        desc.ops->backward(&m->l, &m->c, x, y, dy, NULL, ROWS);
        for (size_t i = 0; i < m->s.params; i++)
                cr_assert_float_eq(m->grad[i], 2.0f * once[i], 1e-5f * (1.0f + fabsf(once[i])),
                                   "%zu", i);
}

/* Groups by PyTorch's state_dict names and shapes; the output keeps the sequence's layout. */
Test(attention, groups_have_pytorch_names)
{
        struct modcall *m = &(struct modcall){ 0 };
        struct strata_module desc = { .ops = &strata_mha, .heads = 2 };

        modcall_init(m, &desc, (struct strata_dims){ 5, 1, { 8 } }, 1);
        cr_assert_eq(m->s.ngroups, 4);
        cr_assert_str_eq(m->s.groups[0].name, "in_proj_weight");
        cr_assert_eq(m->s.groups[0].shape[0], 24);
        cr_assert_eq(m->s.groups[0].shape[1], 8);
        cr_assert_str_eq(m->s.groups[1].name, "in_proj_bias");
        cr_assert_eq(m->s.groups[1].count, 24);
        cr_assert_str_eq(m->s.groups[2].name, "out_proj.weight");
        cr_assert_str_eq(m->s.groups[3].name, "out_proj.bias");
        cr_assert_eq(m->s.params, 4 * 64 + 32);
        cr_assert_eq(m->s.out_dims.channels, 5);
        cr_assert_eq(m->s.out_dims.size[0], 8);
        cr_assert_eq(m->s.aux_fixed, 0, "invariant mode runs it per chunk");
        for (int j = 0; j < 24; j++) /* PyTorch's init: biases 0 */
                cr_assert(m->param[3 * 64 + j] == 0.0f);
        desc = (struct strata_module){ .ops = &strata_rmsnorm };
        modcall_init(m, &desc, (struct strata_dims){ 5, 1, { 8 } }, 1);
        cr_assert_eq(m->s.ngroups, 1);
        cr_assert_str_eq(m->s.groups[0].name, "weight");
        cr_assert_eq(m->s.groups[0].ndim, 2);
        cr_assert(m->param[0] == 1.0f && m->param[39] == 1.0f, "init 1");
        desc = (struct strata_module){ .ops = &strata_posembed };
        modcall_init(m, &desc, (struct strata_dims){ 5, 1, { 8 } }, 1);
        cr_assert_eq(m->s.groups[0].shape[0], 5);
        cr_assert_eq(m->s.groups[0].shape[1], 8);
        cr_assert(m->param[0] == 0.0f && m->param[39] == 0.0f, "init 0");
}

/* The shape refuses @p desc over @p in with a message that holds @p named. */
static void refused(struct strata_module desc, struct strata_dims in, const char *named)
{
        struct modcall *m = &(struct modcall){ 0 };

        cr_assert_eq(modcall_shape(m, &desc, in), STRATA_EINVAL, "%s", named);
        cr_assert_not_null(strstr(strata_last_error(), named), "'%s' not in '%s'", named,
                           strata_last_error());
}

Test(attention, bad_arguments_named)
{
        struct strata_dims seq = { 5, 1, { 8 } };

        refused((struct strata_module){ .ops = &strata_mha, .heads = 3 }, seq,
                "heads 3 does not divide the embedding 8");
        refused((struct strata_module){ .ops = &strata_mha, .heads = 0 }, seq, "heads 0");
        refused((struct strata_module){ .ops = &strata_mha, .heads = -2 }, seq, "heads -2");
        refused((struct strata_module){ .ops = &strata_mha, .heads = 2, .causal = 2 }, seq,
                "causal 2");
        refused((struct strata_module){ .ops = &strata_mha, .heads = 2 },
                (struct strata_dims){ 40, 0, { 0 } }, "40 channels over 0 dimensions");
        refused((struct strata_module){ .ops = &strata_mha, .heads = 2 },
                (struct strata_dims){ 2, 2, { 4, 5 } }, "2 channels over 2 dimensions");
        refused((struct strata_module){ .ops = &strata_rmsnorm, .eps = -1.0f }, seq,
                "eps -1");
        refused((struct strata_module){ .ops = &strata_rmsnorm, .eps = NAN }, seq, "eps nan");
        refused((struct strata_module){ .ops = &strata_rmsnorm, .norm_dims = 2 }, seq,
                "dims 2 over a sample of 1 spatial dimensions");
        refused((struct strata_module){ .ops = &strata_rmsnorm, .norm_dims = -1 }, seq,
                "dims -1");
        refused((struct strata_module){ .ops = &strata_layernorm, .norm_dims = 2 }, seq,
                "layernorm (module 3): dims 2 over a sample of 1 spatial dimensions");
        refused((struct strata_module){ .ops = &strata_tokens },
                (struct strata_dims){ 12, 0, { 0 } }, "12 channels over 0 dimensions");
}

/* A group's name may join parts with '.' (out_proj.weight), never at an end or twice. */
static const char *group_name;

static int named_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        *s = (struct strata_module_shape){ .out = in, .params = 2, .ngroups = 1,
                                           .groups = { { group_name, STRATA_F32, 2,
                                                         STRATA_ROLE_WEIGHT, 1, { 2, 1 } } } };
        return STRATA_OK;
}

static void noop_fwd(struct strata_layer *l, const struct strata_step_ctx *c, const float *in,
                     float *out, int rows)
{
        (void)l, (void)c, (void)in, (void)out, (void)rows;
}

static void noop_bwd(struct strata_layer *l, const struct strata_step_ctx *c, const float *in,
                     const float *out, const float *dout, float *din, int rows)
{
        (void)l, (void)c, (void)in, (void)out, (void)dout, (void)din, (void)rows;
}

Test(attention, group_names_join_parts_with_a_dot)
{
        static const struct strata_module_ops ops = { "named", named_shape, NULL, noop_fwd,
                                                      noop_bwd, NULL };
        static const char *const good[] = { "out_proj.weight", "a.b.c", "weight" };
        static const char *const bad[] = { ".weight", "weight.", "out..weight", "." };
        struct strata_module desc = { .ops = &ops };
        struct strata_layer l = { .desc = &desc, .index = 2, .in = 4 };
        struct strata_module_shape s;

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                group_name = good[i];
                cr_assert_eq(strata__module_shape(&l, 4, &s), STRATA_OK, "%s: %s", good[i],
                             strata_last_error());
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                group_name = bad[i];
                cr_assert_eq(strata__module_shape(&l, 4, &s), STRATA_EINVAL, "%s", bad[i]);
                cr_assert_not_null(strstr(strata_last_error(), bad[i]), "%s",
                                   strata_last_error());
        }
}

/*
 * Under bf16-mixed and 16-mixed every product runs on rounded operands (the module declares
 * lp_fixed for its largest): the output and the gradients stay near fp32's, and differ from
 * them (the mixed GEMM ran).
 */
Test(attention, mixed_precision_products)
{
        static const enum strata_dtype types[] = { STRATA_BF16, STRATA_F16 };
        static float y32[MODCALL_MAX], dx32[MODCALL_MAX], g32[MODCALL_MAX];
        struct strata_module desc = { .ops = &strata_mha, .heads = 2, .causal = 1 };
        struct strata_dims in = { 6, 1, { 8 } };
        struct modcall *m = &(struct modcall){ 0 };
        static double ref[MODCALL_MAX];
        int n = ROWS * 48;

        modcall_init(m, &desc, in, ROWS);
        cr_assert_gt(m->s.lp_fixed, 0);
        modcall_wave(x, n, 0.71, 0.3);
        modcall_wave(dy, n, 1.3, 0.0);
        desc.ops->forward(&m->l, &m->c, x, y32, ROWS);
        desc.ops->backward(&m->l, &m->c, x, y32, dy, dx32, ROWS);
        memcpy(g32, m->grad, m->s.params * sizeof(float));
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
                size_t dim = 3 * 8 + 6 * 8, bytes;
                void *scratch;

                bytes = m->c.k->gemm_lp_bytes(types[k], m->s.lp_fixed, dim);
                cr_assert_eq(m->c.k->prepare_lp(types[k]), STRATA_OK, "%s", strata_last_error());
                cr_assert_not_null(scratch = aligned_alloc(64, (bytes + 63) / 64 * 64));
                m->c.compute = types[k];
                m->c.lp_scratch = scratch;
                m->c.lp_elems = m->s.lp_fixed;
                m->c.lp_dim = dim;
                desc.ops->forward(&m->l, &m->c, x, y, ROWS);
                desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
                cr_assert_neq(memcmp(y, y32, (size_t)n * sizeof(float)), 0, "fp32's bits");
                for (int i = 0; i < n; i++)
                        ref[i] = y32[i];
                cr_assert_leq(modcall_rel_diff(y, ref, n), 2e-2, "y %g",
                              modcall_rel_diff(y, ref, n));
                for (int i = 0; i < n; i++)
                        ref[i] = dx32[i];
                cr_assert_leq(modcall_rel_diff(dx, ref, n), 5e-2, "dx %g",
                              modcall_rel_diff(dx, ref, n));
                for (size_t i = 0; i < m->s.params; i++)
                        ref[i] = g32[i];
                cr_assert_leq(modcall_rel_diff(m->grad, ref, (int)m->s.params), 5e-2,
                              "dparam %g", modcall_rel_diff(m->grad, ref, (int)m->s.params));
                m->c.compute = STRATA_F32;
                m->c.lp_scratch = NULL;
                free(scratch);
        }
}
