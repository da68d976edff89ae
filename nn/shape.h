/*
 * A module's shape (internal): its sizes and parameter groups for an input width, as its ops
 * declare them, checked before anything is laid out.
 */
#ifndef STRATA_NN_SHAPE_H
#define STRATA_NN_SHAPE_H

#include "strata/nn.h"

/**
 * Module @p l's sizes and parameter groups for input width @p in, from its ops' shape: the
 * ops table complete, a positive output width, the groups named [a-z0-9_]{1,24} (a '.' may
 * join parts: out_proj.weight), f32, shaped to their counts and adding up to the declared
 * trained and running sizes; a module that declares no groups gets the default ones ("param"
 * and "state").
 */
int strata__module_shape(const struct strata_layer *l, int in, struct strata_module_shape *s);

/** Most modules of a model. */
#define STRATA__MODULES_MAX 256

/**
 * Where a walk over a model's modules stands: the next module's input, and every earlier
 * module's output (what a merge module may read: strata_module from).
 */
struct strata__shape_walk {
        int in;                 /**< its input width */
        struct strata_dims dims; /**< its input sample's layout */
        int width[STRATA__MODULES_MAX];              /**< each earlier module's output width */
        struct strata_dims outs[STRATA__MODULES_MAX]; /**< and layout */
        int x_width;            /**< the model's input's (input 0's) */
        struct strata_dims x_dims;
        int ninputs;            /**< the model's inputs (1 when it gives none) */
        int in_width[STRATA_MAX_INPUTS];              /**< each input's width */
        struct strata_dims in_dims[STRATA_MAX_INPUTS]; /**< and layout */
        unsigned char read[STRATA__MODULES_MAX];      /**< module i's output is read */
};

/**
 * Start a walk over @p m's modules at its input: the model's in_dims checked against
 * in_features (a flat vector when it gives none), at most STRATA__MODULES_MAX modules.
 */
int strata__shape_start(const struct strata_model *m, struct strata__shape_walk *w);

/**
 * Module @p i of @p m: @p l becomes a layer with its description, index, input and output
 * widths and layouts, and what its strata_module from names when that is the model's input or
 * an earlier module (nothing laid out); @p s its checked shape, and @p w moves past it.
 */
int strata__shape_step(const struct strata_model *m, int i, struct strata__shape_walk *w,
                       struct strata_layer *l, struct strata_module_shape *s);

/**
 * After the walk's last step: @p m's outputs checked (their modules, losses, weights, the last
 * module among them, a label output's two classes at least) and every module's output read by
 * a later module or an output; the values of a row of predictions (the outputs' widths' sum,
 * or the last module's width) to @p outputs and of a row of float targets (each float
 * output's width and one class index per label output, with several outputs; else as
 * @p outputs) to @p targets, each when not NULL.
 */
int strata__shape_finish(const struct strata_model *m, const struct strata__shape_walk *w,
                         int *outputs, int *targets);

#endif /* STRATA_NN_SHAPE_H */
