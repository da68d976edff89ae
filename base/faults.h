/*
 * Failure injection, for tests only. A runtime and a communicator each point to at most one
 * faults object (NULL: nothing injected). A test arms one through the testing-only calls
 * beside what they arm (strategy/internal.h, drivers/comm_internal.h); the object comes from
 * a small static pool (base/faults.c), never from the arenas, so the memory plan is the same
 * with or without injection.
 *
 * Everything here is compiled only with STRATA_TESTING, which the test suite's archive is
 * built with: without it STRATA__FAULT() is STRATA_OK and STRATA__FAULT_NONFINITE() is 0,
 * so production objects hold no injection code and no symbol of it (tests/build/no_faults.c),
 * and a dispatch takes the same path whether or not a test injects.
 */
#ifndef STRATA_BASE_FAULTS_H
#define STRATA_BASE_FAULTS_H

#include "strata/limits.h"
#include "strata/status.h"

/** What a test asked to fail, and where. */
struct strata__faults {
        int who;      /* the device or rank that fails; -1: none */
        int point;    /* where: a lifecycle event, or a collective's step */
        int status;   /* the error it fails with */
        unsigned char nonfinite[STRATA_MAX_DEVICES]; /* a device's gradients count as not
                                                      * finite at its next step, once */
};

#ifdef STRATA_TESTING

/**
 * A cleared faults object (who -1) from the static pool, which hands its objects out in turn:
 * at most 16 may be armed at once in one process.
 */
struct strata__faults *strata__faults_take(void);

/**
 * @p f's status when @p who reaches @p point, with the message "<kind> <who>: injected failure
 * <at><point name or number>" (@p names, when not NULL, names the points); else STRATA_OK.
 */
int strata__fault(const struct strata__faults *f, int who, int point, const char *kind,
                  const char *at, const char *(*names)(int point));

/** Whether device @p dev's gradients count as not finite now (consumed: once). */
int strata__fault_nonfinite(struct strata__faults *f, int dev);

#define STRATA__FAULT(f, who, point, kind, at, names)                                          \
        strata__fault((f), (who), (point), (kind), (at), (names))
#define STRATA__FAULT_NONFINITE(f, dev) strata__fault_nonfinite((f), (dev))

#else

/* The arguments are evaluated for nothing: no code, and no unused-variable warnings. */
#define STRATA__FAULT(f, who, point, kind, at, names)                                          \
        ((void)(f), (void)(who), (void)(point), STRATA_OK)
#define STRATA__FAULT_NONFINITE(f, dev) ((void)(f), (void)(dev), 0)

#endif /* STRATA_TESTING */

#endif /* STRATA_BASE_FAULTS_H */
