/*
 * A fresh clone runs every `make bench-*` (issue 58's blocker): nothing the build, the tools
 * or CI run reads outside the repository (the peers once lived in ../shared/anchors), every
 * peer a benchmark script names is in tools/peers/, and those peers compile.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* The output of `sh -c cmd` (at most @p cap - 1 bytes) and its exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
        size_t n = 0, got;
        FILE *p = popen(cmd, "r");

        cr_assert_not_null(p, "%s", cmd);
        while (n + 1 < cap && (got = fread(out + n, 1, cap - 1 - n, p)) > 0)
                n += got;
        out[n] = '\0';
        return pclose(p);
}

Test(self_contained, nothing_in_the_build_tools_or_ci_reads_outside_the_repository)
{
        static char out[8192];
        int rc;

        /* grep answers 1 when nothing matched: the pattern is absent everywhere. */
        rc = run("cd " STRATA_SOURCE_DIR " && grep -rIn -e '\\.\\./shared' -e 'shared/anchors' "
                 "Makefile tools .ci 2>&1", out, sizeof(out));
        cr_expect_eq(WEXITSTATUS(rc), 1,
                     "outside paths (../shared) in Makefile, tools/ or .ci:\n%s", out);
        /* The same grep finds what is there: the check above can fail. */
        rc = run("cd " STRATA_SOURCE_DIR " && grep -rIl -e 'tools/peers' Makefile tools", out,
                 sizeof(out));
        cr_expect_eq(WEXITSTATUS(rc), 0, "the grep of this test finds nothing at all");
}

Test(self_contained, every_peer_a_benchmark_names_is_in_tools_peers)
{
        static char out[8192];
        int rc;

        rc = run("cd " STRATA_SOURCE_DIR " && names=$(grep -ho '$peers/[A-Za-z0-9_.]*' "
                 "tools/*.sh | sort -u) && [ -n \"$names\" ] && for n in $names; do "
                 "f=tools/peers/${n#\\$peers/}; [ -f \"$f\" ] || echo \"missing $f\"; done",
                 out, sizeof(out));
        cr_expect_eq(WEXITSTATUS(rc), 0, "no script names a peer: %s", out);
        cr_expect_str_empty(out, "%s", out);
}

Test(self_contained, the_peers_compile)
{
        static char out[8192];
        int rc;

        rc = run("cd " STRATA_SOURCE_DIR "/tools/peers && cc -std=c11 -Wall -Wextra -Werror "
                 "-pthread -fsyntax-only memband.c 2>&1 && for f in *.py; do "
                 "python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' \"$f\" "
                 "|| exit 1; done 2>&1", out, sizeof(out));
        cr_expect_eq(rc, 0, "a peer in tools/peers does not compile:\n%s", out);
}
