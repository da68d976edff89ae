/*
 * strata-bench-link: alpha (latency) and beta (time per byte) of the link between MPI ranks 0
 * and 1, by ping-pong: for each size, the median over REPS runs of the mean one-way time (half
 * a round trip, ITERS round trips per run). alpha is the one-way time of 8 bytes; beta is the
 * slope between 256 KiB and 4 MiB. Every size is printed beside the line alpha + n beta, so
 * how well two numbers describe the link is seen. Waits poll MPI_Test, as Strata's link does
 * (a blocking receive yields the core when Open MPI sees the node oversubscribed, which
 * measures the scheduler). Other ranks only take part in the barriers.
 * Run under mpirun -np 2, with the link chosen by Open MPI's options (e.g. --mca btl
 * tcp,self for TCP, vader,self for shared memory).
 * Usage: mpirun -np 2 strata-bench-link [REPS]; prints "bytes oneway_us model_us", then
 * "alpha_us A beta_ns_per_byte B GBs G".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/timing.h"

#define NSIZES 9

static const size_t sizes[NSIZES] = { 8, 64, 512, 4096, 32768, (size_t)256 << 10,
                                      (size_t)1 << 20, (size_t)2 << 20, (size_t)4 << 20 };

/* Until @p req completes, polled as Strata's MPI link polls (MPI_Test, no blocking call). */
static void spin(MPI_Request *req)
{
        int done = 0;

        while (!done)
                MPI_Test(req, &done, MPI_STATUS_IGNORE);
}

/* The mean one-way time of @p iters round trips of @p bytes between ranks 0 and 1, in s. */
static double pingpong(int rank, char *buf, size_t bytes, int iters)
{
        int peer = 1 - rank;
        MPI_Request req;
        double t0;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters && rank < 2; i++) {
                if (rank == 0) {
                        MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req);
                        spin(&req);
                }
                MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req);
                spin(&req);
                if (rank == 1) {
                        MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req);
                        spin(&req);
                }
        }
        return (MPI_Wtime() - t0) / iters / 2.0;
}

int main(int argc, char **argv)
{
        int rank, n, reps = argc > 1 ? atoi(argv[1]) : 7;
        double med[NSIZES], alpha, beta;
        char *buf;

        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        if (n < 2) {
                fprintf(stderr, "strata-bench-link: needs 2 processes\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
        reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
        buf = calloc(1, sizes[NSIZES - 1]);
        if (!buf)
                MPI_Abort(MPI_COMM_WORLD, 1);
        for (int s = 0; s < NSIZES; s++) {
                int iters = sizes[s] <= 4096 ? 2000 : sizes[s] <= (256 << 10) ? 200 : 20;
                double t[64];

                pingpong(rank, buf, sizes[s], 10); /* connections and buffers made */
                for (int r = 0; r < reps; r++)
                        t[r] = pingpong(rank, buf, sizes[s], iters);
                med[s] = strata_tool_median(t, (size_t)reps);
        }
        alpha = med[0];
        beta = (med[NSIZES - 1] - med[5]) / (double)(sizes[NSIZES - 1] - sizes[5]);
        if (rank == 0) {
                printf("%10s %12s %12s\n", "bytes", "oneway_us", "model_us");
                for (int s = 0; s < NSIZES; s++)
                        printf("%10zu %12.2f %12.2f\n", sizes[s], med[s] * 1e6,
                               (alpha + (double)sizes[s] * beta) * 1e6);
                printf("alpha_us %.3f beta_ns_per_byte %.5f GBs %.3f\n", alpha * 1e6, beta * 1e9,
                       1e-9 / beta);
        }
        free(buf);
        MPI_Finalize();
        return 0;
}
