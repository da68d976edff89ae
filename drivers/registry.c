/*
 * The registries of device drivers (one const table per accelerator kind) and transports.
 * The CPU driver is in the library; the CUDA driver is a plugin (drivers/plugin.h) loaded the
 * first time it is asked for, so a CPU-only program never maps the CUDA libraries.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/device.h"
#include "strata/status.h"
#include "base/base.h"
#include "drivers/comm_internal.h"
#include "drivers/drivers.h"
#include "drivers/net.h"
#include "drivers/plugin.h"

static const struct strata_device_ops *registry[STRATA_ACCEL_COUNT] = {
        [STRATA_ACCEL_CPU] = &strata__cpu_driver,
};

/* The CUDA plugin, loaded once: its table, or why it could not be had. */
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static char cuda_why[512];

/*
 * Where to look for plugin @p file: $@p var, then beside the object this code is in
 * (libstrata.so in lib/, or a program linked with the archive: its bin/../lib and bin/..),
 * then the dynamic linker's own search.
 */
static void *open_plugin(const char *file, const char *var, char *tried, size_t n)
{
        const char *env = getenv(var);
        char dir[PATH_MAX], path[PATH_MAX + 64];
        const char *sub[] = { "", "/../lib", "/.." };
        Dl_info info;
        void *h;

        tried[0] = '\0';
        if (env && *env) {
                snprintf(tried, n, "%s", env);
                return dlopen(env, RTLD_NOW | RTLD_GLOBAL);
        }
        dir[0] = '\0';
        if (dladdr((void *)open_plugin, &info) && info.dli_fname && info.dli_fname[0] == '/')
                snprintf(dir, sizeof(dir), "%s", info.dli_fname);
        else { /* linked into the program itself: the main program's name is not recorded */
                ssize_t len = readlink("/proc/self/exe", dir, sizeof(dir) - 1);

                dir[len > 0 ? len : 0] = '\0';
        }
        if (dir[0]) {
                char *slash = strrchr(dir, '/');

                if (slash) {
                        *slash = '\0';
                        for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
                                size_t len = strlen(tried);

                                snprintf(path, sizeof(path), "%s%s/%s", dir, sub[i], file);
                                snprintf(tried + len, n - len, "%s%s", len ? ", " : "", path);
                                if ((h = dlopen(path, RTLD_NOW | RTLD_GLOBAL)))
                                        return h;
                        }
                }
        }
        {
                size_t len = strlen(tried);

                snprintf(tried + len, n - len, "%s%s (system paths)", len ? ", " : "", file);
        }
        return dlopen(file, RTLD_NOW | RTLD_GLOBAL);
}

/*
 * Open plugin @p file and return its entry point @p entry, or NULL with why in @p why (what
 * the build lacks is @p missing). The handle stays open when the entry point is found.
 */
static void *load_plugin(const char *file, const char *var, const char *entry,
                         const char *missing, char *why, size_t n, void **handle)
{
        char tried[1536];
        void *h = open_plugin(file, var, tried, sizeof(tried)), *fn;
        const char *err;

        if (!h) {
                err = dlerror();
                snprintf(why, n, "%s not loaded (%s; tried %.300s): %s, or it is not installed "
                         "beside the library", file, err ? err : "not found", tried, missing);
                return NULL;
        }
        fn = dlsym(h, entry);
        if (!fn) {
                snprintf(why, n, "%s is not a Strata plugin (no %s)", file, entry);
                dlclose(h);
                return NULL;
        }
        *handle = h;
        return fn;
}

static void load_cuda(void)
{
        static const struct strata__plugin_host host = { STRATA__PLUGIN_ABI, strata__vfail, NULL };
        strata__plugin_open_fn open_fn;
        void *h = NULL;

        *(void **)&open_fn = load_plugin(STRATA__CUDA_PLUGIN, "STRATA_CUDA_PLUGIN",
                                         STRATA__CUDA_PLUGIN_ENTRY,
                                         "this build has no CUDA driver (built without the CUDA "
                                         "toolkit, or with CUDA=0)", cuda_why, sizeof(cuda_why),
                                         &h);
        registry[STRATA_ACCEL_CUDA] = open_fn ? open_fn(&host) : NULL;
        if (open_fn && !registry[STRATA_ACCEL_CUDA]) {
                snprintf(cuda_why, sizeof(cuda_why), "%s is from another Strata build (no "
                         "matching " STRATA__CUDA_PLUGIN_ENTRY ")", STRATA__CUDA_PLUGIN);
                dlclose(h);
        }
}

static const char *const names[STRATA_ACCEL_COUNT] = {
        [STRATA_ACCEL_CPU] = "cpu",
        [STRATA_ACCEL_CUDA] = "cuda",
};

/* The kernels every module, loss and optimizer of the library needs. */
static int kernels_complete(const struct strata_kernel_ops *k)
{
        return k && k->gemm && k->fill_rows && k->relu && k->relu_backward && k->col_sums &&
               k->act && k->act_backward &&
               k->softmax_xent && k->copy && k->fill && k->mul && k->dropout && k->col_stats &&
               k->div && k->bn_moments && k->bn_normalize && k->bn_eval && k->bn_grad_sums &&
               k->bn_dx && k->update && k->sumsq && k->scale && k->clamp;
}

/* Copies and views always; a driver that reserves memory gives it back too. */
static int complete(const struct strata_device_ops *d)
{
        return d->probe && d->to_device && d->to_host && d->device_view && d->host_view &&
               !d->reserve == !d->unreserve && kernels_complete(d->kernels);
}

/* The accelerator's driver, loaded; probed for a device unless @p probe is 0. */
static int driver_of(enum strata_accelerator kind, int probe,
                     const struct strata_device_ops **out)
{
        const struct strata_device_ops *d;

        if (!out || (unsigned)kind >= STRATA_ACCEL_COUNT)
                return strata__fail(STRATA_EINVAL, "device driver: unknown accelerator %d",
                                    (int)kind);
        if (kind == STRATA_ACCEL_CUDA)
                pthread_once(&cuda_once, load_cuda);
        d = registry[kind];
        if (!d)
                return strata__fail(STRATA_ENODEV, "device driver %s: %s", names[kind],
                                    kind == STRATA_ACCEL_CUDA ? cuda_why : "not built");
        if (probe)
                STRATA_TRY(strata_device_check(d));
        else if (!complete(d))
                return strata__fail(STRATA_EINVAL, "device driver %s lacks a mandatory "
                                    "operation", d->name);
        *out = d;
        return STRATA_OK;
}

int strata_device_driver(enum strata_accelerator kind, const struct strata_device_ops **out)
{
        return driver_of(kind, 1, out);
}

int strata__device_driver_unprobed(enum strata_accelerator kind,
                                   const struct strata_device_ops **out)
{
        return driver_of(kind, 0, out);
}

int strata_device_check(const struct strata_device_ops *d)
{
        const char *why = NULL;

        if (!d)
                return strata__fail(STRATA_EINVAL, "device driver is NULL");
        if (!complete(d))
                return strata__fail(STRATA_EINVAL, "device driver %s lacks a mandatory operation",
                                    d->name ? d->name : "(unnamed)");
        if (!d->probe(&why))
                return strata__fail(STRATA_ENODEV, "device driver %s: %s", d->name,
                                    why ? why : "probe failed");
        return STRATA_OK;
}

/* The MPI link (drivers/net.h), a plugin as well: only programs that run on MPI load it. */
static pthread_once_t mpi_once = PTHREAD_ONCE_INIT;
static const struct strata__net_ops *mpi_ops;
static char mpi_why[512];

static void load_mpi(void)
{
        static const struct strata__plugin_host host = { STRATA__NET_PLUGIN_ABI, strata__vfail,
                                                         strata__wait };
        strata__net_plugin_open_fn open_fn;
        void *h = NULL;

        *(void **)&open_fn = load_plugin(STRATA__MPI_PLUGIN, "STRATA_MPI_PLUGIN",
                                         STRATA__MPI_PLUGIN_ENTRY,
                                         "this build has no MPI link (built without mpicc)",
                                         mpi_why, sizeof(mpi_why), &h);
        mpi_ops = open_fn ? open_fn(&host) : NULL;
        if (open_fn && !mpi_ops) {
                snprintf(mpi_why, sizeof(mpi_why), "%s is from another Strata build (no "
                         "matching " STRATA__MPI_PLUGIN_ENTRY ")", STRATA__MPI_PLUGIN);
                dlclose(h);
        }
}

int strata__link_mpi(const struct strata__net_ops **out)
{
        pthread_once(&mpi_once, load_mpi);
        if (!mpi_ops)
                return strata__fail(STRATA_ENODEV, "strategy mpi: %s", mpi_why);
        *out = mpi_ops;
        return STRATA_OK;
}

/* The transports, in order of preference: a communicator runs on the first that accepts. */
extern const struct strata__transport strata__net_transport;
extern const struct strata__transport strata__shm_transport;

static const struct strata__transport *const transports[] = {
        &strata__net_transport,
        &strata__shm_transport,
};

size_t strata__transport_state_bytes(const struct strata_comm_config *cfg)
{
        size_t most = 0;

        for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
                size_t b = transports[i]->state_bytes ? transports[i]->state_bytes(cfg) : 0;

                most = b > most ? b : most;
        }
        return most;
}

const struct strata__transport *strata__transport_pick(const struct strata_comm_config *cfg,
                                                       const char **why)
{
        for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
                if (transports[i]->probe(cfg, why))
                        return transports[i];
        return NULL;
}
