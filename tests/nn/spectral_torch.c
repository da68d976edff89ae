/*
 * SpectralConv1d, 2d and 3d against PyTorch: the reference FNO's modules written with
 * torch.fft in float64 (tests/tools/spectral_torch.py) from Strata's initial weights, on the
 * same inputs. Strata's output and its weights after three SGD steps (lr 0.5 on
 * 0.5 sum (y - t)^2, Strata in float32) within 1e-5 of the largest magnitude; odd and even
 * extents, the most modes each allows and fewer.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/modcall.h"

#define ROWS 3

static float x[MODCALL_MAX], y[MODCALL_MAX], t[MODCALL_MAX], dy[MODCALL_MAX];
static float dx[MODCALL_MAX], w0[MODCALL_MAX];

struct torch_case {
        int nd, cin, cout, n[3], m[3];
};

static const struct strata_module_ops *const ops_of[3] = {
        &strata_spectralconv1d, &strata_spectralconv2d, &strata_spectralconv3d
};

static void put(FILE *f, const void *v, size_t bytes)
{
        cr_assert_eq(fwrite(v, 1, bytes, f), bytes);
}

/* One case into @p f: geometry, x, the initial weights, targets, y, the weights after 3 steps. */
static void one_case(FILE *f, const struct torch_case *c)
{
        struct strata_module desc = { .ops = ops_of[c->nd - 1], .out = c->cout,
                                      .modes = { c->m[0], c->m[1], c->m[2] } };
        struct strata_dims in = { c->cin, c->nd, { c->n[0], c->n[1], c->n[2] } };
        struct modcall *m = &(struct modcall){ 0 };
        int head[10] = { c->nd, c->cin, c->cout, c->n[0], c->n[1], c->n[2], c->m[0], c->m[1],
                         c->m[2], ROWS };
        float lr = 0.5f;
        int nin, nout;
        size_t np;

        modcall_init(m, &desc, in, ROWS);
        nin = ROWS * m->l.in;
        nout = ROWS * m->l.out;
        np = m->l.nparam;
        modcall_wave(x, nin, 0.31, 0.4);
        for (int i = 0; i < nout; i++)
                t[i] = (float)sin(0.23 * i + 0.1);
        memcpy(w0, m->param, np * sizeof(float));
        put(f, head, sizeof(head));
        put(f, &lr, sizeof(lr));
        put(f, x, (size_t)nin * sizeof(float));
        put(f, w0, np * sizeof(float));
        put(f, t, (size_t)nout * sizeof(float));
        m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
        put(f, y, (size_t)nout * sizeof(float));
        for (int s = 0; s < 3; s++) {
                if (s > 0)
                        m->desc.ops->forward(&m->l, &m->c, x, y, ROWS);
                for (int i = 0; i < nout; i++)
                        dy[i] = y[i] - t[i];
                m->l.grad_fresh = 1;
                m->desc.ops->backward(&m->l, &m->c, x, y, dy, dx, ROWS);
                for (size_t i = 0; i < np; i++)
                        m->param[i] -= lr * m->grad[i];
        }
        put(f, m->param, np * sizeof(float));
}

Test(spectral_torch, forward_and_three_sgd_steps, .timeout = 120)
{
        static const struct torch_case cases[] = {
                { 1, 2, 3, { 16 }, { 5 } }, { 1, 3, 2, { 16 }, { 9 } }, { 1, 2, 2, { 15 }, { 8 } },
                { 2, 2, 3, { 8, 6 }, { 2, 3 } }, { 2, 2, 2, { 7, 8 }, { 3, 5 } },
                { 2, 1, 2, { 6, 5 }, { 1, 3 } },
                { 3, 2, 2, { 4, 6, 8 }, { 2, 3, 5 } }, { 3, 1, 2, { 5, 4, 7 }, { 2, 1, 3 } },
                { 3, 2, 1, { 6, 4, 6 }, { 1, 2, 2 } },
        };
        char path[64], cmd[512], line[256];
        int ok = 0;
        FILE *f, *py;

        snprintf(path, sizeof(path), "/tmp/strata-spectral-%d.bin", (int)getpid());
        f = fopen(path, "wb");
        cr_assert_not_null(f, "%s", path);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                one_case(f, &cases[i]);
        cr_assert_eq(fclose(f), 0);
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/spectral_torch.py %s 2>&1",
                 STRATA_SOURCE_DIR, path);
        py = popen(cmd, "r");
        cr_assert_not_null(py);
        while (fgets(line, sizeof(line), py)) {
                cr_log_info("%s", line);
                ok |= strncmp(line, "match", 5) == 0;
        }
        cr_assert_eq(pclose(py), 0, "PyTorch's values differ (see the log)");
        cr_assert(ok);
        remove(path);
}
