/*
 * A module's shape (internal): its sizes and parameter groups for an input width, as its ops
 * declare them, checked before anything is laid out.
 */
#ifndef STRATA_NN_SHAPE_H
#define STRATA_NN_SHAPE_H

#include "strata/nn.h"

/**
 * Module @p l's sizes and parameter groups for input width @p in, from its ops' shape: the
 * ops table complete, a positive output width, the groups named [a-z0-9_]{1,24}, f32, shaped
 * to their counts and adding up to the declared trained and running sizes; a module that
 * declares no groups gets the default ones ("param" and "state").
 */
int strata__module_shape(const struct strata_layer *l, int in, struct strata_module_shape *s);

#endif /* STRATA_NN_SHAPE_H */
