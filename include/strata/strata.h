/* Strata: the umbrella header. Include this one; the others are its concepts. */
#ifndef STRATA_STRATA_H
#define STRATA_STRATA_H

#include "strata/version.h"
#include "strata/status.h"
#include "strata/limits.h"
#include "strata/arena.h"
#include "strata/lifecycle.h"
#include "strata/tensor.h"
#include "strata/device.h"
#include "strata/nn.h"
#include "strata/data.h"
#include "strata/runtime.h"
#include "strata/group.h"
#include "strata/comm.h"
#include "strata/checkpoint.h"
#include "strata/process.h"
#include "strata/trace.h"

#endif /* STRATA_STRATA_H */
