#!/bin/sh
# A host application with its own BLAS (issue 43 item 3): a program linked with libstrata.so
# and Debian's threaded OpenBLAS (libopenblas-pthread-dev) runs OpenBLAS's multi-threaded
# GEMMs (4 OpenBLAS threads) before, during (from a thread of its own) and after a Strata ddp
# run of 2 devices. Every OpenBLAS product must equal its exact reference (integer operands,
# so any order of summation gives the same bits and any corrupted buffer shows), the Strata
# run must be bitwise the same run made without OpenBLAS busy beside it (parameters and every
# loss), and OpenBLAS's names (cblas_sgemm, sgemm_, blas_memory_alloc) must resolve to
# OpenBLAS, none of them to libstrata.so. Under ASan and TSan the program is instrumented too.
#   host_blas.sh SRC BUILD SAN
set -eu
src=$1 build=$2 san=${3:-}
blas=/usr/lib/x86_64-linux-gnu/openblas-pthread
dir=$build/host-blas
[ -e "$blas/pkgconfig/openblas.pc" ] ||
        { echo "host_blas: libopenblas-pthread-dev is missing (make deps installs it)"; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
cc=cc flags="-std=c11 -O1 -g -Wall -Wextra -Werror"
case $san in
asan) flags="$flags -fsanitize=address,undefined -fno-omit-frame-pointer" ;;
tsan) cc=clang flags="$flags -fsanitize=thread -fno-omit-frame-pointer" ;;
esac
cat > "$dir/host_blas.c" <<'C'
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <strata/strata.h>

#define M 192 /* the host's GEMMs: large enough that OpenBLAS splits them across threads */
#define N 160
#define K 224
#define PROBLEMS 4
#define BLAS_THREADS 4
#define IN 784 /* Strata's run: the default MLP on synthetic rows, ddp on 2 devices */
#define CLASSES 10
#define BATCH 128
#define SAMPLES 2048
#define STEPS 12
#define MAXP 300000

struct problem {
        float a[M * K], b[K * N], want[M * N];
        double ad[M * K], bd[K * N], wantd[M * N];
};

static struct problem problems[PROBLEMS];
static atomic_int stop, failed;
static atomic_long products;

static void fail(const char *what)
{
        fprintf(stderr, "host_blas: %s\n", what);
        exit(1);
}

/* Integer operands in [-4, 4]: every partial sum is exact, in any order, in f32 and f64. */
static void make(struct problem *p, unsigned s)
{
        for (int i = 0; i < M * K; i++) {
                s = s * 1664525u + 1013904223u;
                p->ad[i] = p->a[i] = (float)((int)(s >> 20) % 9 - 4);
        }
        for (int i = 0; i < K * N; i++) {
                s = s * 1664525u + 1013904223u;
                p->bd[i] = p->b[i] = (float)((int)(s >> 20) % 9 - 4);
        }
        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        long t = 0;

                        for (int k = 0; k < K; k++)
                                t += (long)p->a[i * K + k] * (long)p->b[k * N + j];
                        p->wantd[i * N + j] = p->want[i * N + j] = (float)t;
                }
}

/* One caller's results (a thread's own: static, not _Thread_local, which worker stacks hold). */
struct out {
        float c[M * N];
        double cd[M * N];
};

static struct out main_out, busy_out;

/* OpenBLAS's sgemm and dgemm of problem @p i into @p o, each checked against its exact one. */
static int blas_ok(int i, struct out *o)
{
        float *c = o->c;
        double *cd = o->cd;
        const struct problem *p = &problems[i % PROBLEMS];

        memset(c, 0x7f, sizeof(o->c));
        memset(cd, 0x7f, sizeof(o->cd));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, p->a, K, p->b, N,
                    0.0f, c, N);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, p->ad, K, p->bd, N,
                    0.0, cd, N);
        atomic_fetch_add(&products, 2);
        return !memcmp(c, p->want, sizeof(o->c)) && !memcmp(cd, p->wantd, sizeof(o->cd));
}

static void *busy(void *arg)
{
        (void)arg;
        for (int i = 0; !atomic_load(&stop); i++)
                if (!blas_ok(i, &busy_out))
                        atomic_store(&failed, 1);
        return NULL;
}

/* Threads of this process now (OpenBLAS's pool included). */
static int threads(void)
{
        DIR *d = opendir("/proc/self/task");
        int n = 0;

        if (!d)
                return -1;
        while (readdir(d))
                n++;
        closedir(d);
        return n - 2; /* . and .. */
}

/* Where the process resolves @p name: OpenBLAS's file, or fail. */
static void resolves_to_openblas(const char *name)
{
        void *f = dlsym(RTLD_DEFAULT, name);
        void *self = dlopen("libstrata.so.0", RTLD_NOW | RTLD_NOLOAD);
        Dl_info di;
        char msg[512];

        if (!f || !dladdr(f, &di) || !di.dli_fname || !strstr(di.dli_fname, "openblas")) {
                snprintf(msg, sizeof(msg), "%s resolves to %s, not OpenBLAS", name,
                         f && dladdr(f, &di) && di.dli_fname ? di.dli_fname : "nothing");
                fail(msg);
        }
        if (!self)
                fail("libstrata.so.0 is not loaded");
        if (dlsym(self, name) && dlsym(self, name) != f) {
                snprintf(msg, sizeof(msg), "libstrata.so defines %s", name);
                fail(msg);
        }
        printf("%s: %s\n", name, di.dli_fname);
}

struct result {
        float p[MAXP];
        size_t n;
        double loss[STEPS];
};

static struct strata_module mods[5] = {
        { .ops = &strata_linear, .out = 256 }, { .ops = &strata_relu },
        { .ops = &strata_linear, .out = 128 }, { .ops = &strata_relu },
        { .ops = &strata_linear, .out = CLASSES },
};
static struct strata_model model = { .in_features = IN, .nmodules = 5, .modules = mods };

static void check(int rc, const char *what)
{
        char msg[512];

        if (rc != STRATA_OK) {
                snprintf(msg, sizeof(msg), "%s: %s", what, strata_last_error());
                fail(msg);
        }
}

/* STEPS steps of ddp on 2 devices; the parameters and losses into @p o. */
static void train(struct result *o)
{
        static _Alignas(4096) unsigned char data_mem[8 << 20];
        static uint32_t order[SAMPLES];
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt = NULL;
        struct strata_dataset ds;
        struct strata_arena data;
        struct strata_loader loader;
        struct strata_batch b;
        struct strata_metrics m;
        const float *p;

        check(strata_arena_init(&data, data_mem, sizeof(data_mem), NULL), "data arena");
        check(strata_dataset_synthetic(&ds, &data, SAMPLES, IN, CLASSES, 3), "data");
        check(strata_loader_init(&loader, &data, &ds, BATCH, 1), "loader");
        for (uint32_t i = 0; i < SAMPLES; i++)
                order[i] = (i * 71u) % SAMPLES;
        c.model = &model;
        c.batch = BATCH;
        c.classes = CLASSES;
        c.seed = 7;
        c.strategy.kind = STRATA_STRATEGY_DDP;
        c.strategy.devices = 2;
        c.optim.kind = STRATA_OPTIM_SGD;
        c.optim.lr = 0.05f;
        c.optim.momentum = 0.9f;
        check(strata_init(&rt, &c), "init");
        check(strata_connect(rt), "connect");
        strata_loader_reset(&loader, order, SAMPLES);
        for (int s = 0; s < STEPS; s++) {
                if (!strata_loader_next(&loader, &b))
                        fail("the loader ran dry");
                check(strata_train_step(rt, &b, &m), "train step");
                o->loss[s] = m.loss;
        }
        check(strata_parameters(rt, 0, &p, &o->n), "parameters");
        if (o->n > MAXP)
                fail("more parameters than expected");
        memcpy(o->p, p, o->n * sizeof(float));
        check(strata_teardown(rt), "teardown");
}

int main(void)
{
        static struct result quiet, beside;
        pthread_t t;
        long before, during;
        int n;

        if (openblas_get_parallel() != 1)
                fail("this OpenBLAS is not the pthreads build");
        openblas_set_num_threads(BLAS_THREADS);
        if (openblas_get_num_threads() != BLAS_THREADS)
                fail("OpenBLAS would not run 4 threads");
        for (int i = 0; i < PROBLEMS; i++)
                make(&problems[i], 1u + (unsigned)i);
        resolves_to_openblas("cblas_sgemm");
        resolves_to_openblas("sgemm_");
        resolves_to_openblas("blas_memory_alloc");

        /* before */
        for (int i = 0; i < PROBLEMS; i++)
                if (!blas_ok(i, &main_out))
                        fail("OpenBLAS's product before Strata's run is wrong");
        n = threads();
        printf("OpenBLAS %s, %d threads; the process has %d\n", openblas_get_corename(),
               openblas_get_num_threads(), n);
        if (n < BLAS_THREADS)
                fail("OpenBLAS's threads are not running");
        train(&quiet);

        /* during: OpenBLAS busy on its own thread (and its 4) while Strata trains */
        before = atomic_load(&products);
        if (pthread_create(&t, NULL, busy, NULL))
                fail("pthread_create");
        while (atomic_load(&products) == before) /* it has started */
                sched_yield();
        before = atomic_load(&products);
        train(&beside);
        during = atomic_load(&products) - before;
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
        if (atomic_load(&failed))
                fail("an OpenBLAS product during Strata's run is wrong");
        printf("%ld OpenBLAS products during the run, all exact\n", during);
        if (during < 2)
                fail("no OpenBLAS product overlapped Strata's run");

        /* after */
        for (int i = 0; i < PROBLEMS; i++)
                if (!blas_ok(i, &main_out))
                        fail("OpenBLAS's product after Strata's run is wrong");
        if (beside.n != quiet.n || memcmp(beside.p, quiet.p, quiet.n * sizeof(float)) ||
            memcmp(beside.loss, quiet.loss, sizeof(quiet.loss)))
                fail("Strata's run beside OpenBLAS is not bitwise the quiet run");
        printf("ok: OpenBLAS exact before, during and after; Strata's %zu parameters and %d "
               "losses bitwise the quiet run's (last loss %.6f)\n", quiet.n, STEPS,
               quiet.loss[STEPS - 1]);
        return 0;
}
C
PKG_CONFIG_PATH="$blas/pkgconfig" pkg-config --exists openblas
$cc $flags -o "$dir/host_blas" "$dir/host_blas.c" -I"$src/include" \
        $(PKG_CONFIG_PATH="$blas/pkgconfig" pkg-config --cflags openblas) \
        -L"$build" -lstrata -Wl,-rpath,"$build" \
        $(PKG_CONFIG_PATH="$blas/pkgconfig" pkg-config --libs openblas) -Wl,-rpath,"$blas" \
        -lpthread -ldl
if [ "$san" = tsan ]; then
        # OpenBLAS is not instrumented: the threads it starts write the caller's result and
        # meet the caller through its own spin flags, which TSan cannot see (a report of its
        # memset into C against the caller's read, now that the caller is not left on one
        # core while the runtime lives). Races inside Strata or the program still report.
        echo "race:libopenblas.so.0" > "$dir/tsan.supp"
        TSAN_OPTIONS="${TSAN_OPTIONS:-}:suppressions=$dir/tsan.supp"
        export TSAN_OPTIONS
fi
"$dir/host_blas"
