/*
 * strata-bench-mpi: the peer. Open MPI's MPI_Allreduce (float sum, in place) over the same
 * sizes and iteration counts as strata-bench-coll, same table (run under mpirun -np N).
 * Options as strata-bench-coll's: --json, --min-bytes B, --max-bytes B.
 */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
        static const struct option lo[] = { { "json", 0, 0, 'j' }, { "max-bytes", 1, 0, 'M' },
                                            { "min-bytes", 1, 0, 'm' }, { 0, 0, 0, 0 } };
        size_t minb = 4096, maxb = (size_t)256 << 20;
        int rank, n, json = 0, c;
        float *buf;

        MPI_Init(&argc, &argv);
        while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                if (c == 'j')
                        json = 1;
                else if (c == 'M')
                        maxb = strtoull(optarg, NULL, 0);
                else if (c == 'm')
                        minb = strtoull(optarg, NULL, 0);
                else
                        MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (minb < 4 || maxb < minb) {
                fprintf(stderr, "strata-bench-mpi: bad sizes\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        buf = aligned_alloc(4096, (maxb + 4095) / 4096 * 4096);
        for (size_t i = 0; i < maxb / 4; i++)
                buf[i] = 1.0f;
        if (!rank && !json)
                printf("%12s %10s %10s %10s\n", "bytes", "time_us", "algbw_GBs", "busbw_GBs");
        for (size_t b = minb; b <= maxb; b *= 4) {
                int cnt = (int)(b / 4), iters = b < (1 << 20) ? 2000 : (b < (16 << 20) ? 50 : 10);
                double t, mx;

                for (int w = 0; w < 3; w++)
                        MPI_Allreduce(MPI_IN_PLACE, buf, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                MPI_Barrier(MPI_COMM_WORLD);
                t = MPI_Wtime();
                for (int i = 0; i < iters; i++)
                        MPI_Allreduce(MPI_IN_PLACE, buf, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                t = (MPI_Wtime() - t) / iters;
                MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                if (!rank && json)
                        printf("{\"op\":\"all_reduce\",\"bytes\":%zu,\"time_us\":%.2f,"
                               "\"algbw_GBs\":%.3f,\"busbw_GBs\":%.3f}\n",
                               b, mx * 1e6, b / mx / 1e9, b / mx / 1e9 * 2.0 * (n - 1) / n);
                else if (!rank)
                        printf("%12zu %10.2f %10.2f %10.2f\n", b, mx * 1e6, b / mx / 1e9,
                               b / mx / 1e9 * 2.0 * (n - 1) / n);
                fflush(stdout);
        }
        free(buf);
        MPI_Finalize();
        return 0;
}
