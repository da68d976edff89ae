/* Standardisation: the loader's scale and shift come from the pixels' mean and deviation. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

static _Alignas(4096) unsigned char mem[1 << 16];
static uint8_t px[4099], lab[1];

static struct strata_loader standardized(uint32_t n, uint32_t dim)
{
        struct strata_dataset ds = { .images = px, .labels = lab, .n = n, .dim = dim,
                                     .classes = 10 };
        struct strata_loader l;
        struct strata_arena a;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_loader_init(&l, &a, &ds, 1, 0), STRATA_OK, "%s", strata_last_error());
        strata_loader_standardize(&l, &ds);
        return l;
}

/* Half the pixels 0, half 255: mean 127.5, deviation 127.5, so x = byte / 127.5 - 1. */
Test(standardize, two_values)
{
        struct strata_loader l;

        for (int i = 0; i < 4096; i++)
                px[i] = i % 2 ? 255 : 0;
        l = standardized(1, 4096);
        cr_assert_float_eq(l.scale, 1.0f / 127.5f, 1e-9f);
        cr_assert_float_eq(l.shift, -1.0f, 1e-7f);
        cr_assert_float_eq(0 * l.scale + l.shift, -1.0f, 1e-6f);
        cr_assert_float_eq(255 * l.scale + l.shift, 1.0f, 1e-6f);
}

/* Values 0..255 once each, over a count that is not a multiple of four (3 rows of 341 and a
 * trailing 3): checked against the formula, summed here without the library. */
Test(standardize, every_value_and_a_ragged_tail)
{
        double s = 0.0, s2 = 0.0, mean, sd;
        struct strata_loader l;
        uint32_t n = 1023;

        for (uint32_t i = 0; i < n; i++) {
                px[i] = (uint8_t)((i * 7u) % 256u);
                s += px[i];
                s2 += (double)px[i] * px[i];
        }
        mean = s / n;
        sd = sqrt(s2 / n - mean * mean);
        l = standardized(3, 341);
        cr_assert_float_eq(l.scale, (float)(1.0 / sd), 1e-9f);
        cr_assert_float_eq(l.shift, (float)(-mean / sd), 1e-6f);
}

/* Every pixel equal: no spread, so the deviation is taken as 1 (the data is only centred). */
Test(standardize, constant_pixels_only_centred)
{
        struct strata_loader l;

        memset(px, 42, 12);
        l = standardized(3, 4);
        cr_assert_eq(l.scale, 1.0f);
        cr_assert_eq(l.shift, -42.0f);
}
