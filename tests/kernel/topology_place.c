/* Topology from hwloc and the placement of devices on cores. */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"

Test(topology_place, reads_machine)
{
        struct strata_topology t;

        cr_assert_eq(strata_topology_read(&t), STRATA_OK, "%s", strata_last_error());
        cr_assert_geq(t.cores, 1);
        cr_assert_geq(t.pus, t.cores);
        cr_assert_geq(t.numa_nodes, 1);
        cr_assert_geq(t.packages, 1);
        cr_assert_eq(strata_topology_read(NULL), STRATA_EINVAL);
}

Test(topology_place, distinct_cores_then_shared)
{
        struct strata_topology t;
        struct strata_placement p[64];
        char line[128];
        int n;

        cr_assert_eq(strata_topology_read(&t), STRATA_OK);
        n = t.cores < 64 ? t.cores : 64;
        cr_assert_eq(strata_topology_place(n, p), STRATA_OK);
        for (int i = 0; i < n; i++) {
                cr_assert_eq(p[i].device, i);
                cr_assert_not(p[i].shared);
                for (int j = 0; j < i; j++)
                        cr_assert_neq(p[i].core, p[j].core, "two devices on core %d", p[i].core);
        }
        if (n < 64) {
                cr_assert_eq(strata_topology_place(n + 1, p), STRATA_OK);
                cr_assert(p[n].shared, "more devices than cores must be marked shared");
                strata_placement_describe(&p[n], line, sizeof(line));
                cr_assert_not_null(strstr(line, "oversubscribed"), "%s", line);
        }
        cr_assert_eq(strata_topology_place(0, p), STRATA_EINVAL);
        cr_assert_eq(strata_topology_place(65, p), STRATA_EINVAL);
}
