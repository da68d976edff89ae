/* The simulated device with memory of its own (see devsim.h). */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/support/devsim.h"

#define MAXDEV 64

static struct strata_device_ops sim, sim_nc;
static struct strata_kernel_ops sim_kernels;
static atomic_int ready;
static size_t dev_len[MAXDEV], host_len[MAXDEV];
static atomic_long unbound, uploaded;
static _Thread_local int cur = -1;

static void check_bound(void)
{
        if (cur < 0)
                atomic_fetch_add(&unbound, 1);
}

static int sim_reserve(int ordinal, size_t dev_bytes, size_t host_bytes, unsigned flags,
                       void **dev, void **host)
{
        void *d, *h;

        (void)flags;
        if (ordinal < 0 || ordinal >= MAXDEV || !dev || !host)
                return STRATA_EINVAL;
        d = mmap(NULL, dev_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (d == MAP_FAILED)
                return STRATA_ENOMEM;
        h = mmap(NULL, host_bytes ? host_bytes : 1, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (h == MAP_FAILED) {
                munmap(d, dev_bytes);
                return STRATA_ENOMEM;
        }
        dev_len[ordinal] = dev_bytes;
        host_len[ordinal] = host_bytes ? host_bytes : 1;
        *dev = d;
        *host = h;
        return STRATA_OK;
}

static void sim_unreserve(int ordinal, void *dev, void *host)
{
        if (ordinal < 0 || ordinal >= MAXDEV)
                return;
        if (dev)
                munmap(dev, dev_len[ordinal]);
        if (host)
                munmap(host, host_len[ordinal]);
}

static int sim_bind(int ordinal)
{
        if (ordinal < 0 || ordinal >= MAXDEV)
                return STRATA_EINVAL;
        cur = ordinal;
        return STRATA_OK;
}

static void sim_to_device(void *dst, const void *src, size_t bytes)
{
        check_bound();
        atomic_fetch_add(&uploaded, (long)bytes);
        memcpy(dst, src, bytes);
}

static void sim_to_host(void *dst, const void *src, size_t bytes)
{
        memcpy(dst, src, bytes);
}

/* As a device whose memory the host cannot address: every view is a copy. */
static const void *sim_device_view(void *stage, const void *src, size_t bytes)
{
        sim_to_device(stage, src, bytes);
        return stage;
}

static const void *sim_host_view(void *host, const void *src, size_t bytes)
{
        sim_to_host(host, src, bytes);
        return host;
}

/* Near the machine's last PU (any host will do: it makes the placement path run). */
static int sim_local_pus(int ordinal, int *pus, int max)
{
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        (void)ordinal;
        if (max < 1 || n < 1)
                return 0;
        pus[0] = (int)n - 1;
        return 1;
}

static int sim_sync(void)
{
        check_bound();
        return STRATA_OK;
}

static void sim_reduce_many(float *const *dst, int nd, const float *const *src, int ns,
                            size_t lo, size_t hi, int mean)
{
        check_bound();
        for (size_t i = lo; i < hi; i++) {
                float acc = src[0][i];

                for (int r = 1; r < ns; r++)
                        acc += src[r][i];
                if (mean)
                        acc = acc / (float)ns;
                for (int d = 0; d < nd; d++)
                        dst[d][i] = acc;
        }
}

static void sim_copy_many(void *const *dst, int nd, const void *src, size_t lo, size_t hi)
{
        check_bound();
        for (int d = 0; d < nd; d++)
                if (dst[d] != src)
                        memcpy((char *)dst[d] + lo, (const char *)src + lo, hi - lo);
}

static void build(void)
{
        const struct strata_device_ops *cpu = NULL;
        int expect = 0;

        if (atomic_load(&ready))
                return;
        if (strata_device_driver(STRATA_ACCEL_CPU, &cpu) != STRATA_OK)
                return;
        /* The CPU's kernels, less the range update another device's thread would run on
         * the master's memory (as the CUDA driver's). */
        sim_kernels = *cpu->kernels;
        sim_kernels.update_range = NULL;
        sim = *cpu;
        sim.name = "devsim";
        sim.kernels = &sim_kernels;
        sim.warm_up = NULL;
        sim.scratch_bytes = NULL; /* its threads run the CPU's scalar GEMM path: the same bits */
        sim.forget = NULL;
        sim.device_view = sim_device_view;
        sim.host_view = sim_host_view;
        sim.reserve = sim_reserve;
        sim.unreserve = sim_unreserve;
        sim.bind = sim_bind;
        sim.to_device = sim_to_device;
        sim.to_host = sim_to_host;
        sim.sync = sim_sync;
        sim.describe = NULL;
        sim.local_pus = sim_local_pus;
        sim.reduce_many = sim_reduce_many;
        sim.copy_many = sim_copy_many;
        sim_nc = sim;
        sim_nc.reduce_many = NULL;
        sim_nc.copy_many = NULL;
        atomic_compare_exchange_strong(&ready, &expect, 1);
}

struct strata_device_ops *driver_copy(struct driver_copy *c, const struct strata_device_ops *from)
{
        c->dev = *from;
        c->k = *from->kernels;
        c->dev.kernels = &c->k;
        return &c->dev;
}

const struct strata_device_ops *devsim_driver(void)
{
        build();
        return &sim;
}

const struct strata_device_ops *devsim_driver_no_comm(void)
{
        build();
        return &sim_nc;
}

long devsim_unbound(void)
{
        return atomic_load(&unbound);
}

long devsim_uploaded(void)
{
        return atomic_load(&uploaded);
}
