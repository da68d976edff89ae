/* Strata version: compile-time macros and a runtime getter. */
#ifndef STRATA_VERSION_H
#define STRATA_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0
/** Version as one comparable integer: major * 10000 + minor * 100 + patch. */
#define STRATA_VERSION_HEX                                                                     \
        (STRATA_VERSION_MAJOR * 10000 + STRATA_VERSION_MINOR * 100 + STRATA_VERSION_PATCH)
#define STRATA_VERSION_STRING "0.1.0"

/**
 * @brief Version of the library actually linked, for checks against STRATA_VERSION_HEX.
 * @return The linked library's STRATA_VERSION_HEX.
 */
unsigned strata_version(void);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_VERSION_H */
