/* Status codes: negative, unique, named, described; propagation macros keep the first error. */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"

Test(status_codes, values_names_and_texts)
{
        static const int codes[] = {
#define X(name, value, text) name,
                STRATA_STATUS_LIST(X)
#undef X
        };
        size_t n = sizeof(codes) / sizeof(codes[0]);

        cr_assert_eq(STRATA_OK, 0);
        for (size_t i = 0; i < n; i++) {
                if (codes[i] != STRATA_OK)
                        cr_assert_lt(codes[i], 0);
                for (size_t j = i + 1; j < n; j++)
                        cr_assert_neq(codes[i], codes[j]);
                cr_assert_neq(strcmp(strata_strerror(codes[i]), "unknown status"), 0);
                cr_assert_eq(strncmp(strata_status_name(codes[i]), "STRATA_", 7), 0);
        }
        cr_assert_str_eq(strata_status_name(STRATA_EBADSTATE), "STRATA_EBADSTATE");
        cr_assert_str_eq(strata_strerror(12345), "unknown status");
        cr_assert_str_eq(strata_status_name(12345), "STRATA_EUNKNOWN");
}

static int calls;
static int step(int rc)
{
        calls++;
        return rc;
}

static int try_chain(void)
{
        STRATA_TRY(step(STRATA_OK));
        STRATA_TRY(step(STRATA_EIO));
        STRATA_TRY(step(STRATA_OK));
        return STRATA_OK;
}

static int cleanup_chain(void)
{
        int rc = STRATA_OK;

        STRATA_TRY_GOTO(rc, step(STRATA_EFORMAT), out);
        step(STRATA_OK);
out:
        STRATA_KEEP_FIRST(rc, step(STRATA_EIO));
        STRATA_KEEP_FIRST(rc, step(STRATA_OK));
        return rc;
}

Test(status_codes, propagation_keeps_first_error)
{
        calls = 0;
        cr_assert_eq(try_chain(), STRATA_EIO);
        cr_assert_eq(calls, 2);
        calls = 0;
        cr_assert_eq(cleanup_chain(), STRATA_EFORMAT);
        cr_assert_eq(calls, 3);
        cr_assert_eq(strata_version(), STRATA_VERSION_HEX);
}
