/* What the launcher (mpirun, srun, a PMI launcher, torchrun) says about this process. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strata/process.h"
#include "strata/status.h"
#include "base/base.h"

/* One launcher's variables: rank, size, local rank, local size (NULL: not given). */
struct source {
        const char *name, *rank, *size, *local_rank, *local_size;
};

static const struct source sources[] = {
        { "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_COMM_WORLD_LOCAL_SIZE" },
        { "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
        { "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" },
        { "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE" },
};

/* *v = the variable's value in [lo, hi]; absent leaves *v. Slurm's counts may read "4(x2)". */
static int number(const char *var, int lo, int hi, int *v)
{
        const char *s = var ? getenv(var) : NULL;
        char *end;
        long x;

        if (!s)
                return STRATA_OK;
        errno = 0;
        x = strtol(s, &end, 10);
        if (end == s || errno || (*end && *end != '(') || x < lo || x > hi)
                return strata__fail(STRATA_EINVAL, "launcher variable %s='%.40s' is not a number "
                                                   "in [%d, %d]", var, s, lo, hi);
        *v = (int)x;
        return STRATA_OK;
}

int strata_launch_detect(struct strata_launch *out)
{
        struct strata_launch l = { 0, 1, 0, 1, "none" };

        if (!out)
                return strata__fail(STRATA_EINVAL, "launch detect: out is NULL");
        for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
                const struct source *s = &sources[i];

                if (!getenv(s->rank) || !getenv(s->size))
                        continue;
                STRATA_TRY(number(s->size, 1, 1 << 24, &l.size));
                STRATA_TRY(number(s->rank, 0, l.size - 1, &l.rank));
                l.local_size = l.size; /* not given: any of them may share this host */
                STRATA_TRY(number(s->local_size, 1, l.size, &l.local_size));
                STRATA_TRY(number(s->local_rank, 0, l.local_size - 1, &l.local_rank));
                l.launcher = s->name;
                break;
        }
        *out = l;
        return STRATA_OK;
}
