/* A failing or silent device releases every other one; the first error comes back in time. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "tests/support/pool.h"

struct plan {
        struct strata__workers *w;
        int fail_dev;
        int fail_rc;
        int skip_barrier_dev;
        int after[64];
};

static int work(int dev, void *arg)
{
        struct plan *p = arg;

        if (dev == p->fail_dev)
                return p->fail_rc;
        if (dev == p->skip_barrier_dev)
                return STRATA_OK;
        p->after[dev] = strata__workers_barrier(p->w, dev);
        return p->after[dev] == STRATA_OK ? STRATA_OK : p->after[dev];
}

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

Test(workers_failure, each_device_failing_releases_the_others)
{
        struct pool p;
        struct plan pl;

        pool_start(&p, 3, 5.0);
        for (int d = 0; d < 3; d++) {
                double t0 = now();

                pl = (struct plan){ .w = p.w, .fail_dev = d, .fail_rc = STRATA_EINJECTED,
                                    .skip_barrier_dev = -1 };
                cr_assert_eq(strata__workers_run(p.w, work, &pl), STRATA_EINJECTED, "device %d", d);
                cr_assert_lt(now() - t0, 2.0, "released well before the timeout");
                for (int o = 0; o < 3; o++)
                        if (o != d)
                                cr_assert_eq(pl.after[o], STRATA_EABORTED, "device %d", o);
                /* The pool is reusable after a failed command. */
                pl = (struct plan){ .w = p.w, .fail_dev = -1, .skip_barrier_dev = -1 };
                cr_assert_eq(strata__workers_run(p.w, work, &pl), STRATA_OK);
        }
        pool_stop(&p);
}

Test(workers_failure, missing_device_times_out)
{
        struct pool p;
        struct plan pl = { .fail_dev = -1, .skip_barrier_dev = 1 };
        double t0;
        int rc;

        pool_start(&p, 2, 0.3);
        pl.w = p.w;
        t0 = now();
        rc = strata__workers_run(p.w, work, &pl);
        cr_assert_eq(rc, STRATA_ETIMEDOUT, "got %s", strata_status_name(rc));
        cr_assert_lt(now() - t0, 3.0, "bounded by the 0.3 s timeout");
        cr_assert_geq(now() - t0, 0.25);
        pool_stop(&p);
}

static int fail_with_message(int dev, void *arg)
{
        int *mode = arg;

        if (dev != 1)
                return STRATA_OK;
        if (*mode == 0)
                return strata__fail(STRATA_EINVAL, "bad thing on device %d", dev);
        return STRATA_EDEVICE; /* a code without a message */
}

/* The message of an error raised on a worker thread reaches the caller's thread. */
Test(workers_failure, worker_error_message_reaches_the_caller)
{
        struct pool p;
        int mode = 0;

        pool_start(&p, 3, 5.0);
        (void)strata__fail(STRATA_EIO, "stale message of the caller");
        cr_assert_eq(strata__workers_run(p.w, fail_with_message, &mode), STRATA_EINVAL);
        cr_assert_str_eq(strata_last_error(),
                         "device 1: invalid argument: bad thing on device 1");
        mode = 1;
        cr_assert_eq(strata__workers_run(p.w, fail_with_message, &mode), STRATA_EDEVICE);
        cr_assert_not_null(strstr(strata_last_error(), "device 1: device failure (no message)"),
                           "%s", strata_last_error());
        pool_stop(&p);
}
