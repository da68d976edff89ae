/*
 * Issue 58, item 2 (decision 0059): an epoch trains every sample, its last batch partial; a
 * set smaller than the batch trains; --drop-last skips the partial batch, as before.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"

static char out[1 << 16], again[1 << 16];

/* The "final:" line's test loss and accuracy of @p s, or "" when none. */
static void final_line(const char *s, char *line, size_t n)
{
        const char *p = strstr(s, "final: "), *end = p ? strstr(p, "  time") : NULL;

        line[0] = '\0';
        if (p && end)
                snprintf(line, n, "%.*s", (int)(end - p), p);
}

Test(strata_train_partial_batch, the_last_partial_batch_trains, .timeout = 120)
{
        cr_assert_eq(cli_run(BIN, "--synthetic 1000 --batch 128 --epochs 1 --devices 2", out,
                             sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "1000 train / "), "%s", out);
        cr_assert_not_null(strstr(out, "8 steps/epoch"), "7 whole batches and 104 rows: %s",
                           out);
        cr_assert_eq(cli_run(BIN, "--synthetic 1000 --batch 128 --epochs 1 --devices 2 "
                                  "--drop-last", again, sizeof(again)), 0, "%s", again);
        cr_assert_not_null(strstr(again, "7 steps/epoch"), "%s", again);
}

/* The partial batch changes what is learned: with and without it the runs differ. */
Test(strata_train_partial_batch, drop_last_is_another_run, .timeout = 120)
{
        char a[256], b[256];

        cr_assert_eq(cli_run(BIN, "--synthetic 1000 --epochs 2 --strategy ddp --devices 2 "
                                  "", out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic 1000 --epochs 2 --strategy ddp --devices 2 "
                                  "--drop-last", again, sizeof(again)), 0, "%s", again);
        final_line(out, a, sizeof(a));
        final_line(again, b, sizeof(b));
        cr_assert_neq(a[0], '\0', "%s", out);
        cr_assert_str_neq(a, b, "the partial batch did not train: %s", a);
}

Test(strata_train_partial_batch, a_set_smaller_than_the_batch, .timeout = 120)
{
        cr_assert_eq(cli_run(BIN, "--synthetic 100 --batch 128 --epochs 1", out, sizeof(out)),
                     0, "%s", out);
        cr_assert_not_null(strstr(out, "1 steps/epoch"), "%s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic 100 --batch 128 --epochs 1 --drop-last", out,
                             sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "--batch 128 is larger than the 100 training samples "
                                       "and --drop-last drops them all"), "%s", out);
}
