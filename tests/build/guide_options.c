/*
 * The guide's option list and `strata-train --help` agree (issue 58, item 6): every option
 * --help names is in docs/guide.md's "### Options" section, and every option that section
 * names is one --help knows. An option added to the tool fails this test until the guide
 * says what it does.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* The output of @p cmd into @p out; its exit status. */
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

#define HELP_OPTS STRATA_BUILD_DIR "/bin/strata-train --help | grep -o -- '--[a-z][a-z0-9-]*' " \
                  "| sort -u"
#define GUIDE_OPTS "awk '/^### Options/ { on = 1; next } on && /^##/ { exit } on' "            \
                   STRATA_SOURCE_DIR "/docs/guide.md | grep -o -- '--[a-z][a-z0-9-]*' | sort -u"

Test(guide_options, help_and_the_guide_name_the_same_options)
{
        static char help[8192], guide[8192], diff[8192];

        cr_assert_eq(run(HELP_OPTS, help, sizeof(help)), 0);
        cr_assert_eq(run(GUIDE_OPTS, guide, sizeof(guide)), 0);
        /* Both lists are real: dozens of options each. */
        cr_assert_gt(strlen(help), 400, "--help: %s", help);
        cr_assert_gt(strlen(guide), 400, "guide: %s", guide);
        cr_assert_eq(run("bash -c \"comm -23 <(" HELP_OPTS ") <(" GUIDE_OPTS ") | tr '\\n' ' '\"",
                         diff, sizeof(diff)), 0);
        cr_expect_str_empty(diff, "--help names these, docs/guide.md's option list does not: %s",
                            diff);
        cr_assert_eq(run("bash -c \"comm -13 <(" HELP_OPTS ") <(" GUIDE_OPTS ") | tr '\\n' ' '\"",
                         diff, sizeof(diff)), 0);
        cr_expect_str_empty(diff, "docs/guide.md's option list names these, --help does not: %s",
                            diff);
}
