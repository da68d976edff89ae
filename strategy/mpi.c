/*
 * The `mpi` strategy: ddp across the devices of every process of an MPI job. Each process
 * (best one per node) runs its devices as pinned threads, as ddp does; the processes exchange
 * through the MPI link (drivers/net.h, libstrata-mpi.so). Global device rank = process rank x
 * devices + device, so batch rows, dropout streams and BatchNorm statistics follow the global
 * rank, and reductions combine all devices in global rank order: results are bitwise those of
 * ddp with as many devices in one process, however they are split into processes (unless
 * cfg.process.mpi_allreduce hands gradients to MPI_Allreduce).
 *
 * Parent: the process layer (strategy/process/layer.c), itself ddp's child. setup_environment
 * first joins the processes (MPI_Init_thread unless the application did it;
 * cfg.process.mpi_comm or MPI_COMM_WORLD), then hands up. A failure in a step ends the job
 * (MPI_Abort, the process layer's error entry).
 */
#include "strata/status.h"
#include "strategy/process/process.h"

const struct strata__strategy strata__mpi = {
        .name = "mpi",
        .parent = &strata__procs,
        /* the plan needs the processes before MPI is initialised */
        .ops = { .processes = strata__procs_launched, .join = strata__procs_join_mpi },
};
