/* Test pool helper. */
#include <criterion/criterion.h>

#include "tests/support/pool.h"

void pool_start(struct pool *p, int n, double timeout_s)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        size_t wb, cb;

        wc.devices = n;
        wc.timeout_s = timeout_s;
        p->n = n;
        cr_assert_eq(strata__workers_plan(&wc, &wb), STRATA_OK);
        cr_assert_eq(strata_comm_plan(n, &cb), STRATA_OK);
        cr_assert_eq(strata_arena_map(&p->arena, wb + 2 * cb + STRATA_KIB(64), NULL), STRATA_OK);
        cr_assert_eq(strata_arena_map(&p->scratch, STRATA_MIB(320), NULL), STRATA_OK);
        cr_assert_eq(strata__workers_start(&p->w, &p->arena, &wc), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata__comm_init_workers(&p->c, &p->arena, p->w, NULL), STRATA_OK, "%s",
                     strata_last_error());
}

void pool_stop(struct pool *p)
{
        cr_assert_eq(strata__workers_stop(p->w), STRATA_OK);
        cr_assert_eq(strata_arena_release(&p->arena), STRATA_OK);
        cr_assert_eq(strata_arena_release(&p->scratch), STRATA_OK);
}

void pool_reset(struct pool *p)
{
        cr_assert_eq(strata_arena_reset(&p->scratch), STRATA_OK);
}

void *pool_alloc(struct pool *p, size_t bytes)
{
        void *q;

        cr_assert_eq(strata_arena_alloc(&p->scratch, bytes, 64, &q), STRATA_OK);
        return q;
}
