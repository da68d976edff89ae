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

enum kind { INT, U64, SIZE, FLOAT, DOUBLE }; /* enum fields are INT: their values are ints */

struct key {
        const char *name;
        enum kind kind;
        size_t off;
};

#define K(name, kind, field) { name, kind, offsetof(struct strata_config, field) }
static const struct key keys[] = {
        K("strategy", INT, strategy),          K("accelerator", INT, accelerator),
        K("devices", INT, devices),             K("batch", INT, batch),
        K("classes", INT, classes),             K("seed", U64, seed),
        K("verbose", INT, verbose),             K("accumulate", INT, accumulate),
        K("clip_norm", FLOAT, clip_norm),       K("clip_value", FLOAT, clip_value),
        K("sync_bn", INT, sync_bn),             K("bucket_bytes", SIZE, bucket_bytes),
        K("timeout_s", DOUBLE, timeout_s),      K("allow_tf32", INT, allow_tf32),
        K("trace_events", SIZE, trace_events),  K("allow_nonfinite", INT, allow_nonfinite),
        K("bind", INT, bind),                  K("stall_s", DOUBLE, stall_s),
        K("processes", INT, processes),        K("mpi_allreduce", INT, mpi_allreduce),
        K("precision", INT, precision),        K("loss_scale_init", FLOAT, loss_scale_init),
        K("loss_scale_interval", INT, loss_scale_interval),
        K("grad_allreduce", INT, grad_allreduce),
        K("optim.kind", INT, optim.kind),      K("optim.lr", FLOAT, optim.lr),
        K("optim.momentum", FLOAT, optim.momentum),
        K("optim.dampening", FLOAT, optim.dampening),
        K("optim.nesterov", INT, optim.nesterov),
        K("optim.weight_decay", FLOAT, optim.weight_decay),
        K("optim.beta1", FLOAT, optim.beta1),   K("optim.beta2", FLOAT, optim.beta2),
        K("optim.eps", FLOAT, optim.eps),       K("optim.schedule", INT, optim.schedule),
        K("optim.warmup", U64, optim.warmup),   K("optim.step_size", U64, optim.step_size),
        K("optim.gamma", FLOAT, optim.gamma),   K("optim.t_max", U64, optim.t_max),
        K("optim.lr_min", FLOAT, optim.lr_min),
};
#undef K

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
                if (!strcmp(keys[i].name, key))
                        k = &keys[i];
        if (!k)
                return strata__fail(STRATA_EINVAL, "config set: no field '%s'", key);
        f = (char *)cfg + k->off;
        switch (k->kind) {
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

size_t strata_config_bytes(void)
{
        return sizeof(struct strata_config);
}

const struct strata_module_ops *strata_module_ops_by_name(const char *name)
{
        static const struct strata_module_ops *const all[] = { &strata_linear, &strata_relu,
                                                               &strata_batchnorm1d,
                                                               &strata_dropout };

        for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
                if (!strcmp(all[i]->name, name))
                        return all[i];
        return NULL;
}
