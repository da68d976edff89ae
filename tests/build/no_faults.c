/*
 * Failure injection, and the tests' other hooks (forcing bf16:fma), are compiled out of
 * production builds: libstrata.a and libstrata.so define and reference no symbol of them,
 * while the test suite's archive, built from the same sources with STRATA_TESTING, holds them
 * (so the check below looks for names that do exist there).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = { "strata__inject_failure", "strata__inject_nonfinite_grad",
                                     "strata__comm_inject", "strata__fault",
                                     "strata__fault_nonfinite", "strata__faults_take",
                                     "strata__cpu_lp_force_fma", "strata__cpu_lp_force_amx" };
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* Which of names[] `nm` lists (defined or undefined) for @p file, as a bit mask. */
static unsigned found(const char *file, const char *opts)
{
        char cmd[1024], name[256];
        unsigned mask = 0;
        int symbols = 0;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "nm %s %s | awk '{print $NF}'", opts, file);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        while (fscanf(p, "%255s", name) == 1) {
                symbols++;
                for (unsigned i = 0; i < NNAMES; i++)
                        if (!strcmp(name, names[i]))
                                mask |= 1u << i;
        }
        cr_assert_eq(pclose(p), 0, "%s", cmd);
        cr_assert_gt(symbols, 100, "nm listed too few symbols of %s to be credible", file);
        return mask;
}

Test(no_faults, production_archive_and_shared_library_hold_no_injection)
{
        cr_expect_eq(found(STRATA_BUILD_DIR "/libstrata.a", ""), 0u,
                     "libstrata.a holds failure injection");
        cr_expect_eq(found(STRATA_BUILD_DIR "/libstrata.so", "-D"), 0u,
                     "libstrata.so holds failure injection");
}

Test(no_faults, the_test_archive_holds_it)
{
        cr_expect_eq(found(STRATA_BUILD_DIR "/libstrata-testing.a", ""), (1u << NNAMES) - 1,
                     "libstrata-testing.a lacks some of the injection symbols");
}
