/*
 * strata-count-isend.so: counts the MPI messages a process sends (MPI_Isend, through PMPI) and
 * prints "isend RANK COUNT" on stderr when the process exits. Preloaded into any program run
 * under mpirun (LD_PRELOAD), e.g. strata-train: tools/bench-sharded-procs.sh takes the
 * messages of a training step as the difference of two runs of different step counts.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long sends;
static int rank = -1;

int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
        int initialized = 0;

        if (rank < 0 && !MPI_Initialized(&initialized) && initialized)
                PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        sends++;
        return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
}

__attribute__((destructor)) static void report(void)
{
        if (sends)
                fprintf(stderr, "isend %d %ld\n", rank, sends);
}
