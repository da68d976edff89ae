/*
 * Processes (the public strata/process.h): what the launcher (mpirun, srun, a PMI launcher,
 * torchrun) says about this process, and strata_spawn(), which forks the processes of a spawn
 * job before any thread exists, over one anonymous shared region mapped before the fork. The
 * parent watches: a process that exits non-zero or is killed is reported by rank, the others
 * are told through the region and killed if they have not stopped a second later. While it
 * watches, the stop signals the parent receives (SIGINT, SIGTERM, SIGUSR1, SIGUSR2) are
 * forwarded to every process, as mpirun does, so a job stops as a single process would.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "strata/process.h"
#include "strata/status.h"
#include "base/base.h"
#include "strategy/process/process.h"

/* One launcher's variables: rank, size, local rank, local size (NULL: not given). */
struct source {
        const char *name, *rank, *size, *local_rank, *local_size;
};

static const struct source sources[] = {
        { "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_COMM_WORLD_LOCAL_SIZE" },
        { "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
        { "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" },
        { "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE" },
};

/* *v = the variable's value in [lo, hi]; absent leaves *v. Slurm's counts may read "4(x2)". */
static int number(const char *var, int lo, int hi, int *v)
{
        const char *s = var ? getenv(var) : NULL;
        char *end;
        long x;

        if (!s)
                return STRATA_OK;
        errno = 0;
        x = strtol(s, &end, 10);
        if (end == s || errno || (*end && *end != '(') || x < lo || x > hi)
                return strata__fail(STRATA_EINVAL, "launcher variable %s='%.40s' is not a number "
                                                   "in [%d, %d]", var, s, lo, hi);
        *v = (int)x;
        return STRATA_OK;
}

int strata_launch_detect(struct strata_launch *out)
{
        struct strata_launch l = { 0, 1, 0, 1, "none" };

        if (!out)
                return strata__fail(STRATA_EINVAL, "launch detect: out is NULL");
        for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
                const struct source *s = &sources[i];

                if (!getenv(s->rank) || !getenv(s->size))
                        continue;
                STRATA_TRY(number(s->size, 1, 1 << 24, &l.size));
                STRATA_TRY(number(s->rank, 0, l.size - 1, &l.rank));
                l.local_size = l.size; /* not given: any of them may share this host */
                STRATA_TRY(number(s->local_size, 1, l.size, &l.local_size));
                STRATA_TRY(number(s->local_rank, 0, l.local_size - 1, &l.local_rank));
                l.launcher = s->name;
                break;
        }
        *out = l;
        return STRATA_OK;
}

/* ---- strata_spawn(): the supervisor ---- */

#define RESULT_MAX ((size_t)64 << 10)

/* What rank 0 hands back, after the link's part of the region. */
struct result {
        size_t bytes;
        unsigned char data[RESULT_MAX];
};

/* In a spawned process: where the job's region is and who this process is. */
static struct strata__shm_spawn_where self;
static struct result *self_result;

/* The region: the link's part, on whole cache lines, then rank 0's result. */
static size_t link_bytes(int n)
{
        return (strata__shm_spawn_bytes(n) + 63) / 64 * 64;
}

static struct result *result_of(void *region, int n)
{
        return (struct result *)((char *)region + link_bytes(n));
}

static size_t region_bytes(int n)
{
        return link_bytes(n) + sizeof(struct result);
}

static void describe(int st, int rank, char *why, size_t n)
{
        if (WIFSIGNALED(st))
                snprintf(why, n, "rank %d was killed by signal %d (%s)", rank, WTERMSIG(st),
                         strsignal(WTERMSIG(st)));
        else
                snprintf(why, n, "rank %d exited with status %d", rank, WEXITSTATUS(st));
}

/* ---- the stop signals, forwarded ---- */

static const int forwarded[] = { SIGINT, SIGTERM, SIGUSR1, SIGUSR2 };
#define NFORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

static volatile sig_atomic_t pending[NFORWARDED]; /* received, not yet forwarded */

static void note(int sig)
{
        for (size_t i = 0; i < NFORWARDED; i++)
                if (forwarded[i] == sig)
                        pending[i] = 1;
}

/* The stop signals' set: blocked while the processes are forked, so each starts as called. */
static sigset_t forwarded_set(void)
{
        sigset_t set;

        sigemptyset(&set);
        for (size_t i = 0; i < NFORWARDED; i++)
                sigaddset(&set, forwarded[i]);
        return set;
}

/* In the parent, after the forks: note the stop signals (@p old keeps the caller's actions). */
static void catch_forwarded(struct sigaction *old)
{
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = note; /* no SA_RESTART: a wait is interrupted */
        for (size_t i = 0; i < NFORWARDED; i++) {
                pending[i] = 0;
                sigaction(forwarded[i], &sa, &old[i]);
        }
}

static void restore_forwarded(const struct sigaction *old)
{
        for (size_t i = 0; i < NFORWARDED; i++)
                sigaction(forwarded[i], &old[i], NULL);
}

/* Every signal noted since the last call, to every process still running. */
static void forward(const pid_t *pid, int n)
{
        for (size_t i = 0; i < NFORWARDED; i++) {
                if (!pending[i])
                        continue;
                pending[i] = 0;
                for (int k = 0; k < n; k++)
                        if (pid[k] > 0)
                                kill(pid[k], forwarded[i]);
        }
}

static void child(int rank, int n, strata_spawn_fn fn, void *arg, void *region, pid_t parent,
                  const sigset_t *mask)
{
        int rc;

        sigprocmask(SIG_SETMASK, mask, NULL); /* the caller's mask: the stop signals arrive */
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if the parent dies */
        if (getppid() != parent)
                _exit(128 + SIGKILL);
        self = (struct strata__shm_spawn_where){ region, rank, n, 0, 0 };
        self_result = result_of(region, n);
        rc = fn(rank, n, arg);
        fflush(NULL);
        _exit(rc < 0 || rc > 255 ? 1 : rc);
}

int strata_spawn(int nprocs, strata_spawn_fn fn, void *arg, double timeout_s, void *ret,
                 size_t ret_bytes, struct strata_spawn_result *res)
{
        pid_t pid[STRATA__SPAWN_MAX], parent = getpid();
        struct strata_spawn_result r = { .failed_rank = -1 };
        struct sigaction old_actions[NFORWARDED];
        sigset_t stops = forwarded_set(), mask;
        int alive = 0, live;
        double kill_at = 0.0;
        void *region;

        if (nprocs < 2 || nprocs > STRATA__SPAWN_MAX || !fn || (ret_bytes && !ret))
                return strata__fail(STRATA_EINVAL, "spawn: %d processes (2..%d), a function "
                                                   "and a result buffer when ret_bytes > 0",
                                    nprocs, STRATA__SPAWN_MAX);
        if (self.region)
                return strata__fail(STRATA_EINVAL, "spawn: already in a spawned process");
        if ((live = strata__workers_running()) != 0)
                return strata__fail(STRATA_EINVAL, "spawn: %d runtime(s) of this process have "
                                                   "device threads running; call strata_spawn() "
                                                   "before strata_init() (fork copies only the "
                                                   "calling thread, not theirs)", live);
        timeout_s = timeout_s > 0.0 ? timeout_s : 300.0;
        region = mmap(NULL, region_bytes(nprocs), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED)
                return strata__fail(STRATA_ESYS, "spawn: cannot map %zu shared bytes",
                                    region_bytes(nprocs));
        fflush(NULL); /* nothing buffered is written twice */
        sigprocmask(SIG_BLOCK, &stops, &mask);
        for (int i = 0; i < nprocs; i++) {
                pid[i] = fork();
                if (pid[i] == 0)
                        child(i, nprocs, fn, arg, region, parent, &mask);
                if (pid[i] < 0) {
                        sigprocmask(SIG_SETMASK, &mask, NULL);
                        strata__shm_spawn_abort(region, -1, "spawn: fork failed");
                        for (int k = 0; k < i; k++)
                                kill(pid[k], SIGKILL);
                        for (int k = 0; k < i; k++)
                                waitpid(pid[k], NULL, 0);
                        munmap(region, region_bytes(nprocs));
                        return strata__fail(STRATA_ESYS, "spawn: fork of rank %d failed", i);
                }
                alive++;
        }
        catch_forwarded(old_actions);
        sigprocmask(SIG_SETMASK, &mask, NULL);
        while (alive) {
                int st;
                pid_t w;

                forward(pid, nprocs);
                w = waitpid(-1, &st, WNOHANG);

                if (w > 0) {
                        for (int i = 0; i < nprocs; i++) {
                                if (pid[i] != w)
                                        continue;
                                pid[i] = 0;
                                alive--;
                                if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || r.failed_rank >= 0)
                                        break;
                                r.failed_rank = i;
                                r.status = WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                                                           : WEXITSTATUS(st);
                                describe(st, i, r.why, sizeof(r.why));
                                strata__shm_spawn_abort(region, i, r.why);
                                kill_at = strata__now_s() + 1.0;
                        }
                        continue;
                }
                if (w < 0 && errno == EINTR)
                        continue; /* a signal: forwarded at the top */
                if (w < 0)
                        break; /* no child left to wait for */
                if (kill_at > 0.0 && strata__now_s() > kill_at) {
                        for (int i = 0; i < nprocs; i++)
                                if (pid[i] > 0)
                                        kill(pid[i], SIGKILL);
                        kill_at = strata__now_s() + timeout_s; /* reap what was killed */
                }
                usleep(kill_at > 0.0 ? 2000 : 10000); /* a signal cuts it short */
        }
        restore_forwarded(old_actions);
        {
                /* A process that saw another hang names it: that is the culprit to report. */
                char why[256];
                int culprit = strata__shm_spawn_aborted(region, why, sizeof(why));

                if (r.failed_rank >= 0 && culprit >= 0 && culprit != r.failed_rank) {
                        r.failed_rank = culprit;
                        snprintf(r.why, sizeof(r.why), "%s", why);
                }
        }
        r.bytes = result_of(region, nprocs)->bytes;
        if (ret_bytes)
                memcpy(ret, result_of(region, nprocs)->data, r.bytes < ret_bytes ? r.bytes
                                                                                   : ret_bytes);
        munmap(region, region_bytes(nprocs));
        if (res)
                *res = r;
        if (r.failed_rank >= 0)
                return strata__fail(STRATA_EABORTED, "spawn: %s", r.why);
        return STRATA_OK;
}

int strata_spawn_return(const void *data, size_t bytes)
{
        if (!self.region || !self_result)
                return strata__fail(STRATA_EINVAL, "spawn return: not in a spawned process");
        if (bytes > RESULT_MAX || (bytes && !data))
                return strata__fail(STRATA_EINVAL, "spawn return: %zu bytes (at most %zu)",
                                    bytes, RESULT_MAX);
        if (self.rank == 0) {
                memcpy(self_result->data, data, bytes);
                self_result->bytes = bytes;
        }
        return STRATA_OK;
}

const struct strata__shm_spawn_where *strata__spawned(void)
{
        return &self;
}
