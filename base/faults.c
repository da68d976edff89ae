/* Failure injection's pool and checks (base/faults.h); compiled only with STRATA_TESTING. */
#ifdef STRATA_TESTING
#include <stdatomic.h>
#include <stddef.h>

#include "base/base.h"
#include "base/faults.h"

/*
 * Faults objects armed at once in one test process (runtimes and communicators): handed out
 * in turn, the oldest taken again after POOL more, so a test may arm as many as it creates.
 */
#define POOL 16

struct strata__faults *strata__faults_take(void)
{
        static struct strata__faults pool[POOL];
        static atomic_uint next;
        unsigned i = atomic_fetch_add(&next, 1u) % POOL;

        pool[i] = (struct strata__faults){ .who = -1 };
        return &pool[i];
}

int strata__fault(const struct strata__faults *f, int who, int point, const char *kind,
                  const char *at, const char *(*names)(int point))
{
        if (!f || f->who != who || f->point != point)
                return STRATA_OK;
        if (names)
                return strata__fail(f->status, "%s %d: injected failure %s%s", kind, who, at,
                                    names(point));
        return strata__fail(f->status, "%s %d: injected failure %s%d", kind, who, at, point);
}

int strata__fault_nonfinite(struct strata__faults *f, int dev)
{
        if (!f || !f->nonfinite[dev])
                return 0;
        f->nonfinite[dev] = 0;
        return 1;
}
#endif /* STRATA_TESTING */
