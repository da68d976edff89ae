/*
 * A simulation that writes its fields to HDF5, for a surrogate to learn from: 2-D diffusion
 * (the heat equation u_t = nu (u_xx + u_yy)) on a periodic N x N grid over [0, 1)^2, explicit
 * finite differences (nu dt / h^2 = 0.2, stable below 0.25). Each sample starts from a few
 * Gaussian blobs of random place, width and sign (a fixed seed per sample) and is advanced
 * WARM steps; the pair stored is the field then (input) and STRIDE steps later (target): the
 * surrogate learns to jump STRIDE steps at once.
 *
 * Datasets, f32, PyTorch's (N, C, H, W) layout: "u" [samples, 1, N, N], "u_next" the same.
 * strata-train reads them as `--data FILE --inputs u --targets u_next --loss mse` with a model
 * line starting input(1,N,N) (examples/unet.sh).
 *
 * Usage: diffusion_h5 FILE [SAMPLES [N [SEED]]]   (defaults 2048, 32, 1)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <hdf5.h>

#define WARM 4
#define STRIDE 8
#define BLOBS 3
#define R 0.2 /* nu dt / h^2 */

/* A uniform number in [0, 1) from a 64-bit state (splitmix64). */
static double uniform(uint64_t *s)
{
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* Sample @p k's initial field: BLOBS periodic Gaussians. */
static void initial(double *u, int n, uint64_t seed, long k)
{
        uint64_t s = seed * 0x100000001b3ull + (uint64_t)k;

        for (int i = 0; i < n * n; i++)
                u[i] = 0.0;
        for (int b = 0; b < BLOBS; b++) {
                double cx = uniform(&s), cy = uniform(&s), w = 0.05 + 0.1 * uniform(&s);
                double a = uniform(&s) < 0.5 ? -1.0 : 1.0;

                for (int y = 0; y < n; y++)
                        for (int x = 0; x < n; x++) {
                                double dx = fabs((double)x / n - cx), dy = fabs((double)y / n - cy);

                                dx = dx > 0.5 ? 1.0 - dx : dx; /* periodic distance */
                                dy = dy > 0.5 ? 1.0 - dy : dy;
                                u[y * n + x] += a * exp(-(dx * dx + dy * dy) / (2.0 * w * w));
                        }
        }
}

/* @p steps explicit steps of the periodic five-point Laplacian; @p t is scratch. */
static void advance(double *u, double *t, int n, int steps)
{
        for (int s = 0; s < steps; s++) {
                for (int y = 0; y < n; y++)
                        for (int x = 0; x < n; x++) {
                                int xl = (x + n - 1) % n, xr = (x + 1) % n;
                                int yu = (y + n - 1) % n, yd = (y + 1) % n;
                                double c = u[y * n + x];

                                t[y * n + x] = c + R * (u[y * n + xl] + u[y * n + xr] +
                                                        u[yu * n + x] + u[yd * n + x] - 4.0 * c);
                        }
                for (int i = 0; i < n * n; i++)
                        u[i] = t[i];
        }
}

static int write(hid_t f, const char *name, const float *v, long samples, int n)
{
        hsize_t dims[4] = { (hsize_t)samples, 1, (hsize_t)n, (hsize_t)n };
        hid_t sp = H5Screate_simple(4, dims, NULL), ds;
        herr_t rc = -1;

        if (sp < 0)
                return -1;
        ds = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (ds >= 0) {
                rc = H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
                H5Dclose(ds);
        }
        H5Sclose(sp);
        return rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
        long samples = argc > 2 ? atol(argv[2]) : 2048;
        int n = argc > 3 ? atoi(argv[3]) : 32;
        uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
        float *in, *out;
        double *u, *t;
        hid_t f;
        int rc;

        if (argc < 2 || samples < 1 || samples > (1L << 24) || n < 4 || n > 1024) {
                fprintf(stderr, "usage: diffusion_h5 FILE [SAMPLES [N [SEED]]]\n");
                return 2;
        }
        in = malloc(sizeof(float) * (size_t)samples * (size_t)(n * n));
        out = malloc(sizeof(float) * (size_t)samples * (size_t)(n * n));
        u = malloc(sizeof(double) * (size_t)(n * n));
        t = malloc(sizeof(double) * (size_t)(n * n));
        if (!in || !out || !u || !t) {
                fprintf(stderr, "diffusion_h5: out of memory\n");
                return 1;
        }
        for (long k = 0; k < samples; k++) {
                initial(u, n, seed, k);
                advance(u, t, n, WARM);
                for (int i = 0; i < n * n; i++)
                        in[(size_t)k * (size_t)(n * n) + (size_t)i] = (float)u[i];
                advance(u, t, n, STRIDE);
                for (int i = 0; i < n * n; i++)
                        out[(size_t)k * (size_t)(n * n) + (size_t)i] = (float)u[i];
        }
        f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        rc = f < 0 || write(f, "u", in, samples, n) || write(f, "u_next", out, samples, n);
        if (f >= 0 && H5Fclose(f) < 0)
                rc = 1;
        free(in);
        free(out);
        free(u);
        free(t);
        if (rc) {
                fprintf(stderr, "diffusion_h5: writing %s failed\n", argv[1]);
                return 1;
        }
        printf("diffusion_h5: %ld samples of %d x %d in %s (u -> u_next: %d steps)\n", samples,
               n, n, argv[1], STRIDE);
        return 0;
}
