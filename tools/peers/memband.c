/*
 * memband: the memory-bandwidth floor of this machine, the physical limit the benchmarks set
 * Strata's figures beside. Two kernels over 256 MiB float arrays, on 1 then 2 threads (each
 * pinned to its own core, each on its slice): a copy (one read, one write per element) and
 * the 2-input sum at the heart of an all-reduce (two reads, one write). The best of 10 rounds
 * of each is printed, one line per thread count:
 *   threads=N copy X GB/s (r+w)  sum Y GB/s (2r+1w)
 * tools/bench-insitu.sh reads the one-thread sum. Build: gcc -O3 -march=native -pthread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ELEMS   ((size_t)64 << 20)      /* floats per array: 256 MiB */
#define ROUNDS  10
#define MAX_THREADS 2

struct worker {
        int id;                         /* this thread's index, also its core */
        int threads;                    /* how many share the arrays */
        float *src, *src2, *dst;        /* the three arrays */
        pthread_barrier_t *start;       /* all threads start and stop each round together */
        double copy_s, sum_s;           /* best round, seconds (thread 0's clock) */
};

static double seconds(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int core)
{
        cpu_set_t set;

        CPU_ZERO(&set);
        CPU_SET(core, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* One round of @p kernel (0 copy, 1 sum) over [lo, hi), timed between two barriers. */
static double round_of(struct worker *w, int kernel, size_t lo, size_t hi)
{
        double t0;

        pthread_barrier_wait(w->start);
        t0 = seconds();
        if (kernel == 0) {
                memcpy(w->dst + lo, w->src + lo, (hi - lo) * sizeof(float));
        } else {
                for (size_t i = lo; i < hi; i++)
                        w->dst[i] = w->src[i] + w->src2[i];
        }
        pthread_barrier_wait(w->start);
        return seconds() - t0;
}

static void *work(void *arg)
{
        struct worker *w = arg;
        size_t lo = ELEMS * (size_t)w->id / (size_t)w->threads;
        size_t hi = ELEMS * (size_t)(w->id + 1) / (size_t)w->threads;

        pin(w->id);
        /* First touch on this thread: the pages of its slice live on its node. */
        for (size_t i = lo; i < hi; i++) {
                w->src[i] = 1.0f;
                w->src2[i] = 2.0f;
                w->dst[i] = 0.0f;
        }
        w->copy_s = w->sum_s = 1e30;
        for (int r = 0; r < ROUNDS; r++) {
                double c = round_of(w, 0, lo, hi);
                double s = round_of(w, 1, lo, hi);

                if (c < w->copy_s)
                        w->copy_s = c;
                if (s < w->sum_s)
                        w->sum_s = s;
        }
        return NULL;
}

int main(void)
{
        size_t bytes = ELEMS * sizeof(float);
        float *src = aligned_alloc(64, bytes), *src2 = aligned_alloc(64, bytes);
        float *dst = aligned_alloc(64, bytes);

        if (!src || !src2 || !dst) {
                fprintf(stderr, "memband: cannot allocate 3 x %zu bytes\n", bytes);
                return 1;
        }
        for (int n = 1; n <= MAX_THREADS; n++) {
                pthread_barrier_t start;
                pthread_t tid[MAX_THREADS];
                struct worker w[MAX_THREADS];

                pthread_barrier_init(&start, NULL, (unsigned)n);
                for (int i = 0; i < n; i++) {
                        w[i] = (struct worker){ .id = i, .threads = n, .src = src, .src2 = src2,
                                                .dst = dst, .start = &start };
                        pthread_create(&tid[i], NULL, work, &w[i]);
                }
                for (int i = 0; i < n; i++)
                        pthread_join(tid[i], NULL);
                pthread_barrier_destroy(&start);
                printf("threads=%d copy %.2f GB/s (r+w)  sum %.2f GB/s (2r+1w)\n", n,
                       2.0 * (double)bytes / w[0].copy_s / 1e9,
                       3.0 * (double)bytes / w[0].sum_s / 1e9);
        }
        free(src);
        free(src2);
        free(dst);
        return 0;
}
