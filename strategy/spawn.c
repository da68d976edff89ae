/*
 * The `spawn` strategy (Lightning's DDPSpawn): strata_spawn() forks the processes before any
 * thread exists, over one anonymous shared region mapped before the fork; in each, a runtime
 * with strategy spawn is ddp across the devices of all of them, joined by the region (the
 * spawn link, drivers/shm/procs.c). The parent watches: a process that exits non-zero or is
 * killed is reported by rank, the others are told through the region and killed if they have
 * not stopped a second later. Results equal ddp's with as many devices, bitwise.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "strata/process.h"
#include "strata/status.h"
#include "strategy/multi.h"

#define RESULT_MAX ((size_t)64 << 10)

/* What rank 0 hands back, after the link's part of the region. */
struct result {
        size_t bytes;
        unsigned char data[RESULT_MAX];
};

/* In a spawned process: where the job's region is and who this process is. */
static struct strata__procs_where self;
static struct result *self_result;

/* The region: the link's part, on whole cache lines, then rank 0's result. */
static size_t link_bytes(int n)
{
        return (strata__procs_bytes(n) + 63) / 64 * 64;
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

static void child(int rank, int n, strata_spawn_fn fn, void *arg, void *region, pid_t parent)
{
        int rc;

        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if the parent dies */
        if (getppid() != parent)
                _exit(128 + SIGKILL);
        self = (struct strata__procs_where){ region, rank, n };
        self_result = result_of(region, n);
        rc = fn(rank, n, arg);
        fflush(NULL);
        _exit(rc < 0 || rc > 255 ? 1 : rc);
}

int strata_spawn(int nprocs, strata_spawn_fn fn, void *arg, double timeout_s, void *ret,
                 size_t ret_bytes, struct strata_spawn_result *res)
{
        pid_t pid[STRATA__NET_MAX], parent = getpid();
        struct strata_spawn_result r = { .failed_rank = -1 };
        int alive = 0, live;
        double kill_at = 0.0;
        void *region;

        if (nprocs < 2 || nprocs > STRATA__NET_MAX || !fn || (ret_bytes && !ret))
                return strata__fail(STRATA_EINVAL, "spawn: %d processes (2..%d), a function "
                                                   "and a result buffer when ret_bytes > 0",
                                    nprocs, STRATA__NET_MAX);
        if (self.region)
                return strata__fail(STRATA_EINVAL, "spawn: already in a spawned process");
        if ((live = strata_workers_running()) != 0)
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
        for (int i = 0; i < nprocs; i++) {
                pid[i] = fork();
                if (pid[i] == 0)
                        child(i, nprocs, fn, arg, region, parent);
                if (pid[i] < 0) {
                        strata__procs_abort(region, -1, "spawn: fork failed");
                        for (int k = 0; k < i; k++)
                                kill(pid[k], SIGKILL);
                        for (int k = 0; k < i; k++)
                                waitpid(pid[k], NULL, 0);
                        munmap(region, region_bytes(nprocs));
                        return strata__fail(STRATA_ESYS, "spawn: fork of rank %d failed", i);
                }
                alive++;
        }
        while (alive) {
                int st;
                pid_t w = waitpid(-1, &st, kill_at > 0.0 ? WNOHANG : 0);

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
                                strata__procs_abort(region, i, r.why);
                                kill_at = strata__now_s() + 1.0;
                        }
                        continue;
                }
                if (w < 0 && errno == EINTR)
                        continue; /* a signal (the user's ^C reaches the children too) */
                if (w < 0 && kill_at == 0.0)
                        break; /* no child left to wait for */
                if (strata__now_s() > kill_at) {
                        for (int i = 0; i < nprocs; i++)
                                if (pid[i] > 0)
                                        kill(pid[i], SIGKILL);
                        kill_at = strata__now_s() + timeout_s; /* reap what was killed */
                }
                usleep(2000);
        }
        {
                /* A process that saw another hang names it: that is the culprit to report. */
                char why[256];
                int culprit = strata__procs_aborted(region, why, sizeof(why));

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

static int spawn_processes(const struct strata_config *c, int *procs)
{
        if (!self.region)
                return strata__fail(STRATA_EINVAL, "strategy spawn runs in the processes "
                                                   "strata_spawn() starts");
        if (c->process.count > 0 && c->process.count != self.size)
                return strata__fail(STRATA_EINVAL, "processes %d, but strata_spawn() started %d",
                                    c->process.count, self.size);
        *procs = self.size;
        return STRATA_OK;
}

static int spawn_validate(const struct strata_config *c, const struct strata_device_ops *drv)
{
        if (strata__own_memory(drv))
                return strata__fail(STRATA_ENOTSUP, "strategy spawn on %s: device memory "
                                                    "across processes is not supported",
                                    drv->name);
        return strata__multi_validate(c, drv, "spawn");
}

static int spawn_environment(void *obj, int state, int event, void *arg)
{
        (void)state, (void)event, (void)arg;
        STRATA_TRY(strata__multi_join(obj, &strata__procs_net, &self));
        return STRATA_SM_PARENT;
}

static const struct strata_sm_state spawn_states[STRATA_STATE_COUNT] =
        STRATA__PROCS_STATES(spawn_environment);

const struct strata__strategy strata__spawn = {
        .name = "spawn",
        .validate = spawn_validate,
        .layout = strata__ddp_layout,
        .states = spawn_states,
        .collective = strata__multi_collective,
        .is_global_zero = strata__is_global_zero,
        .root_device = strata__root_device,
        .world_size = strata__world_size,
        .processes = spawn_processes,
        .handles_gradient_accumulation = 1,
        .all_reduces_gradients = 1,
};
