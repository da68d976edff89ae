/*
 * The built-in modules and losses by name (internal): one table of each in nn/registry.c.
 * A module's entry is its ops table and the arguments the model line (nn/model_line.c) reads
 * for it, so adding a built-in module is its file, one entry here and its tests.
 */
#ifndef STRATA_NN_REGISTRY_H
#define STRATA_NN_REGISTRY_H

#include "strata/nn.h"

/**
 * What one model-line argument sets in struct strata_module (its key: the model line's
 * names). STRATA__ARG_NONE, 0, ends an entry's list, so an entry that lists none takes none.
 */
enum strata__arg {
        STRATA__ARG_NONE = 0,
        STRATA__ARG_OUT,      /**< out: a positive count */
        STRATA__ARG_KERNEL,   /**< kernel: a count or counts like 3x5 */
        STRATA__ARG_STRIDE,   /**< stride */
        STRATA__ARG_PADDING,  /**< padding: counts, or same */
        STRATA__ARG_DILATION, /**< dilation */
        STRATA__ARG_SCALE,    /**< scale (Upsample) */
        STRATA__ARG_MODE,     /**< mode: nearest, linear, bilinear, trilinear */
        STRATA__ARG_PMODE,    /**< padding_mode: zeros, circular, reflect, replicate */
        STRATA__ARG_BIAS,     /**< bias: true or false */
        STRATA__ARG_P,        /**< p (Dropout) */
        STRATA__ARG_EPS,      /**< eps */
        STRATA__ARG_MOMENTUM, /**< momentum (BatchNorm's decay) */
        STRATA__ARG_SLOPE,    /**< slope (LeakyReLU) */
        STRATA__ARG_FROM,     /**< from: the earlier output a merge module reads */
        STRATA__ARG_BRANCH,   /**< from= on any other module: a branch (never listed) */
        STRATA__ARG_MODES,    /**< modes: a positive count (SpectralConv1d) */
        STRATA__ARG_MODES1,   /**< modes1: a positive count (SpectralConv2d, along H) */
        STRATA__ARG_MODES2,   /**< modes2: a positive count (SpectralConv2d, along W) */
        STRATA__ARG_MODES3,   /**< modes3: a positive count (SpectralConv3d, along W) */
        STRATA__ARG_HEADS,    /**< heads (mha): a positive count */
        STRATA__ARG_CAUSAL,   /**< causal (mha): 0 or 1 */
        STRATA__ARG_DIMS,     /**< dims (norms): the sample's last dimensions they normalise */
        STRATA__ARG_SIDE,     /**< side (gather): src or dst */
        STRATA__ARG_REDUCE,   /**< reduce (scatter): sum or mean */
        STRATA__ARG_COUNT
};

/** Most arguments one module takes, STRATA__ARG_NONE after the last. */
#define STRATA__ARGS_MAX 7

/** A built-in module: its ops table and the arguments the model line takes for it. */
struct strata__module_entry {
        const struct strata_module_ops *ops;
        int positional;                            /**< how many of args go without a key */
        enum strata__arg args[STRATA__ARGS_MAX + 1]; /**< its arguments, positional first */
};

/** The built-in module whose ops table is called @p name, or NULL (and for NULL). */
const struct strata__module_entry *strata__module_entry(const char *name);

/**
 * Whether one of @p m's modules is a built-in whose statistics span the batch's rows
 * (BatchNorm1d): without sync_bn each device normalises its own rows.
 */
int strata__model_batch_norm(const struct strata_model *m);

#endif /* STRATA_NN_REGISTRY_H */
