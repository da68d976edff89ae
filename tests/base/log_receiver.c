/*
 * Issue 58, item 14: the library's own lines go to the receiver a host sets with
 * strata_set_log() (warnings and verbose lines, each whole, with its level), and nothing of
 * them to standard error then; strata_set_log(NULL) writes to standard error again.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

static char got[16][1024];
static int levels[16], ngot;

static void receive(enum strata_log_level level, const char *line, void *user)
{
        cr_assert_eq(user, (void *)got, "the receiver's argument");
        if (ngot < 16) {
                snprintf(got[ngot], sizeof(got[0]), "%s", line);
                levels[ngot++] = level;
        }
}

/* Runs a ddp runtime of 4 devices (more than the 2 cores: a warning), verbose. */
static void run_oversubscribed(void)
{
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 4, 0);
        c.verbose = 1;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Standard error into a file while @p fn runs: what was written there. */
static void stderr_of(void (*fn)(void), char *out, size_t n)
{
        FILE *f = tmpfile();
        int saved = dup(2);
        size_t len;

        cr_assert_not_null(f);
        fflush(stderr);
        dup2(fileno(f), 2);
        fn();
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        rewind(f);
        len = fread(out, 1, n - 1, f);
        out[len] = '\0';
        fclose(f);
}

Test(log_receiver, lines_go_to_the_receiver_whole_with_their_level)
{
        static char err[1 << 14];
        int warnings = 0, infos = 0;

        if (sysconf(_SC_NPROCESSORS_ONLN) >= 4)
                cr_skip_test("needs fewer than 4 cores for the oversubscription warning");
        cr_assert_eq(strata_set_log(receive, got), STRATA_OK);
        stderr_of(run_oversubscribed, err, sizeof(err));
        cr_assert_null(strstr(err, "strata: "), "written to stderr with a receiver set: %s",
                       err);
        for (int i = 0; i < ngot; i++) {
                cr_assert_null(strchr(got[i], '\n'), "a line with a newline: %s", got[i]);
                cr_assert_eq(strncmp(got[i], "strata: ", 8), 0, "%s", got[i]);
                if (levels[i] == STRATA_LOG_WARNING &&
                    strstr(got[i], "4 devices share the") && strstr(got[i], "take turns"))
                        warnings++;
                if (levels[i] == STRATA_LOG_INFO && strstr(got[i], "ddp on 4 cpu device(s)"))
                        infos++;
        }
        cr_assert_eq(warnings, 1, "the oversubscription warning, once (%d lines)", ngot);
        cr_assert_eq(infos, 1, "the verbose plan line, once (%d lines)", ngot);
}

Test(log_receiver, null_writes_to_stderr_again)
{
        static char err[1 << 14];

        if (sysconf(_SC_NPROCESSORS_ONLN) >= 4)
                cr_skip_test("needs fewer than 4 cores for the oversubscription warning");
        cr_assert_eq(strata_set_log(receive, got), STRATA_OK);
        cr_assert_eq(strata_set_log(NULL, NULL), STRATA_OK);
        stderr_of(run_oversubscribed, err, sizeof(err));
        cr_assert_eq(ngot, 0, "the receiver was called after it was taken away");
        cr_assert_not_null(strstr(err, "strata: warning: 4 devices share the"), "%s", err);
        cr_assert_not_null(strstr(err, "strata: ddp on 4 cpu device(s)"), "%s", err);
}
