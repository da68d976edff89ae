/* The optimizer's rule for the drivers' update kernels (internal to nn/). */
#ifndef STRATA_NN_OPTIM_H
#define STRATA_NN_OPTIM_H

#include <stdint.h>

#include "strata/device.h"
#include "strata/nn.h"

/**
 * The update rule and scalars of optimizer @p o at step @p t (from 1): the one place where
 * hyper-parameters become the numbers every driver's update kernel evaluates, so the CPU, CUDA
 * and simulated drivers agree bitwise on them.
 */
void strata__optim_scalars(const struct strata_optim *o, uint64_t t, struct strata_update *u);

#endif /* STRATA_NN_OPTIM_H */
