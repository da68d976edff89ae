/*
 * Conv1d/2d/3d backward against the adjoint of PyTorch's definition in double: the input,
 * weight and bias gradients of every geometry of the table (padded positions folded back onto
 * the positions their mode read); the parameter gradients are the same bits without dx, and
 * accumulate when the gradients are not fresh.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/conv_ref.h"

static double dx_want[1 << 16], dp_want[1 << 16];
static float dp_first[1 << 16];

/* Case @p cc's layer, a forward and a backward (into @p dx, or none). */
static void run(struct conv_rig *r, const struct conv_case *cc, float *dx)
{
        r->desc.ops->forward(&r->l, &r->c, r->x, r->y, cc->rows);
        r->desc.ops->backward(&r->l, &r->c, r->x, r->y, r->dy, dx, cc->rows);
}

Test(conv_backward, matches_the_adjoint)
{
        for (int i = 0; i < conv_ncases; i++) {
                const struct conv_case *cc = &conv_cases[i];
                struct conv_rig r;
                double err;

                conv_rig_init(&r, cc);
                run(&r, cc, r.dx);
                conv_ref_backward(&r, dx_want, dp_want);
                err = conv_rel_err(r.dx, dx_want, (size_t)cc->rows * r.l.in);
                cr_assert_leq(err, 1e-5, "%s: dx relative error %g", cc->what, err);
                err = conv_rel_err(r.l.grad, dp_want, r.l.nparam);
                cr_assert_leq(err, 1e-5, "%s: dparam relative error %g", cc->what, err);
        }
}

Test(conv_backward, no_dx_same_parameter_gradients_and_accumulation)
{
        for (int i = 0; i < conv_ncases; i++) {
                const struct conv_case *cc = &conv_cases[i];
                struct conv_rig r;
                double err;

                conv_rig_init(&r, cc);
                run(&r, cc, r.dx);
                memcpy(dp_first, r.l.grad, r.l.nparam * sizeof(float));
                run(&r, cc, NULL);
                cr_assert_eq(memcmp(dp_first, r.l.grad, r.l.nparam * sizeof(float)), 0,
                             "%s: parameter gradients differ without dx", cc->what);
                r.l.grad_fresh = 0; /* the second of an accumulation window */
                run(&r, cc, NULL);
                conv_ref_backward(&r, dx_want, dp_want);
                for (size_t k = 0; k < r.l.nparam; k++)
                        dp_want[k] *= 2.0;
                err = conv_rel_err(r.l.grad, dp_want, r.l.nparam);
                cr_assert_leq(err, 2e-5, "%s: accumulated relative error %g", cc->what, err);
        }
}
