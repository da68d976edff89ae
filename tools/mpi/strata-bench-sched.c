/*
 * strata-bench-sched: the time and the messages of Strata's deterministic all_reduce across
 * processes (strategy mpi, one device per process), per message size: the median over REPS
 * runs of the mean time of one call (the slowest process's), and the MPI messages one process
 * sends per call, counted exactly by wrapping MPI_Isend (PMPI). Built against one library
 * build, so that two builds (two schedules) can be run alternately by tools/bench-sched.sh.
 * With --op, another collective instead: broadcast (from rank 0) or all_gather (BYTES per
 * rank), whose counts tools/bench-scale.sh checks against the scale model's; with --iters,
 * N calls per run at every size (default 400 up to 4 KiB, 20 up to 1 MiB, 3 above); with
 * --no-bind, the device thread is not pinned (hosts simulated in namespaces of one machine
 * each think they own its first core).
 * This program initialises MPI itself (MPI_THREAD_FUNNELED): Strata then uses it as given.
 * Usage: mpirun -np P strata-bench-sched [--op all_reduce|broadcast|all_gather] [--iters N]
 *        [--no-bind] REPS BYTES...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static struct strata_runtime *runtime(int nobind)
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
        cfg.device.bind = nobind ? STRATA_BIND_NONE : STRATA_BIND_CORES;
        if (strata_init(&rt, &cfg) || strata_connect(rt)) {
                fprintf(stderr, "strata-bench-sched: %s\n", strata_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        return rt;
}

/* One collective of @p op on @p cnt floats per rank (@p all: the all_gather's receive). */
static int collective(struct strata_runtime *rt, const char *op, float *buf, float *all,
                      size_t cnt)
{
        void *bufs[1] = { buf }, *recv[1] = { all };
        const void *send[1] = { buf };

        if (!strcmp(op, "broadcast"))
                return strata_broadcast(rt, bufs, cnt, STRATA_F32, 0);
        if (!strcmp(op, "all_gather"))
                return strata_all_gather(rt, send, recv, cnt, STRATA_F32);
        return strata_reduce(rt, bufs, cnt, STRATA_F32, STRATA_OP_SUM);
}

int main(int argc, char **argv)
{
        int provided, rank, n, reps, first = 1, fixed = 0, nobind = 0;
        const char *op = "all_reduce";
        struct strata_runtime *rt;

        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        while (first + 1 < argc && !strncmp(argv[first], "--", 2)) {
                if (!strcmp(argv[first], "--no-bind")) {
                        nobind = 1;
                        first++;
                        continue;
                }
                if (!strcmp(argv[first], "--op"))
                        op = argv[first + 1];
                else if (strcmp(argv[first], "--iters") || (fixed = atoi(argv[first + 1])) < 1)
                        op = argv[first];
                first += 2;
        }
        if (strcmp(op, "all_reduce") && strcmp(op, "broadcast") && strcmp(op, "all_gather")) {
                fprintf(stderr, "strata-bench-sched: %s: not an option, or --op not all_reduce, "
                                "broadcast or all_gather, or --iters not positive\n", op);
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
        reps = first < argc ? atoi(argv[first]) : 5;
        reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
        rt = runtime(nobind);
        for (int s = first + 1; s < argc; s++) {
                size_t b = (size_t)atoll(argv[s]), cnt = b / 4 ? b / 4 : 1;
                int iters = fixed ? fixed : b <= 4096 ? 400 : b <= (1 << 20) ? 20 : 3;
                float *buf = aligned_alloc(64, (cnt * 4 + 63) / 64 * 64);
                float *all = aligned_alloc(64, (cnt * 4 * (size_t)n + 63) / 64 * 64);
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
                                if (collective(rt, op, buf, all, cnt)) {
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
                free(all);
        }
        strata_teardown(rt);
        MPI_Finalize();
        return 0;
}
