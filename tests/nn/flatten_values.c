/*
 * Flatten: any layout becomes a flat vector of the same values in the same (C, D, H, W)
 * order, and the gradient passes back unchanged; a flat input stays as it is.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/modcall.h"

Test(flatten, same_values_flat_layout)
{
        static const struct strata_dims layouts[] = {
                { 3, 1, { 5 } }, { 2, 2, { 3, 4 } }, { 2, 3, { 2, 3, 4 } }, { 7, 0, { 0 } },
        };
        static float x[2 * 48], y[2 * 48], dy[2 * 48], dx[2 * 48];

        for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
                struct strata_module desc = { .ops = &strata_flatten };
                struct modcall *m = &(struct modcall){ 0 };
                int n = modcall_count(layouts[i]);

                modcall_init(m, &desc, layouts[i], 2);
                cr_assert_eq(m->s.out, n);
                cr_assert_eq(m->s.out_dims.channels, n);
                cr_assert_eq(m->s.out_dims.ndim, 0);
                cr_assert_eq(m->s.params + m->s.aux_per_row + m->s.aux_fixed, 0);
                cr_assert_eq(m->s.host_loops, 0, "flatten runs through the kernels");
                modcall_wave(x, 2 * n, 0.3, 0.0);
                modcall_wave(dy, 2 * n, 0.7, 1.0);
                desc.ops->forward(&m->l, &m->c, x, y, 2);
                desc.ops->backward(&m->l, &m->c, x, y, dy, dx, 2);
                cr_assert_eq(memcmp(x, y, sizeof(float) * 2 * (size_t)n), 0);
                cr_assert_eq(memcmp(dy, dx, sizeof(float) * 2 * (size_t)n), 0);
        }
}
