/*
 * LayerNorm(C) over each position of a (C, P) sample, where the model line writes it between
 * two transposes: `tokens layernorm(dims=1) tokens` (the graph family's LayerNorm over each
 * node's or edge's features, decision 0090). The replica's pass runs the three modules as this
 * one when nothing else reads the two inner outputs (nn/replica_pass.c); the transposes are
 * skipped and the LayerNorm reads and writes the (C, P) layout itself.
 *
 * The same bits as the three modules: a position p's group is the sequence's token p, its
 * features c = 0..C-1 in order, and every sum, mean, 1/std, output, parameter-gradient sum and
 * input gradient is nn/norm.c's expression for that group, evaluated in the same order (groups
 * r P + p ascending for the parameter gradients, each rounded once). LANES positions sit side
 * by side, one a SIMD lane, each lane one group's arithmetic; the positions of a row past the
 * last whole block of LANES run one at a time. aux keeps each group's mean and 1/std as two
 * doubles (four floats), as nn/norm.c's LayerNorm does.
 */
#include <math.h>
#include <string.h>

#include "strata/nn.h"
#include "base/base.h"
#include "arch/simd.h"
#include "nn/norm_tokens.h"

#define LANES 8
#define GROUP_AUX 4 /* floats per group in aux: mean and 1/std, doubles */

typedef double lanes_d __attribute__((vector_size(8 * LANES)));
typedef float lanes_f __attribute__((vector_size(4 * LANES)));

int strata__ln_tokens_fits(const struct strata_layer *ln, int channels)
{
        const struct strata_dims *d = &ln->in_dims;

        return ln->desc->ops == &strata_layernorm && ln->desc->norm_dims == 1 &&
               d->ndim == 1 && d->size[0] == channels && channels <= STRATA__LN_TOKENS_MAX &&
               channels > 0 && ln->in % channels == 0;
}

static double eps_of(const struct strata_layer *l)
{
        return l->desc->eps > 0.0f ? (double)l->desc->eps : 1e-5;
}

/* LANES floats at @p x, unaligned, as doubles; LANES floats stored to @p y from doubles. */
typedef float lanes_fu __attribute__((vector_size(4 * LANES), aligned(4), may_alias));
#define LOAD(x) __builtin_convertvector(*(const lanes_fu *)(const void *)(x), lanes_d)
#define STORE(y, v) (*(lanes_fu *)(void *)(y) = __builtin_convertvector((v), lanes_f))

/* LANES positions from @p x (channels @p p apart) normalised into @p y; stats to @p aux. */
STRATA_SIMD static void fwd_lanes(const float *restrict x, float *restrict y,
                                  float *restrict aux, const float *restrict w,
                                  const float *restrict b, int f, size_t p, double eps)
{
        lanes_d sum = { 0 }, sq = { 0 }, m, rs;
        double s[LANES][2];

        for (int c = 0; c < f; c++)
                sum += LOAD(x + c * p);
        m = sum / f;
        for (int c = 0; c < f; c++)
                sq += (LOAD(x + c * p) - m) * (LOAD(x + c * p) - m);
        for (int k = 0; k < LANES; k++) {
                rs[k] = 1.0 / sqrt(sq[k] / f + eps);
                s[k][0] = m[k];
                s[k][1] = rs[k];
        }
        for (int c = 0; c < f; c++)
                STORE(y + c * p, (LOAD(x + c * p) - m) * rs * w[c] + b[c]);
        memcpy(aux, s, sizeof(s));
}

/* One position of @p x (channels @p p apart) normalised into @p y; stats to @p aux. */
static void fwd_one(const float *x, float *y, float *aux, const float *w, const float *b, int f,
                    size_t p, double eps)
{
        double sum = 0.0, sq = 0.0, m[2];

        for (int c = 0; c < f; c++)
                sum += x[c * p];
        m[0] = sum / f;
        for (int c = 0; c < f; c++)
                sq += (x[c * p] - m[0]) * (x[c * p] - m[0]);
        m[1] = 1.0 / sqrt(sq / f + eps);
        memcpy(aux, m, sizeof(m));
        for (int c = 0; c < f; c++)
                y[c * p] = (float)((x[c * p] - m[0]) * m[1] * w[c] + b[c]);
}

void strata__ln_tokens_forward(struct strata_layer *ln, const float *x, float *y, int rows,
                               int channels)
{
        size_t p = (size_t)(ln->in / channels), n = (size_t)ln->in;
        const float *w = ln->param, *b = ln->param + channels;
        double eps = eps_of(ln);

        for (size_t r = 0; r < (size_t)rows; r++) {
                size_t q = 0;
                float *aux = ln->aux + r * p * GROUP_AUX;

                for (; q + LANES <= p; q += LANES)
                        fwd_lanes(x + r * n + q, y + r * n + q, aux + q * GROUP_AUX, w, b,
                                  channels, p, eps);
                for (; q < p; q++)
                        fwd_one(x + r * n + q, y + r * n + q, aux + q * GROUP_AUX, w, b,
                                channels, p, eps);
        }
}

/*
 * LANES positions' backward: their terms added onto the parameter gradients' sums @p gw, @p gb
 * position after position, and their input gradients.
 */
STRATA_SIMD static void bwd_lanes(const float *restrict x, const float *restrict dy,
                                  float *restrict dx, const float *restrict aux,
                                  const float *restrict w, int f, size_t p, double *restrict gw,
                                  double *restrict gb)
{
        lanes_d tw[STRATA__LN_TOKENS_MAX], tb[STRATA__LN_TOKENS_MAX];
        lanes_d mean, rs, sg = { 0 }, sgx = { 0 };
        double s[LANES][2];

        memcpy(s, aux, sizeof(s));
        for (int k = 0; k < LANES; k++) {
                mean[k] = s[k][0];
                rs[k] = s[k][1];
        }
        for (int c = 0; c < f; c++) {
                lanes_d xv = LOAD(x + c * p), dv = LOAD(dy + c * p), g = dv * w[c];

                tw[c] = dv * ((xv - mean) * rs);
                tb[c] = dv;
                sg += g;
                sgx += g * (xv - mean) * rs;
        }
        for (int c = 0; c < f; c++) { /* a feature's sums over the positions in order */
                double aw = gw[c], ab = gb[c];

                for (int k = 0; k < LANES; k++) {
                        aw += tw[c][k];
                        ab += tb[c][k];
                }
                gw[c] = aw;
                gb[c] = ab;
        }
        for (int c = 0; c < f; c++) {
                lanes_d xv = LOAD(x + c * p), dv = LOAD(dy + c * p);

                STORE(dx + c * p, rs * (dv * w[c] - sg / f - (xv - mean) * rs * sgx / f));
        }
}

/* One position's backward, as bwd_lanes() does for each of its lanes. */
static void bwd_one(const float *x, const float *dy, float *dx, const float *aux,
                    const float *w, int f, size_t p, double *gw, double *gb)
{
        double s[2], sg = 0.0, sgx = 0.0;

        memcpy(s, aux, sizeof(s));
        for (int c = 0; c < f; c++) {
                double g = (double)dy[c * p] * w[c];

                gw[c] += dy[c * p] * ((x[c * p] - s[0]) * s[1]);
                gb[c] += dy[c * p];
                sg += g;
                sgx += g * (x[c * p] - s[0]) * s[1];
        }
        for (int c = 0; c < f; c++)
                dx[c * p] = (float)(s[1] * ((double)dy[c * p] * w[c] - sg / f -
                                            (x[c * p] - s[0]) * s[1] * sgx / f));
}

void strata__ln_tokens_backward(struct strata_layer *ln, const float *x, const float *dy,
                                float *dx, int rows, int channels)
{
        size_t p = (size_t)(ln->in / channels), n = (size_t)ln->in;
        double gw[STRATA__LN_TOKENS_MAX] = { 0 }, gb[STRATA__LN_TOKENS_MAX] = { 0 };
        float *dw = ln->grad, *db = ln->grad + channels;
        const float *w = ln->param;

        for (size_t r = 0; r < (size_t)rows; r++) {
                size_t q = 0, at = r * n;
                const float *aux = ln->aux + r * p * GROUP_AUX;

                for (; q + LANES <= p; q += LANES)
                        bwd_lanes(x + at + q, dy + at + q, dx + at + q, aux + q * GROUP_AUX, w,
                                  channels, p, gw, gb);
                for (; q < p; q++)
                        bwd_one(x + at + q, dy + at + q, dx + at + q, aux + q * GROUP_AUX, w,
                                channels, p, gw, gb);
        }
        for (int c = 0; c < channels; c++) {
                dw[c] = (float)(ln->grad_fresh ? gw[c] : dw[c] + gw[c]);
                db[c] = (float)(ln->grad_fresh ? gb[c] : db[c] + gb[c]);
        }
}
