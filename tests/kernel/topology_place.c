/* Topology from hwloc and the placement of devices on cores. */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "kernel/topology.h"

Test(topology_place, reads_machine)
{
        struct strata__topology t;

        cr_assert_eq(strata__topology_read(&t), STRATA_OK, "%s", strata_last_error());
        cr_assert_geq(t.cores, 1);
        cr_assert_geq(t.pus, t.cores);
        cr_assert_geq(t.numa_nodes, 1);
        cr_assert_geq(t.packages, 1);
        cr_assert_eq(strata__topology_read(NULL), STRATA_EINVAL);
}

Test(topology_place, distinct_cores_then_shared)
{
        struct strata__topology t;
        struct strata__placement p[64];
        char line[128];
        int n;

        cr_assert_eq(strata__topology_read(&t), STRATA_OK);
        n = t.cores < 64 ? t.cores : 64;
        cr_assert_eq(strata__topology_place(n, p), STRATA_OK);
        for (int i = 0; i < n; i++) {
                cr_assert_eq(p[i].device, i);
                cr_assert_not(p[i].shared);
                for (int j = 0; j < i; j++)
                        cr_assert_neq(p[i].core, p[j].core, "two devices on core %d", p[i].core);
        }
        if (n < 64) {
                cr_assert_eq(strata__topology_place(n + 1, p), STRATA_OK);
                cr_assert(p[n].shared, "more devices than cores must be marked shared");
                strata__placement_describe(&p[n], line, sizeof(line));
                cr_assert_not_null(strstr(line, "oversubscribed"), "%s", line);
        }
        cr_assert_eq(strata__topology_place(0, p), STRATA_EINVAL);
        cr_assert_eq(strata__topology_place(65, p), STRATA_EINVAL);
}

/* Device 0 is "near" the last core's PU, device 1 names a PU the machine lacks. */
static int last_pu;

static int near_last(int dev, int *pus, int max)
{
        if (max < 1)
                return 0;
        pus[0] = dev == 0 ? last_pu : 1 << 20;
        return 1;
}

Test(topology_place, devices_go_near_their_local_cores)
{
        struct strata__topology t;
        struct strata__placement base[64], near[64];
        int n;

        cr_assert_eq(strata__topology_read(&t), STRATA_OK);
        n = t.cores < 64 ? t.cores : 64;
        cr_assert_eq(strata__topology_place(n, base), STRATA_OK);
        cr_assert_eq(strata__topology_place_near(n, NULL, near), STRATA_OK);
        cr_assert_eq(memcmp(base, near, sizeof(base[0]) * (size_t)n), 0,
                     "no preference must be the usual placement");
        last_pu = base[n - 1].pu;
        cr_assert_eq(strata__topology_place_near(n, near_last, near), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(near[0].core, base[n - 1].core, "device 0 not on the core of PU %d",
                     last_pu);
        /* The others fill the remaining cores in the usual order, each core once. */
        for (int i = 0; i < n; i++) {
                cr_assert_not(near[i].shared);
                for (int j = 0; j < i; j++)
                        cr_assert_neq(near[i].core, near[j].core, "two devices on core %d",
                                      near[i].core);
        }
        if (n > 1)
                cr_assert_eq(near[1].core, base[0].core);
        cr_assert_eq(strata__topology_place_near(0, near_last, near), STRATA_EINVAL);
}
