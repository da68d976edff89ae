/*
 * The heap counter, asked who (STRATA_HEAPCOUNT_WHO): a count above zero names the callers,
 * so a failed no-heap check on a machine the developer cannot reach (a lent GPU) says which
 * library allocated.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/heapcount.h"

/* Exported (not static): the test binary is linked -rdynamic, so dladdr can name it. */
__attribute__((noinline)) void *heapcount_who_planted(size_t n);
__attribute__((noinline)) void *heapcount_who_planted(size_t n)
{
        void *volatile p = malloc(n);

        return p;
}

static void setup(void)
{
        cr_redirect_stderr();
}

Test(heapcount_who, names_the_caller_of_a_counted_call, .init = setup)
{
        long n;
        char buf[8192] = { 0 };

        if (strata_heapcount_stop() < 0)
                cr_skip("heap counting is unavailable in sanitizer builds");
        setenv("STRATA_HEAPCOUNT_WHO", "1", 1);
        strata_heapcount_start();
        free(heapcount_who_planted(24));
        n = strata_heapcount_stop();
        unsetenv("STRATA_HEAPCOUNT_WHO");
        cr_assert_eq(n, 2, "malloc and free: %ld", n);
        fflush(stderr);
        fread(buf, 1, sizeof(buf) - 1, cr_get_redirected_stderr());
        cr_assert(strstr(buf, "heapcount: 2 calls"), "%s", buf);
        cr_assert(strstr(buf, "heapcount_who_planted"), "the planted caller is not named: %s", buf);
}

Test(heapcount_who, silent_without_the_variable, .init = setup)
{
        char buf[256] = { 0 };

        if (strata_heapcount_stop() < 0)
                cr_skip("heap counting is unavailable in sanitizer builds");
        unsetenv("STRATA_HEAPCOUNT_WHO");
        strata_heapcount_start();
        free(heapcount_who_planted(24));
        cr_assert_eq(strata_heapcount_stop(), 2);
        fflush(stderr);
        fread(buf, 1, sizeof(buf) - 1, cr_get_redirected_stderr());
        cr_assert_eq(buf[0], '\0', "printed without being asked: %s", buf);
}
