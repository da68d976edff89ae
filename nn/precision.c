/* The precision plugins: 32, bf16-mixed and 16-mixed (GradScaler semantics). */
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "nn/precision.h"

/* GradScaler: halve and skip on overflow; double after interval clean steps. */
static void scaler_update(struct strata_grad_scaler *s, int found_inf)
{
        if (found_inf) {
                s->scale *= 0.5f;
                s->growth = 0;
                s->skipped++;
                return;
        }
        if (++s->growth < s->interval)
                return;
        s->growth = 0;
        if (isfinite(s->scale * 2.0f))
                s->scale *= 2.0f;
}

static const struct strata__precision plugins[STRATA_PRECISION_COUNT] = {
        [STRATA_PRECISION_32] = { "32", STRATA_F32, NULL },
        [STRATA_PRECISION_BF16_MIXED] = { "bf16-mixed", STRATA_BF16, NULL },
        [STRATA_PRECISION_16_MIXED] = { "16-mixed", STRATA_F16, scaler_update },
};

const struct strata__precision *strata__precision(enum strata_precision p)
{
        return (unsigned)p < STRATA_PRECISION_COUNT ? &plugins[p] : NULL;
}

const char *strata_precision_name(enum strata_precision p)
{
        return (unsigned)p < STRATA_PRECISION_COUNT ? plugins[p].name : NULL;
}

int strata_precision_parse(const char *name, enum strata_precision *out)
{
        if (!name || !out)
                return strata__fail(STRATA_EINVAL, "precision: NULL argument");
        if (!strcmp(name, "32-true")) {
                *out = STRATA_PRECISION_32;
                return STRATA_OK;
        }
        for (int p = 0; p < STRATA_PRECISION_COUNT; p++)
                if (!strcmp(name, plugins[p].name)) {
                        *out = (enum strata_precision)p;
                        return STRATA_OK;
                }
        return strata__fail(STRATA_EINVAL, "precision \"%s\": expected 32, bf16-mixed or "
                                           "16-mixed", name);
}

void strata__scaler_init(struct strata_grad_scaler *s, float init, uint32_t interval)
{
        *s = (struct strata_grad_scaler){ .scale = init > 0.0f ? init : 65536.0f,
                                          .interval = interval ? interval : 2000 };
}
