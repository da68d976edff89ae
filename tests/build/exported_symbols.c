/*
 * libstrata.so exports exactly the public API: the symbols in exported_symbols.txt, each of
 * them declared in a public header; nothing internal (strata__*), no CUDA helper, and no
 * dependency's name (libxsmm's, a BLAS's): an embedded runtime must not capture its host's
 * BLAS by interposition.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SYMS 1024

static int read_list(const char *cmd, char names[][64], int max)
{
        FILE *p = popen(cmd, "r");
        char line[256];
        int n = 0;

        cr_assert_not_null(p, "%s", cmd);
        while (fgets(line, sizeof(line), p)) {
                line[strcspn(line, "\n")] = '\0';
                if (!line[0] || line[0] == '#')
                        continue;
                cr_assert_lt(n, max);
                cr_assert_lt(strlen(line), 64, "%s", line);
                strcpy(names[n++], line);
        }
        cr_assert_eq(pclose(p), 0, "%s", cmd);
        return n;
}

static int has(char names[][64], int n, const char *s)
{
        for (int i = 0; i < n; i++)
                if (!strcmp(names[i], s))
                        return 1;
        return 0;
}

static char exported[MAX_SYMS][64], allowed[MAX_SYMS][64];


Test(exported_symbols, only_the_public_api_is_exported)
{
        int ne, na;

        if (STRATA_SAN[0] != '\0')
                cr_skip("checked in the plain build, not under " STRATA_SAN);
        /* Version nodes (STRATA_0) are absolute symbols, not functions: left out; names lose
         * their version suffix (@@STRATA_0). */
        ne = read_list("nm -D --defined-only " STRATA_BUILD_DIR "/libstrata.so | "
                       "awk '$2 != \"A\" {print $3}' | sed 's/@.*//' | sort",
                       exported, MAX_SYMS);
        na = read_list("cat " STRATA_SOURCE_DIR "/tests/build/exported_symbols.txt", allowed,
                       MAX_SYMS);
        cr_assert_gt(na, 100);
        for (int i = 0; i < ne; i++)
                cr_expect(has(allowed, na, exported[i]), "exported but not public: %s",
                          exported[i]);
        for (int i = 0; i < na; i++)
                cr_expect(has(exported, ne, allowed[i]), "public but not exported: %s",
                          allowed[i]);
        cr_assert_eq(ne, na);
}

Test(exported_symbols, every_allowed_symbol_is_declared_in_a_public_header)
{
        static char cmd[1 << 17];
        int na = read_list("cat " STRATA_SOURCE_DIR "/tests/build/exported_symbols.txt", allowed,
                           MAX_SYMS);

        for (int i = 0; i < na; i++) {
                snprintf(cmd, sizeof(cmd), "grep -qE '\\b%s(\\(|;)' %s/include/strata/*.h", allowed[i],
                         STRATA_SOURCE_DIR);
                cr_expect_eq(system(cmd), 0, "%s is not declared in include/strata/", allowed[i]);
        }
}

/* No BLAS or libxsmm name is defined in the library's dynamic symbol table. */
Test(exported_symbols, no_dependency_symbol_is_exported)
{
        int ne;

        if (STRATA_SAN[0] != '\0')
                cr_skip("checked in the plain build, not under " STRATA_SAN);
        ne = read_list("nm -D --defined-only " STRATA_BUILD_DIR "/libstrata.so | "
                       "awk '$2 != \"A\" {print $3}' | sed 's/@.*//' | "
                       "grep -iE 'blas|gemm|gemv|xsmm|^openblas' || true", exported, MAX_SYMS);
        for (int i = 0; i < ne; i++)
                cr_expect(!strncmp(exported[i], "strata_", 7), "a dependency's name is "
                          "exported: %s", exported[i]);
}
