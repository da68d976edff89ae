/* The device drivers compiled into this library (internal). */
#ifndef STRATA_DRIVERS_DRIVERS_H
#define STRATA_DRIVERS_DRIVERS_H

#include "strata/device.h"

extern const struct strata_device_ops strata__cpu_driver;

#endif /* STRATA_DRIVERS_DRIVERS_H */
