/*
 * A failure injected on any rank at any point of a collective: the call returns the injected
 * error (first error) well within the timeout, every other rank is released, and the pool and
 * communicator work again afterwards.
 */
#include <criterion/criterion.h>

#include "drivers/comm_internal.h"
#include <time.h>

#include "tests/support/pool.h"

struct job {
        struct strata_comm *c;
        size_t count;
        float *buf[3];
};

static int go(int rank, void *arg)
{
        struct job *j = arg;

        STRATA_TRY(strata_comm_all_reduce(j->c, rank, j->buf[rank], j->buf[rank], j->count,
                                          STRATA_F32, STRATA_OP_SUM));
        return strata_comm_barrier(j->c, rank);
}

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Three ranks with a 5 s timeout, one buffer of @p count floats each. */
static void job_start(struct pool *p, struct job *j, size_t count)
{
        pool_start(p, 3, 5.0);
        j->c = p->c;
        j->count = count;
        for (int r = 0; r < 3; r++)
                j->buf[r] = pool_alloc(p, count * 4);
}

static void each_rank_each_point(size_t count)
{
        static struct job j;
        struct pool p;

        job_start(&p, &j, count);
        for (int rank = 0; rank < 3; rank++)
                for (int point = 0; point < 3; point++) {
                        double t0 = now();
                        int rc;

                        strata__comm_inject(p.c, rank, point, STRATA_EINJECTED);
                        rc = strata__workers_run(p.w, go, &j);
                        cr_assert_eq(rc, STRATA_EINJECTED, "rank %d point %d: %s", rank, point,
                                     strata_status_name(rc));
                        cr_assert_lt(now() - t0, 2.0, "released long before the 5 s timeout");
                        strata__comm_inject(p.c, -1, 0, 0);
                        for (size_t i = 0; i < count; i++)
                                j.buf[0][i] = j.buf[1][i] = j.buf[2][i] = 1.0f;
                        cr_assert_eq(strata__workers_run(p.w, go, &j), STRATA_OK,
                                     "after rank %d point %d: %s", rank, point,
                                     strata_last_error());
                        cr_assert_eq(j.buf[2][count - 1], 3.0f);
                }
        pool_stop(&p);
}

Test(shm_failure_points, small_messages, .timeout = 60)
{
        each_rank_each_point(64);
}

Test(shm_failure_points, large_messages, .timeout = 60)
{
        each_rank_each_point(200000);
}

/* Rank 1 fails before the collective that the others enter. */
static int fail_before(int rank, void *arg)
{
        if (rank == 1)
                return STRATA_EINJECTED;
        return go(rank, arg);
}

/*
 * A run where one rank failed outside the collectives leaves the others one collective ahead;
 * the next run must still meet correctly (the communicator restarts its sequences).
 */
static void after_failure_outside(size_t count)
{
        static struct job j;
        struct pool p;

        job_start(&p, &j, count);
        for (int round = 0; round < 3; round++) {
                double t0 = now();

                cr_assert_eq(strata__workers_run(p.w, fail_before, &j), STRATA_EINJECTED);
                for (int r = 0; r < 3; r++)
                        for (size_t i = 0; i < count; i++)
                                j.buf[r][i] = (float)(r + 1);
                cr_assert_eq(strata__workers_run(p.w, go, &j), STRATA_OK, "round %d: %s", round,
                             strata_last_error());
                cr_assert_lt(now() - t0, 2.0, "no rank waited for a peer's timeout");
                for (int r = 0; r < 3; r++)
                        cr_assert_eq(j.buf[r][count - 1], 6.0f, "round %d rank %d", round, r);
        }
        pool_stop(&p);
}

Test(shm_failure_points, resync_small, .timeout = 60)
{
        after_failure_outside(64);
}

Test(shm_failure_points, resync_large, .timeout = 60)
{
        after_failure_outside(200000);
}
