/*
 * SpectralConv1d and SpectralConv2d refuse what the reference FNO could not compute, with the
 * value at fault named: more modes than the extent has frequencies (1-D: W / 2 + 1; 2-D:
 * modes2 past W / 2 + 1, modes1 past H / 2, where the low and the high rows would overlap),
 * modes of 0 or below, no out channels, an input of another dimension count or a flat one, an
 * extent with a prime factor above 31 or past 65536 (FFTW would allocate as it runs).
 * The model line reads spectralconv1d(out, modes) and spectralconv2d(out, modes1, modes2),
 * positional or by name, and refuses missing or non-positive modes, the model unchanged.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/modcall.h"

static void refused(const struct strata_module_ops *ops, int out, int m1, int m2,
                    struct strata_dims in, int status, const char *needle)
{
        struct strata_module desc = { .ops = ops, .out = out, .modes = { m1, m2 } };
        struct modcall *m = &(struct modcall){ 0 };

        cr_assert_eq(modcall_shape(m, &desc, in), status, "%s: %s", needle,
                     strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), needle), "want '%s' in: %s", needle,
                           strata_last_error());
}

static void accepted(const struct strata_module_ops *ops, int m1, int m2, struct strata_dims in)
{
        struct strata_module desc = { .ops = ops, .out = 2, .modes = { m1, m2 } };
        struct modcall *m = &(struct modcall){ 0 };

        cr_assert_eq(modcall_shape(m, &desc, in), STRATA_OK, "%s", strata_last_error());
}

Test(spectral_bad_input, modes_past_the_frequencies)
{
        struct strata_dims w16 = { 2, 1, { 16 } }, w15 = { 2, 1, { 15 } };
        struct strata_dims hw = { 2, 2, { 8, 6 } }, hw7 = { 1, 2, { 7, 9 } };

        accepted(&strata_spectralconv1d, 9, 0, w16);
        refused(&strata_spectralconv1d, 2, 10, 0, w16, STRATA_EINVAL, "modes 10");
        refused(&strata_spectralconv1d, 2, 10, 0, w16, STRATA_EINVAL, "modes 1 to 9");
        accepted(&strata_spectralconv1d, 8, 0, w15);
        refused(&strata_spectralconv1d, 2, 9, 0, w15, STRATA_EINVAL, "modes 9: 15 points");
        refused(&strata_spectralconv1d, 2, 0, 0, w16, STRATA_EINVAL, "modes 0");
        refused(&strata_spectralconv1d, 2, -3, 0, w16, STRATA_EINVAL, "modes -3");
        accepted(&strata_spectralconv2d, 4, 4, hw);
        refused(&strata_spectralconv2d, 2, 5, 4, hw, STRATA_EINVAL, "modes1 5");
        refused(&strata_spectralconv2d, 2, 4, 5, hw, STRATA_EINVAL, "modes2 5");
        accepted(&strata_spectralconv2d, 3, 5, hw7);
        refused(&strata_spectralconv2d, 2, 4, 5, hw7, STRATA_EINVAL, "modes1 4");
        refused(&strata_spectralconv2d, 2, 3, 6, hw7, STRATA_EINVAL, "modes2 6: 9 columns");
        refused(&strata_spectralconv2d, 2, 0, 2, hw, STRATA_EINVAL, "modes1 0");
        /* modes2 0 takes modes1's value, as every per-dimension argument */
        accepted(&strata_spectralconv2d, 3, 0, hw);
        refused(&strata_spectralconv2d, 2, 4, -1, hw, STRATA_EINVAL, "modes2 -1");
}

/* Extents FFTW would transform with buffers it allocates as it runs (a prime factor > 31). */
Test(spectral_bad_input, extents_with_a_large_prime_factor)
{
        accepted(&strata_spectralconv1d, 3, 0, (struct strata_dims){ 1, 1, { 62 } });
        refused(&strata_spectralconv1d, 2, 3, 0, (struct strata_dims){ 1, 1, { 37 } },
                STRATA_EINVAL, "W 37: extents up to 65536 whose prime factors are at most 31");
        refused(&strata_spectralconv2d, 2, 3, 3, (struct strata_dims){ 1, 2, { 74, 8 } },
                STRATA_EINVAL, "H 74");
        refused(&strata_spectralconv2d, 2, 3, 3, (struct strata_dims){ 1, 2, { 8, 82 } },
                STRATA_EINVAL, "W 82");
        refused(&strata_spectralconv1d, 2, 3, 0, (struct strata_dims){ 1, 1, { 65537 * 2 } },
                STRATA_EINVAL, "W 131074");
}

Test(spectral_bad_input, channels_and_layouts)
{
        struct strata_dims w16 = { 2, 1, { 16 } }, hw = { 2, 2, { 8, 6 } };
        struct strata_dims flat = { 0, 0, { 0 } }, d3 = { 1, 3, { 4, 4, 4 } };

        refused(&strata_spectralconv1d, 0, 3, 0, w16, STRATA_EINVAL, "out channels 0");
        refused(&strata_spectralconv2d, -2, 3, 3, hw, STRATA_EINVAL, "out channels -2");
        refused(&strata_spectralconv1d, 2, 3, 0, hw, STRATA_EINVAL, "2 channels of 8 x 6");
        refused(&strata_spectralconv2d, 2, 2, 2, w16, STRATA_EINVAL, "2 channels of 16");
        refused(&strata_spectralconv2d, 2, 2, 2, d3, STRATA_EINVAL, "1 channels of 4 x 4 x 4");
        refused(&strata_spectralconv1d, 2, 2, 0, flat, STRATA_EINVAL, "a flat vector");
        refused(&strata_spectralconv1d, 1 << 20, 9, 0, (struct strata_dims){ 1 << 20, 1, { 16 } },
                STRATA_EOVERFLOW, "1048576 to 1048576 channels of 16 points with 9 modes");
}

Test(spectral_bad_input, the_model_line)
{
        struct strata_module mods[4];
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse("input(2,16) spectralconv1d(4,5) gelu", mods, 4, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(m.nmodules, 2);
        cr_assert_eq(mods[0].ops, &strata_spectralconv1d);
        cr_assert_eq(mods[0].out, 4);
        cr_assert_eq(mods[0].modes[0], 5);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK);
        cr_assert(out.channels == 4 && out.ndim == 1 && out.size[0] == 16);
        cr_assert_eq(strata_model_parse("input(1,8,6) spectralconv2d(3,2,4) "
                                        "spectralconv2d(2,modes2=1,modes1=3)", mods, 4, &m),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert(mods[0].modes[0] == 2 && mods[0].modes[1] == 4 && mods[0].out == 3);
        cr_assert(mods[1].modes[0] == 3 && mods[1].modes[1] == 1 && mods[1].out == 2);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK);
        cr_assert(out.channels == 2 && out.ndim == 2 && out.size[0] == 8 && out.size[1] == 6);
        /* the shape walk names the module and the value */
        cr_assert_eq(strata_model_parse("input(1,8,6) spectralconv2d(3,5,2)", mods, 4, &m),
                     STRATA_OK);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "modes1 5"), "%s", strata_last_error());

        static const struct {
                const char *line, *needle;
        } bad[] = {
                { "input(2,16) spectralconv1d(4)", "its modes are missing" },
                { "input(2,16) spectralconv1d(4,0)", "modes '0' is not a positive count" },
                { "input(2,16) spectralconv1d(4,x)", "modes 'x'" },
                { "input(2,8,8) spectralconv2d(4,3)", "modes1 and modes2 are missing" },
                { "input(2,8,8) spectralconv2d(4,3,-1)", "modes2 '-1'" },
                { "input(2,8,8) spectralconv2d(4,modes=3,modes2=2)", "no argument 'modes'" },
                { "input(2,8,8) spectralconv2d(4,3,2,1)", "too many arguments" },
                { "input(2,16) spectralconv1d(4,3,kernel=3)", "no argument 'kernel'" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct strata_model before;

                m = (struct strata_model){ .nmodules = 7 };
                before = m;
                cr_assert_eq(strata_model_parse(bad[i].line, mods, 4, &m), STRATA_EINVAL,
                             "%s", bad[i].line);
                cr_assert_not_null(strstr(strata_last_error(), bad[i].needle), "%s: %s",
                                   bad[i].line, strata_last_error());
                cr_assert_eq(memcmp(&m, &before, sizeof(m)), 0, "%s: model changed",
                             bad[i].line);
        }
}

/* The guide's FNO-2D (a lift, four blocks, a projection) is a line that fits its input. */
Test(spectral_bad_input, the_guides_fno2d)
{
        static const char line[] =
                "input(3,64,64) conv2d(32,1) "
                "spectralconv2d(32,12,12) conv2d(32,1,from=0) add(from=1) gelu "
                "spectralconv2d(32,12,12) conv2d(32,1,from=4) add(from=5) gelu "
                "spectralconv2d(32,12,12) conv2d(32,1,from=8) add(from=9) gelu "
                "spectralconv2d(32,12,12) conv2d(32,1,from=12) add(from=13) "
                "conv2d(128,1) gelu conv2d(1,1)";
        struct strata_module mods[24];
        struct strata_model m = { 0 };
        struct strata_dims out;

        cr_assert_eq(strata_model_parse(line, mods, 24, &m), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(m.nmodules, 19);
        cr_assert_eq(strata_model_output(&m, &out), STRATA_OK, "%s", strata_last_error());
        cr_assert(out.channels == 1 && out.ndim == 2 && out.size[0] == 64 && out.size[1] == 64);
        for (int s = 1; s < 16; s += 4)
                cr_assert(mods[s].ops == &strata_spectralconv2d && mods[s + 1].from == s - 1 &&
                          mods[s + 1].branch && mods[s + 2].from == s, "block at %d", s);
}
