/*
 * The configuration by name, for callers that cannot lay out struct strata_config themselves
 * (Fortran, Python's ctypes, a configuration file): one table of fields, their types and
 * offsets. The checks of strata_plan()/strata_init() still apply to the values set here.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/runtime.h"
#include "strata/status.h"
#include "base/base.h"
#include "strategy/internal.h"

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

/*
 * Fields a process of a job may set for itself: how it runs here, not what it computes. Every
 * other field settable by name must be equal on every process (strata__config_shared()).
 * inference_only is here because it runs under single alone: no job of processes has it.
 */
static int own_field(const char *name)
{
        static const char *const own[] = { "verbose", "bind", "kernels", "timeout_s",
                                           "no_fusion", "trace_events", "stall_s",
                                           "mpi_comm_fortran", "inference_only" };

        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
                if (!strcmp(own[i], name))
                        return 1;
        return 0;
}

/* The @p i-th field every process must share, or NULL past the last. */
static const struct key *shared_key(int i)
{
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                if (keys[k].kind != NONE && !own_field(keys[k].name) && i-- == 0)
                        return &keys[k];
        return NULL;
}

int strata__config_shared_count(void)
{
        int n = 0;

        while (shared_key(n))
                n++;
        return n;
}

const char *strata__config_shared(const struct strata_config *cfg, int i, uint64_t *bits)
{
        const struct key *k = shared_key(i);
        const char *f;
        int64_t v;
        double d;

        *bits = 0;
        if (!k || !cfg)
                return k ? k->name : NULL;
        f = (const char *)cfg + k->off;
        switch (k->kind) {
        case INT:
                v = *(const int *)f;
                memcpy(bits, &v, sizeof(v));
                break;
        case U64:
                memcpy(bits, f, sizeof(uint64_t));
                break;
        case SIZE:
                *bits = *(const size_t *)f;
                break;
        case FLOAT:
                d = *(const float *)f;
                memcpy(bits, &d, sizeof(d));
                break;
        case DOUBLE:
        case NONE:
                memcpy(bits, f, sizeof(double));
                break;
        }
        return k->name;
}

void strata__config_shared_text(int i, uint64_t bits, char *buf, size_t n)
{
        const struct key *k = shared_key(i);
        int64_t v;
        double d;

        if (!k || !n) {
                if (n)
                        buf[0] = '\0';
                return;
        }
        memcpy(&v, &bits, sizeof(v));
        memcpy(&d, &bits, sizeof(d));
        if (k->kind == INT) {
                snprintf(buf, n, "%lld", (long long)v);
        } else if (k->kind == U64 || k->kind == SIZE) {
                snprintf(buf, n, "%llu", (unsigned long long)bits);
        } else { /* the fewest digits that give the value back: 0.1, not 0.100000001 */
                for (int digits = 6; digits <= 17; digits++) {
                        snprintf(buf, n, "%.*g", digits, d);
                        if (k->kind == FLOAT ? (float)strtod(buf, NULL) == (float)d
                                             : strtod(buf, NULL) == d)
                                break;
                }
        }
}

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
