/*
 * strata-bench-ckpt: the time to save and to load a checkpoint of the default MLP
 * (784-256-128-10, SGD with momentum: parameters and momentum buffers) on one device, and the
 * checkpoint's size; medians of --reps saves (each fsynced and renamed into place) and loads,
 * and two floors for the same number of bytes: write() to a new file, fsync, close; and that
 * plus what makes it atomic and durable under its name: rename, fsync of the directory.
 *
 *   strata-bench-ckpt [--dir DIR] [--reps N] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "strata/strata.h"
#include "tools/timing.h"



int main(int argc, char **argv)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 256 }, { .ops = &strata_relu },
                { .ops = &strata_linear, .out = 128 }, { .ops = &strata_relu },
                { .ops = &strata_linear, .out = 10 },
        };
        struct strata_model model = { .in_features = 784, .nmodules = 5, .modules = mods };
        struct strata_config cfg = STRATA_CONFIG_INIT;
        const char *dir = "/tmp";
        double save[101], load[101], floor_s[101], atomic_s[101];
        struct strata_runtime *rt;
        char path[4096];
        struct stat st;
        int reps = 21, json = 0;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--dir") && i + 1 < argc)
                        dir = argv[++i];
                else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
                        reps = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--json"))
                        json = 1;
                else {
                        fprintf(stderr, "usage: strata-bench-ckpt [--dir DIR] [--reps N] "
                                        "[--json]\n");
                        return 2;
                }
        }
        if (reps < 1 || reps > 101) {
                fprintf(stderr, "strata-bench-ckpt: --reps in [1, 101]\n");
                return 2;
        }
        cfg.model = &model;
        cfg.batch = 128;
        cfg.classes = 10;
        snprintf(path, sizeof(path), "%s/strata-bench.ckpt", dir);
        if (strata_init(&rt, &cfg) || strata_connect(rt)) {
                fprintf(stderr, "strata-bench-ckpt: %s\n", strata_last_error());
                return 1;
        }
        for (int r = 0; r < reps; r++) {
                double t0 = strata_tool_now();

                if (strata_save_checkpoint(rt, path, NULL, 0))
                        goto fail;
                save[r] = strata_tool_now() - t0;
                t0 = strata_tool_now();
                if (strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL))
                        goto fail;
                load[r] = strata_tool_now() - t0;
        }
        stat(path, &st);
        {
                char *buf = calloc(1, (size_t)st.st_size);
                char fpath[4200];

                snprintf(fpath, sizeof(fpath), "%s.floor", path);
                for (int r = 0; buf && r < reps; r++) {
                        double t0 = strata_tool_now();
                        int fd = open(fpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

                        if (fd < 0 || write(fd, buf, (size_t)st.st_size) != st.st_size ||
                            fsync(fd) != 0 || close(fd) != 0) {
                                fprintf(stderr, "strata-bench-ckpt: floor write failed\n");
                                return 1;
                        }
                        floor_s[r] = strata_tool_now() - t0;
                        fd = open(dir, O_RDONLY | O_DIRECTORY);
                        if (rename(fpath, path) != 0 || fd < 0 || fsync(fd) != 0) {
                                fprintf(stderr, "strata-bench-ckpt: floor rename failed\n");
                                return 1;
                        }
                        close(fd);
                        atomic_s[r] = strata_tool_now() - t0;
                }
                free(buf);
                remove(fpath);
        }
        qsort(floor_s, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        qsort(atomic_s, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        qsort(save, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        qsort(load, (size_t)reps, sizeof(double), strata_tool_cmp_double);
        if (json)
                printf("{\"bytes\":%lld,\"save_ms\":%.3f,\"load_ms\":%.3f,\"floor_ms\":%.3f,"
                       "\"atomic_floor_ms\":%.3f}\n", (long long)st.st_size,
                       save[reps / 2] * 1e3, load[reps / 2] * 1e3, floor_s[reps / 2] * 1e3,
                       atomic_s[reps / 2] * 1e3);
        else
                printf("checkpoint %lld bytes: save %.3f ms, load %.3f ms, floor (write + fsync "
                       "of the same bytes) %.3f ms, atomic floor (+ rename, directory fsync) "
                       "%.3f ms (medians of %d)\n", (long long)st.st_size,
                       save[reps / 2] * 1e3, load[reps / 2] * 1e3, floor_s[reps / 2] * 1e3,
                       atomic_s[reps / 2] * 1e3, reps);
        remove(path);
        strata_teardown(rt);
        return 0;
fail:
        fprintf(stderr, "strata-bench-ckpt: %s\n", strata_last_error());
        strata_teardown(rt);
        return 1;
}
