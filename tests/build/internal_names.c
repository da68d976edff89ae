/*
 * Every global symbol the archive defines is either public API (exported_symbols.txt) or
 * marked internal by its name (strata__): a reader of nm, or of a call site, can tell which
 * is which, with no exception (no dependency's name is defined to interpose it).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static char api[1024][64];
static int napi;

static int listed(const char *name)
{
        for (int i = 0; i < napi; i++)
                if (!strcmp(api[i], name))
                        return 1;
        return 0;
}

Test(internal_names, archive_globals_are_public_or_strata__)
{
        char cmd[1024], name[256];
        int globals = 0;
        FILE *p;

        FILE *f;

        if (STRATA_SAN[0] != '\0')
                cr_skip("checked in the plain build, not under " STRATA_SAN " (which adds its "
                        "own globals)");
        f = fopen(STRATA_SOURCE_DIR "/tests/build/exported_symbols.txt", "r");

        cr_assert_not_null(f);
        while (napi < 1024 && fscanf(f, "%63s", api[napi]) == 1)
                napi++;
        fclose(f);
        cr_assert_gt(napi, 100);
        snprintf(cmd, sizeof(cmd), "nm -g --defined-only %s/libstrata.a | "
                 "awk 'NF == 3 {print $3}' | sort -u", STRATA_BUILD_DIR);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        while (fscanf(p, "%255s", name) == 1) {
                int ok = !strncmp(name, "strata__", 8);

                globals++;
                cr_expect(ok || listed(name), "libstrata.a defines %s: neither public API nor "
                          "strata__", name);
        }
        cr_assert_eq(pclose(p), 0, "nm failed");
        cr_assert_gt(globals, 100, "nm listed too few global symbols to be credible");
}
