/*
 * strata-bench-procs: all_reduce across processes (run under mpirun -np N, one device each),
 * nccl-tests style busbw, three ways alternated in one run: Strata's deterministic protocol
 * (strategy mpi), Strata handing the data to MPI_Allreduce (cfg.process.mpi_allreduce), and
 * Open MPI's MPI_Allreduce called directly on the same buffer (the peer). Medians of REPS
 * alternations.
 * This program initialises MPI itself (MPI_THREAD_FUNNELED): Strata then uses it as given.
 * Usage: mpirun -np 2 strata-bench-procs [REPS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "tools/timing.h"

static struct strata_runtime *runtime(int native)
{
        static struct strata_module mods[2][1];
        static struct strata_model model[2];
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;

        mods[native][0] = (struct strata_module){ .ops = &strata_linear, .out = 2 };
        model[native] = (struct strata_model){ .in_features = 2, .nmodules = 1,
                                               .modules = mods[native] };
        cfg.model = &model[native];
        cfg.strategy.kind = STRATA_STRATEGY_MPI;
        cfg.strategy.devices = 1;
        cfg.batch = 64;
        cfg.classes = 2;
        cfg.process.mpi_allreduce = native;
        if (strata_init(&rt, &cfg) || strata_connect(rt)) {
                fprintf(stderr, "strata-bench-procs: %s\n", strata_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        return rt;
}

int main(int argc, char **argv)
{
        static const size_t sizes[] = { 4096, (size_t)1 << 20, (size_t)64 << 20 };
        int provided, rank, n, reps = argc > 1 ? atoi(argv[1]) : 5;
        struct strata_runtime *rt[2];
        float *buf;

        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
        rt[0] = runtime(0);
        rt[1] = runtime(1);
        buf = aligned_alloc(64, sizes[2]);
        for (size_t i = 0; i < sizes[2] / 4; i++)
                buf[i] = 1.0f;
        if (!rank)
                printf("all_reduce f32 sum, %d processes x 1 device, median of %d alternations; "
                       "busbw GB/s\n%12s %14s %14s %14s %10s %10s\n", n, reps, "bytes",
                       "strata(fixed)", "strata(MPI)", "MPI_Allreduce", "fixed/MPI",
                       "MPI-mode/MPI");
        for (int s = 0; s < 3; s++) {
                size_t b = sizes[s], cnt = b / 4;
                int iters = b < (1 << 20) ? 2000 : b < (16 << 20) ? 50 : 5;
                double t[3][64];
                void *bufs[1] = { buf };

                for (int r = 0; r < reps; r++)
                        for (int k = 0; k < 3; k++) {
                                double t0, dt, mx;

                                for (int i = 0; i < iters + 2; i++) {
                                        if (i == 2) {
                                                MPI_Barrier(MPI_COMM_WORLD);
                                                t0 = MPI_Wtime();
                                        }
                                        if (k < 2 && strata_reduce(rt[k], bufs, cnt, STRATA_F32,
                                                                   STRATA_OP_SUM)) {
                                                fprintf(stderr, "strata-bench-procs: %s\n",
                                                        strata_last_error());
                                                MPI_Abort(MPI_COMM_WORLD, 1);
                                        }
                                        if (k == 2)
                                                MPI_Allreduce(MPI_IN_PLACE, buf, (int)cnt,
                                                              MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                                }
                                dt = (MPI_Wtime() - t0) / iters;
                                MPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                                t[k][r] = (double)b / mx / 1e9 * 2.0 * (n - 1) / n;
                                for (size_t i = 0; i < cnt; i++) /* keep values finite */
                                        buf[i] = 1.0f;
                        }
                if (!rank) {
                        double f = strata_tool_median(t[0], (size_t)reps),
                               m = strata_tool_median(t[1], (size_t)reps),
                               p = strata_tool_median(t[2], (size_t)reps);

                        printf("%12zu %14.3f %14.3f %14.3f %10.2f %10.2f\n", b, f, m, p, f / p,
                               m / p);
                }
        }
        strata_teardown(rt[0]);
        strata_teardown(rt[1]);
        free(buf);
        MPI_Finalize();
        return 0;
}
