/*
 * strata-bench-sched: the time and the messages of Strata's deterministic all_reduce across
 * processes (strategy mpi, one device per process), per message size: the median over REPS
 * runs of the mean time of one call (the slowest process's), and the MPI messages one process
 * sends per call, counted exactly by wrapping MPI_Isend (PMPI). Built against one library
 * build, so that two builds (two schedules) can be run alternately by tools/bench-sched.sh.
 * This program initialises MPI itself (MPI_THREAD_FUNNELED): Strata then uses it as given.
 * Usage: mpirun -np P strata-bench-sched REPS BYTES...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "strata/strata.h"
#include "tools/timing.h"

static long sends;

/* Every message the link sends goes through here (the executable's symbol wins). */
int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
        sends++;
        return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
}

static struct strata_runtime *runtime(void)
{
        static struct strata_module mods[1];
        static struct strata_model model;
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;

        mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 2 };
        model = (struct strata_model){ .in_features = 2, .nmodules = 1, .modules = mods };
        cfg.model = &model;
        cfg.strategy.kind = STRATA_STRATEGY_MPI;
        cfg.strategy.devices = 1;
        cfg.batch = 64;
        cfg.classes = 2;
        if (strata_init(&rt, &cfg) || strata_connect(rt)) {
                fprintf(stderr, "strata-bench-sched: %s\n", strata_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        return rt;
}

int main(int argc, char **argv)
{
        int provided, rank, n, reps = argc > 1 ? atoi(argv[1]) : 5;
        struct strata_runtime *rt;

        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
        rt = runtime();
        for (int s = 2; s < argc; s++) {
                size_t b = (size_t)atoll(argv[s]), cnt = b / 4 ? b / 4 : 1;
                int iters = b <= 4096 ? 400 : b <= (1 << 20) ? 20 : 3;
                float *buf = aligned_alloc(64, (cnt * 4 + 63) / 64 * 64);
                void *bufs[1] = { buf };
                double t[64];
                long msgs = 0;

                for (int r = 0; r < reps; r++) {
                        double t0 = 0.0, dt, mx;
                        long before = 0;

                        for (size_t i = 0; i < cnt; i++)
                                buf[i] = 1.0f;
                        for (int i = 0; i < iters + 2; i++) {
                                if (i == 2) {
                                        MPI_Barrier(MPI_COMM_WORLD);
                                        before = sends;
                                        t0 = MPI_Wtime();
                                }
                                if (strata_reduce(rt, bufs, cnt, STRATA_F32, STRATA_OP_SUM)) {
                                        fprintf(stderr, "strata-bench-sched: %s\n",
                                                strata_last_error());
                                        MPI_Abort(MPI_COMM_WORLD, 1);
                                }
                        }
                        dt = (MPI_Wtime() - t0) / iters;
                        msgs = (sends - before) / iters;
                        MPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                        t[r] = mx * 1e6;
                }
                if (!rank)
                        printf("%d %zu %.3f %ld\n", n, cnt * 4,
                               strata_tool_median(t, (size_t)reps), msgs);
                free(buf);
        }
        strata_teardown(rt);
        MPI_Finalize();
        return 0;
}
