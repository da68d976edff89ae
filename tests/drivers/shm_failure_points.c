/*
 * A failure injected on any rank at any point of a collective: the call returns the injected
 * error (first error) well within the timeout, every other rank is released, and the pool and
 * communicator work again afterwards.
 */
#include <criterion/criterion.h>
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

static void each_rank_each_point(size_t count)
{
        static struct job j;
        struct pool p;

        pool_start(&p, 3, 5.0);
        j.c = p.c;
        j.count = count;
        for (int r = 0; r < 3; r++)
                j.buf[r] = pool_alloc(&p, count * 4);
        for (int rank = 0; rank < 3; rank++)
                for (int point = 0; point < 3; point++) {
                        double t0 = now();
                        int rc;

                        strata_comm_inject(p.c, rank, point, STRATA_EINJECTED);
                        rc = strata_workers_run(p.w, go, &j);
                        cr_assert_eq(rc, STRATA_EINJECTED, "rank %d point %d: %s", rank, point,
                                     strata_status_name(rc));
                        cr_assert_lt(now() - t0, 2.0, "released long before the 5 s timeout");
                        strata_comm_inject(p.c, -1, 0, 0);
                        for (size_t i = 0; i < count; i++)
                                j.buf[0][i] = j.buf[1][i] = j.buf[2][i] = 1.0f;
                        cr_assert_eq(strata_workers_run(p.w, go, &j), STRATA_OK,
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
