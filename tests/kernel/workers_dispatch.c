/* Every command runs once on every device, device 0 on the caller's thread, workers pinned. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "tests/support/pool.h"

struct count {
        atomic_int ran[64];
        pthread_t caller;
        int on_caller;
        int cpu[64];
        struct pool *p;
};

static int tick(int dev, void *arg)
{
        struct count *c = arg;

        atomic_fetch_add(&c->ran[dev], 1);
        if (dev == 0)
                c->on_caller = pthread_equal(pthread_self(), c->caller);
        c->cpu[dev] = sched_getcpu();
        return STRATA_OK;
}

Test(workers_dispatch, every_device_once_per_command)
{
        static struct count c;
        struct pool p;

        for (int n = 1; n <= 4; n++) {
                pool_start(&p, n, 0);
                memset(&c, 0, sizeof(c));
                c.caller = pthread_self();
                for (int i = 0; i < 500; i++)
                        cr_assert_eq(strata__workers_run(p.w, tick, &c), STRATA_OK);
                for (int d = 0; d < n; d++)
                        cr_assert_eq(atomic_load(&c.ran[d]), 500, "n=%d device %d ran %d", n, d,
                                     atomic_load(&c.ran[d]));
                cr_assert(c.on_caller, "device 0 runs on the caller's thread");
                for (int d = 0; d < n; d++) {
                        const struct strata__placement *pl = strata__workers_placement(p.w, d);

                        cr_assert_not_null(pl);
                        if (!pl->shared)
                                cr_assert_eq(c.cpu[d], pl->pu, "device %d on cpu %d, bound to %d",
                                             d, c.cpu[d], pl->pu);
                }
                pool_stop(&p);
        }
}

Test(workers_dispatch, bad_configuration)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata__workers *w = NULL;
        struct strata_arena a;
        static _Alignas(4096) unsigned char mem[1 << 16];
        size_t b;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        wc.devices = 0;
        cr_assert_eq(strata__workers_plan(&wc, &b), STRATA_EINVAL);
        wc.devices = 65;
        cr_assert_eq(strata__workers_start(&w, &a, &wc), STRATA_EINVAL);
        wc.devices = 2;
        wc.stack_bytes = 100;
        cr_assert_eq(strata__workers_start(&w, &a, &wc), STRATA_EINVAL);
        wc.stack_bytes = 0;
        cr_assert_eq(strata__workers_start(&w, &a, &wc), STRATA_ENOMEM, "arena of 64 KiB");
        cr_assert_null(w);
        cr_assert_eq(strata__workers_run(NULL, tick, NULL), STRATA_EINVAL);
}
