/*
 * tools/hosts-apart.sh, the hosts of the tests and benchmarks across network namespaces
 * (issue 46, item 2): each process it starts runs in a namespace of its own, on its own
 * address; it removes every namespace it made however its command ends, and those a killed
 * run of it left; it refuses a bad usage (exit 2) and says why it cannot run (exit 77: not
 * root, no ip), making nothing.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define HOSTS STRATA_SOURCE_DIR "/tools/hosts-apart.sh"
#define OURS "ip netns list | grep -E '^strata-[0-9]+-(sw|h[0-9]+)' | sort"

/* Host 2 answers one TCP connection on 10.251.0.3 with its peer's address; host 0 asks. */
#define SERVE                                                                                      \
        "/usr/bin/python3 -c \"import socket; s = socket.create_server((\\\"10.251.0.3\\\", "      \
        "5999)); c, a = s.accept(); c.sendall(a[0].encode())\""
#define CONNECT                                                                                    \
        "/usr/bin/python3 -c \"import socket, time\nfor i in range(50):\n  try:\n    "             \
        "c = socket.create_connection((\\\"10.251.0.3\\\", 5999)); break\n  except "               \
        "OSError: time.sleep(0.1)\nprint(\\\"from\\\", c.recv(64).decode())\""

static char out[1 << 15];

/* Skips the test where the script cannot make namespaces, with its reason. */
static void need_namespaces(void)
{
        if (cli_sh(HOSTS " -- true 2>&1", out, sizeof(out)) == 77)
                cr_skip_test("%s", out);
}

/* The namespaces of this script now (none when every run cleaned up). */
static void ours(char *buf, size_t n)
{
        cli_sh(OURS, buf, n);
}

Test(hosts_apart_script, processes_run_on_hosts_apart, .timeout = 120)
{
        char a[64], b[64], ns0[64], self[64];

        cli_serial_jobs();
        need_namespaces();
        cr_assert_eq(cli_sh(HOSTS " -m -- -np 2 sh -c 'echo $OMPI_COMM_WORLD_RANK "
                            "$(readlink /proc/self/ns/net) $(ip -4 -o addr show eth0 | "
                            "cut -d\" \" -f7)' 2>&1 | sort", out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(sscanf(out, "0 %63s 10.251.0.1/24\n1 %63s 10.251.0.2/24", a, b), 2,
                     "rank 0 on host 0, rank 1 on host 1, one address each:\n%s", out);
        cr_assert_str_neq(a, b, "both processes in one namespace: %s", out);
        cr_assert_eq(cli_sh("readlink /proc/self/ns/net", self, sizeof(self)), 0);
        self[strcspn(self, "\n")] = '\0';
        cr_assert(strcmp(a, self) && strcmp(b, self), "a process in the test's namespace: %s",
                  out);
        /* Three hosts, each its own namespace; host 0 reaches host 2 over the bridge (TCP). */
        cr_assert_eq(cli_sh(HOSTS " -n 3 -- sh -c 'for h in $HOSTS_NAMES; do ip netns exec $h "
                            "readlink /proc/self/ns/net; done | sort -u | wc -l; set -- "
                            "$HOSTS_NAMES; ip netns exec $3 " SERVE " & ip netns exec $1 "
                            CONNECT "; wait' 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_assert(sscanf(out, "%63s", ns0) == 1 && !strcmp(ns0, "3") &&
                  strstr(out, "from 10.251.0.1"), "3 namespaces, host 2 reached: %s", out);
        ours(out, sizeof(out));
        cr_assert_str_empty(out, "namespaces left: %s", out);
}

Test(hosts_apart_script, namespaces_removed_however_it_ends, .timeout = 120)
{
        char pids[128], dir[96];
        int script = 0, sleeper = 0;

        cli_serial_jobs();
        need_namespaces();
        /* The command fails: its status comes back, nothing is left. */
        cr_assert_eq(cli_sh(HOSTS " -- sh -c 'exit 3' 2>&1", out, sizeof(out)), 3, "%s", out);
        ours(out, sizeof(out));
        cr_assert_str_empty(out, "left after a failed command: %s", out);
        /* The script killed (no trap runs): its namespaces stay until the next run. */
        unlink("/tmp/strata-hosts-test.pids");
        cr_assert_eq(cli_sh("(" HOSTS " -- sh -c 'echo $PPID $$ > /tmp/strata-hosts-test.pids; "
                            "exec sleep 60' >/dev/null 2>&1 &) ; for i in $(seq 100); do "
                            "[ -s /tmp/strata-hosts-test.pids ] && break; sleep 0.1; done; "
                            "cat /tmp/strata-hosts-test.pids", pids, sizeof(pids)), 0);
        cr_assert_eq(sscanf(pids, "%d %d", &script, &sleeper), 2, "%s", pids);
        kill(script, SIGKILL);
        kill(sleeper, SIGKILL);
        unlink("/tmp/strata-hosts-test.pids");
        ours(out, sizeof(out));
        cr_assert_not_null(strstr(out, "-h1"), "the killed run's namespaces: %s", out);
        snprintf(dir, sizeof(dir), "ls -d /tmp/strata-hosts-%d-* 2>/dev/null", script);
        cr_assert_eq(cli_sh(dir, out, sizeof(out)), 0, "the killed run's folder: %s", out);
        cr_assert_eq(cli_sh(HOSTS " -- true 2>&1", out, sizeof(out)), 0, "%s", out);
        ours(out, sizeof(out));
        cr_assert_str_empty(out, "a killed run's namespaces left: %s", out);
        cr_assert_neq(cli_sh(dir, out, sizeof(out)), 0, "a killed run's folder left: %s", out);
}

Test(hosts_apart_script, bad_usage_refused, .timeout = 30)
{
        static const char *const bad[] = { "-n 1 -- true", "-n 17 -- true", "-n x -- true",
                                           "-d 1ms -- true", "--", "-q -- true", "" };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char cmd[256];

                snprintf(cmd, sizeof(cmd), HOSTS " %s 2>&1", bad[i]);
                cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "'%s': %s", bad[i], out);
                cr_assert_not_null(strstr(out, "usage:"), "'%s': %s", bad[i], out);
        }
}

/* Not root: exit 77 with the reason, before anything is made. */
Test(hosts_apart_script, cannot_make_namespaces_says_why, .timeout = 30)
{
        if (cli_sh("command -v setpriv", out, sizeof(out)) != 0 || getuid() != 0)
                cr_skip_test("setpriv or root missing: the unprivileged run is not tried");
        cr_assert_eq(cli_sh("setpriv --reuid=65534 --regid=65534 --clear-groups " HOSTS
                            " -- true 2>&1", out, sizeof(out)), 77, "%s", out);
        cr_assert_not_null(strstr(out, "cannot make network namespaces here: not root"), "%s",
                           out);
}

/* An mpirun past HOSTS_LIMIT is killed with what it left, tried once more, and fails 124. */
Test(hosts_apart_script, a_run_past_its_limit_is_killed_and_tried_once_more, .timeout = 120)
{
        cli_serial_jobs();
        need_namespaces();
        cr_assert_eq(cli_sh("HOSTS_LIMIT=3 " HOSTS " -m -- -np 2 sleep 60 2>&1", out,
                            sizeof(out)), 124, "%s", out);
        cr_assert(strstr(out, "did not end in 3 s"), "%s", out);
        cr_assert_null(strstr(strstr(out, "did not end in 3 s") + 1, "did not end in 3 s"),
                       "one retry only: %s", out);
        cr_assert_eq(cli_sh("pgrep -f 'sleep 6[0]'", out, sizeof(out)), 1, "left: %s", out);
        ours(out, sizeof(out));
        cr_assert_str_empty(out, "namespaces left: %s", out);
}
