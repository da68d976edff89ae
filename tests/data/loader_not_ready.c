/*
 * A loader that cannot give an epoch says so: never initialised or never reset, its next
 * batch is an error with a message (not 0 batches); a reset that fails leaves the loader as
 * it was; a reset to no indices is an empty epoch, not an error.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

Test(loader_not_ready, never_initialised_is_an_error)
{
        struct strata_loader l;
        struct strata_batch b = { .rows = 5 };
        uint32_t idx[1] = { 0 };

        memset(&l, 0, sizeof(l));
        cr_assert_eq(strata_loader_next(&l, &b), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "never initialised (strata_loader_init)"),
                           "%s", strata_last_error());
        cr_assert_eq(b.rows, 0, "the batch is emptied, so that a step refuses it");
        cr_assert_eq(strata_loader_next_indexed(&l, &b), STRATA_EBADSTATE);
        cr_assert_eq(strata_loader_reset(&l, idx, 1), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "never initialised"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_loader_next(NULL, &b), STRATA_EINVAL);
        cr_assert_eq(strata_loader_next(&l, NULL), STRATA_EINVAL);
}

Test(loader_not_ready, never_reset_is_an_error_and_a_step_refuses_its_batch)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_loader_next(&r.loader, &b), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "never reset: strata_loader_reset()"),
                           "%s", strata_last_error());
        cr_assert_eq(strata_loader_next_indexed(&r.loader, &b), STRATA_EBADSTATE);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL, "an emptied batch");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(strata_loader_reset(&r.loader, NULL, 0), STRATA_OK);
        cr_assert_eq(strata_loader_next(&r.loader, &b), 0, "an empty epoch: no batch, no error");
}

Test(loader_not_ready, a_failed_reset_changes_nothing)
{
        uint32_t bad[2] = { 1, 999 };
        struct strata_batch b;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_loader_reset(&r.loader, r.idx, 256), STRATA_OK);
        cr_assert_eq(strata_loader_next(&r.loader, &b), 1);
        cr_assert_eq(strata_loader_reset(&r.loader, bad, 2), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "index 999 (entry 1)"), "%s",
                           strata_last_error());
        cr_assert_eq(r.loader.indices, r.idx, "the loader keeps its epoch");
        cr_assert_eq(r.loader.pos, RIG_BATCH);
        cr_assert_eq(strata_loader_next(&r.loader, &b), 1, "and goes on");
}
