/*
 * The loader and index batches cannot read outside their data set: an index list with an
 * index past the set is refused at reset (the loader, never reset, then yields an error), NULL
 * objects are refused without a crash, and a hand-made index batch must say how many images
 * it indexes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

Test(loader_bad_input, index_past_the_set_is_refused_at_reset)
{
        struct strata_batch b;
        struct rig r;
        uint32_t idx[RIG_BATCH] = { 0, 1, 256, 2 }; /* the rig has 256 samples */

        rig_init(&r, 0);
        cr_assert_eq(strata_loader_reset(&r.loader, idx, RIG_BATCH), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "index 256 (entry 2)"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_loader_next(&r.loader, &b), STRATA_EBADSTATE,
                     "a refused list yields no batch: the loader has no epoch");
        cr_assert_eq(strata_loader_next_indexed(&r.loader, &b), STRATA_EBADSTATE);
        idx[2] = 255;
        cr_assert_eq(strata_loader_reset(&r.loader, idx, RIG_BATCH), STRATA_OK);
        cr_assert_eq(strata_loader_next_indexed(&r.loader, &b), 1);
        cr_assert_eq(b.nimages, 256, "an indexed batch carries its image count");
}

Test(loader_bad_input, null_objects_are_refused_without_a_crash)
{
        struct strata_batch b;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_loader_reset(NULL, r.idx, 4), STRATA_EINVAL);
        cr_assert_eq(strata_loader_reset(&r.loader, NULL, 4), STRATA_EINVAL);
        cr_assert_eq(strata_loader_next(NULL, &b), STRATA_EINVAL);
        cr_assert_eq(strata_loader_next(&r.loader, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_loader_next_indexed(NULL, &b), STRATA_EINVAL);
}

/* A step refuses an index batch whose rows point past the images it carries. */
Test(loader_bad_input, step_refuses_rows_outside_the_image_set)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_loader_reset(&r.loader, r.idx, 256), STRATA_OK);
        cr_assert_eq(strata_loader_next_indexed(&r.loader, &b), 1);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        b.nimages = 100; /* rows index images up to 255 */
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "indexes image"), "%s",
                           strata_last_error());
        b.nimages = 0; /* a batch built without the count */
        cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY, "a refused batch changes nothing");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
