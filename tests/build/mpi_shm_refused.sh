#!/bin/sh
# The shm link's set-up when one process of an MPI job refused the job before it (decision
# 0105): process 0 is configured for 3 processes and fails its join, then waits (an embedding
# simulation would go on; Strata's MPI_Finalize, as it leaves MPI, may wait too); process 1
# does not wait for it forever in the region's broadcast (process 0 its root) or agreement: its
# wait is named within its timeout (2 s), blaming no process, and the job ends (MPI_Abort).
# Skipped (exit 0, "not run", as
# cli_build_script's scripts do) without mpirun, libstrata-mpi.so or Open MPI's
# OMPI_COMM_WORLD_RANK (the program's rank).
#   mpi_shm_refused.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/mpi-shm-refused
rm -rf "$dir"
mkdir -p "$dir"
if ! command -v mpirun >/dev/null || [ ! -r "$build/libstrata-mpi.so" ]; then
        echo "mpi_shm_refused: mpirun or libstrata-mpi.so missing: not run"
        exit 0
fi
v=$(timeout -k 5 30 mpirun --allow-run-as-root -np 1 sh -c 'echo "r=${OMPI_COMM_WORLD_RANK:-}"') ||
        { echo "mpi_shm_refused: mpirun -np 1 failed"; exit 1; }
if [ "$v" = "r=" ]; then
        echo "mpi_shm_refused: no OMPI_COMM_WORLD_RANK under mpirun (not Open MPI): not run"
        exit 0
fi
cat > "$dir/refuse.c" <<'PROG'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "strata/strata.h"

int main(void)
{
        struct strata_module mods[] = { { .ops = &strata_linear, .out = 4 } };
        struct strata_model model = { .in_features = 8, .nmodules = 1, .modules = mods };
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_plan_info plan;
        struct strata_runtime *rt = NULL;
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        int rank = r ? atoi(r) : 0;
        void *region;

        cfg.model = &model;
        cfg.batch = 8;
        cfg.classes = 4;
        cfg.strategy.kind = STRATA_STRATEGY_MPI;
        cfg.strategy.devices = 1;
        cfg.process.count = rank == 0 ? 3 : 2; /* process 0 refuses the job of 2 */
        cfg.device.timeout_s = 2.0;
        if (strata_plan(&cfg, &plan) != STRATA_OK)
                return 2;
        region = aligned_alloc(plan.align, (plan.bytes + plan.align - 1) / plan.align *
                               plan.align);
        cfg.memory = region;
        cfg.memory_size = plan.bytes;
        if (strata_init(&rt, &cfg) != STRATA_OK) {
                fprintf(stderr, "process %d refused: %s\n", rank, strata_last_error());
                if (rank == 0)
                        sleep(20); /* goes on: process 1 must not wait for it */
                return 1;
        }
        fprintf(stderr, "process %d joined\n", rank);
        return 0;
}
PROG
cc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$src/include" -o "$dir/refuse" \
        "$dir/refuse.c" -L"$build" -lstrata -lm -Wl,-rpath,"$build"
t0=$(date +%s)
rc=0
timeout -k 5 50 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$dir/refuse" \
        > "$dir/out" 2>&1 || rc=$?
took=$(($(date +%s) - t0))
cat "$dir/out"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] &&
        [ "$took" -lt 15 ] ||
        { echo "mpi_shm_refused: exit $rc after $took s (process 1 waited for process 0)"; exit 1; }
grep -q "process 1 waited 2 s in the shm link's" "$dir/out" ||
        { echo "mpi_shm_refused: process 1's timeout not named"; exit 1; }
grep -q "a process never came" "$dir/out" && ! grep -q "nothing came from process 0" "$dir/out" ||
        { echo "mpi_shm_refused: the broadcast's wait blamed its root"; exit 1; }
grep -q "MPI_Abort" "$dir/out" ||
        { echo "mpi_shm_refused: the job did not end through MPI_Abort"; exit 1; }
echo "mpi_shm_refused: process 1 named its wait and ended the job in $took s"
