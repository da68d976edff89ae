/* Gradients against central differences, for the modules' gradient-check tests. */
#ifndef STRATA_TESTS_FDCHECK_H
#define STRATA_TESTS_FDCHECK_H

#include <stddef.h>

/**
 * Each of @p n values @p v moved by +-@p h: (f(v + h) - f(v - h)) / 2h of @p objective(@p ctx)
 * must equal @p analytic within @p tol * (1 + |numeric|); fails the test naming @p who,
 * @p what and the index otherwise. @p v is left as it was.
 */
void fd_check(double (*objective)(void *), void *ctx, float *v, const float *analytic, size_t n,
              float h, double tol, const char *who, const char *what);

#endif
