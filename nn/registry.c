/*
 * The built-in modules and losses, by the names their ops tables carry: what the model line,
 * strata-train and callers that cannot name a table (Fortran) look up. Each module's entry
 * also lists the arguments the model line reads for it (nn/registry.h), so a built-in module
 * is added here with one line; nothing outside nn/ lists modules or losses
 * (tests/build/nn_registries.c).
 */
#include <string.h>

#include "strata/nn.h"
#include "nn/registry.h"

/* The argument lists of the families that take several (the model line's order). */
#define OUT 1, { STRATA__ARG_OUT }
#define CONV                                                                                   \
        2, { STRATA__ARG_OUT, STRATA__ARG_KERNEL, STRATA__ARG_STRIDE, STRATA__ARG_PADDING,     \
             STRATA__ARG_DILATION, STRATA__ARG_PMODE, STRATA__ARG_BIAS }
#define MAXPOOL                                                                                \
        1, { STRATA__ARG_KERNEL, STRATA__ARG_STRIDE, STRATA__ARG_PADDING, STRATA__ARG_DILATION }
#define AVGPOOL 1, { STRATA__ARG_KERNEL, STRATA__ARG_STRIDE, STRATA__ARG_PADDING }
#define SPECTRAL2 3, { STRATA__ARG_OUT, STRATA__ARG_MODES1, STRATA__ARG_MODES2 }
#define SPECTRAL3 4, { STRATA__ARG_OUT, STRATA__ARG_MODES1, STRATA__ARG_MODES2, STRATA__ARG_MODES3 }
#define NO_ARGS 0, { STRATA__ARG_NONE }

/* Every built-in module, one line each. */
static const struct strata__module_entry modules[] = {
        { &strata_linear, OUT },
        { &strata_relu, NO_ARGS },
        { &strata_batchnorm1d, 0, { STRATA__ARG_EPS, STRATA__ARG_MOMENTUM } },
        { &strata_dropout, 1, { STRATA__ARG_P } },
        { &strata_tanh, NO_ARGS },
        { &strata_sigmoid, NO_ARGS },
        { &strata_gelu, NO_ARGS },
        { &strata_gelu_tanh, NO_ARGS },
        { &strata_silu, NO_ARGS },
        { &strata_leaky_relu, 1, { STRATA__ARG_SLOPE } },
        { &strata_maxpool1d, MAXPOOL },
        { &strata_maxpool2d, MAXPOOL },
        { &strata_maxpool3d, MAXPOOL },
        { &strata_avgpool1d, AVGPOOL },
        { &strata_avgpool2d, AVGPOOL },
        { &strata_avgpool3d, AVGPOOL },
        { &strata_upsample, 1, { STRATA__ARG_SCALE, STRATA__ARG_MODE } },
        { &strata_flatten, NO_ARGS },
        { &strata_layernorm, 0, { STRATA__ARG_EPS, STRATA__ARG_DIMS } },
        { &strata_rmsnorm, 0, { STRATA__ARG_EPS, STRATA__ARG_DIMS } },
        { &strata_conv1d, CONV },
        { &strata_conv2d, CONV },
        { &strata_conv3d, CONV },
        { &strata_spectralconv1d, 2, { STRATA__ARG_OUT, STRATA__ARG_MODES } },
        { &strata_spectralconv2d, SPECTRAL2 },
        { &strata_spectralconv3d, SPECTRAL3 },
        { &strata_mha, 1, { STRATA__ARG_HEADS, STRATA__ARG_CAUSAL } },
        { &strata_posembed, NO_ARGS },
        { &strata_tokens, NO_ARGS },
        { &strata_gather, 1, { STRATA__ARG_SIDE } },
        { &strata_scatter, 1, { STRATA__ARG_REDUCE } },
        { &strata_add, 1, { STRATA__ARG_FROM } },
        { &strata_concat, 1, { STRATA__ARG_FROM } },
};

/* Every built-in loss. */
static const struct strata_loss_ops *const losses[] = {
        &strata_softmax_cross_entropy, &strata_mse, &strata_l1, &strata_huber,
        &strata_bce_with_logits, &strata_given_gradient,
};

const struct strata__module_entry *strata__module_entry(const char *name)
{
        for (size_t i = 0; name && i < sizeof(modules) / sizeof(modules[0]); i++)
                if (!strcmp(modules[i].ops->name, name))
                        return &modules[i];
        return NULL;
}

const struct strata_module_ops *strata_module_ops_by_name(const char *name)
{
        const struct strata__module_entry *e = strata__module_entry(name);

        return e ? e->ops : NULL;
}

const struct strata_loss_ops *strata_loss_ops_by_name(const char *name)
{
        for (size_t i = 0; name && i < sizeof(losses) / sizeof(losses[0]); i++)
                if (!strcmp(losses[i]->name, name))
                        return losses[i];
        return NULL;
}

int strata__model_batch_norm(const struct strata_model *m)
{
        for (int i = 0; i < m->nmodules; i++)
                if (m->modules[i].ops == &strata_batchnorm1d)
                        return 1;
        return 0;
}
