/*
 * The configuration by name, for callers that cannot lay out struct strata_config themselves
 * (Fortran, Python's ctypes, a configuration file): one table of fields, their types and
 * offsets. The checks of strata_plan()/strata_init() still apply to the values set here.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "strata/runtime.h"
#include "strata/status.h"
#include "base/base.h"

/* How a value set by name is stored; enum fields are INT (their values are ints). NONE: a field
 * that is not a number (a pointer, or set by its own call), not settable by name. */
enum kind { NONE, INT, U64, SIZE, FLOAT, DOUBLE };

struct key {
        const char *name;
        enum kind kind;
        size_t off;
};

/* One entry per field of the lists in strata/runtime.h and strata/nn.h: @p path is the field's
 * sub-struct with its dot (empty for struct strata_config's own fields). */
#define K(path, type, field, kind, key) { key, kind, offsetof(struct strata_config, path field) },
#define K_OPTIM(path, type, field, kind, key)                                                      \
        { "optim." key, kind, offsetof(struct strata_config, path field) },
static const struct key keys[] = {
        STRATA_CONFIG_RUN(K, )
        STRATA_CONFIG_STRATEGY(K, strategy.)
        STRATA_CONFIG_DEVICE(K, device.)
        STRATA_OPTIM_FIELDS(K_OPTIM, optim.)
        STRATA_CONFIG_TRAIN(K, train.)
        STRATA_CONFIG_PRECISION(K, precision.)
        STRATA_CONFIG_CHECKPOINT(K, checkpoint.)
        STRATA_CONFIG_TRACE(K, trace.)
        STRATA_CONFIG_PROCESS(K, process.)
};
#undef K
#undef K_OPTIM

/* An integer field must get an integral value in its type's range. */
static int integral(double v, double lo, double hi)
{
        return isfinite(v) && v == floor(v) && v >= lo && v <= hi;
}

int strata_config_set(struct strata_config *cfg, const char *key, double value)
{
        const struct key *k = NULL;
        char *f;

        if (!cfg || !key)
                return strata__fail(STRATA_EINVAL, "config set: NULL argument");
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !k; i++)
                if (keys[i].name && !strcmp(keys[i].name, key))
                        k = &keys[i];
        if (!k)
                return strata__fail(STRATA_EINVAL, "config set: no field '%s'", key);
        f = (char *)cfg + k->off;
        switch (k->kind) {
        case NONE:
                break;
        case INT:
                if (!integral(value, INT32_MIN, INT32_MAX))
                        break;
                *(int *)f = (int)value;
                return STRATA_OK;
        case U64:
        case SIZE:
                if (!integral(value, 0, 9007199254740992.0)) /* 2^53: exact in a double */
                        break;
                if (k->kind == U64)
                        *(uint64_t *)f = (uint64_t)value;
                else
                        *(size_t *)f = (size_t)value;
                return STRATA_OK;
        case FLOAT:
                if (isnan(value) || fabs(value) > 3.4e38)
                        break;
                *(float *)f = (float)value;
                return STRATA_OK;
        case DOUBLE:
                *(double *)f = value;
                return STRATA_OK;
        }
        return strata__fail(STRATA_EINVAL, "config set: %g does not fit field '%s'", value, key);
}

int strata_config_set_model(struct strata_config *cfg, const struct strata_model *model)
{
        if (!cfg)
                return strata__fail(STRATA_EINVAL, "config set model: config is NULL");
        cfg->model = model;
        return STRATA_OK;
}

int strata_config_set_mpi_comm(struct strata_config *cfg, const void *comm, int fortran)
{
        if (!cfg)
                return strata__fail(STRATA_EINVAL, "config set mpi comm: config is NULL");
        cfg->process.mpi_comm = comm;
        cfg->process.mpi_comm_fortran = !!fortran;
        return STRATA_OK;
}

size_t strata_config_bytes(void)
{
        return sizeof(struct strata_config);
}
