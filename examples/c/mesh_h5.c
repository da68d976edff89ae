/*
 * The mesh example's data for strata-train (examples/mesh.sh): the triangulated domain and the
 * diffusion of examples/c/mesh_sim.h written to one HDF5 file, and the model line printed.
 * Datasets: "x" f32 [samples, 3, nodes] (u, x, y: PyTorch's (N, C, nodes)), "y" f32
 * [samples, 1, nodes] (u STEPS steps later), "edge_index" int32 [2, edges] (sources, then
 * destinations, 0-based) with the integer attribute "nodes": `strata-train --data FILE
 * --inputs x --targets y --mesh FILE --model "$(mesh_h5 FILE)"`.
 *
 * Usage: mesh_h5 FILE [SAMPLES]   (320)
 */
#include <stdio.h>
#include <stdlib.h>

#include <hdf5.h>

#include "mesh_sim.h"

static int write(hid_t f, const char *name, hid_t type, int rank, const hsize_t *dims,
                 const void *v)
{
        hid_t sp = H5Screate_simple(rank, dims, NULL), ds;
        herr_t rc = -1;

        if (sp < 0)
                return -1;
        ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (ds >= 0) {
                rc = H5Dwrite(ds, type == H5T_STD_I32LE ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT,
                              H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
                if (rc >= 0 && type == H5T_STD_I32LE) { /* edge_index: its node count */
                        hid_t as = H5Screate(H5S_SCALAR), a;
                        int n = NODES;

                        a = H5Acreate2(ds, "nodes", H5T_STD_I32LE, as, H5P_DEFAULT, H5P_DEFAULT);
                        rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_INT, &n);
                        if (a >= 0)
                                H5Aclose(a);
                        H5Sclose(as);
                }
                H5Dclose(ds);
        }
        H5Sclose(sp);
        return rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
        static int32_t edge_index[2 * EDGES];
        static char line[4096];
        long samples = argc > 2 ? atol(argv[2]) : 320;
        hsize_t xd[3] = { 0, 3, NODES }, yd[3] = { 0, 1, NODES }, ed[2] = { 2, EDGES };
        float *x, *y;
        hid_t f;
        int rc;

        if (argc < 2 || samples < 1 || samples > (1L << 20)) {
                fprintf(stderr, "usage: mesh_h5 FILE [SAMPLES]\n");
                return 2;
        }
        xd[0] = yd[0] = (hsize_t)samples;
        x = malloc(sizeof(float) * (size_t)samples * 3 * NODES);
        y = malloc(sizeof(float) * (size_t)samples * NODES);
        if (!x || !y)
                return 1;
        build_mesh();
        for (long k = 0; k < samples; k++)
                simulate(k, x + (size_t)k * 3 * NODES, y + (size_t)k * NODES);
        memcpy(edge_index, src, sizeof(src));
        memcpy(edge_index + EDGES, dst, sizeof(dst));
        f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        rc = f < 0 || write(f, "x", H5T_IEEE_F32LE, 3, xd, x) ||
             write(f, "y", H5T_IEEE_F32LE, 3, yd, y) ||
             write(f, "edge_index", H5T_STD_I32LE, 2, ed, edge_index);
        if (f >= 0 && H5Fclose(f) < 0)
                rc = 1;
        free(x);
        free(y);
        if (rc) {
                fprintf(stderr, "mesh_h5: writing %s failed\n", argv[1]);
                return 1;
        }
        model_line(line, sizeof(line));
        printf("%s\n", line);
        return 0;
}
