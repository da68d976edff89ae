/*
 * --mesh FILE.h5: a graph model's mesh for strata-train (decision 0072). The file's dataset
 * "edge_index" holds integers [2, E], PyTorch Geometric's edge_index: row 0 the edges' source
 * nodes, row 1 their destinations, 0-based; its optional integer attribute "nodes" gives the
 * node count (default: the largest index + 1, so that a mesh whose last nodes have no edge
 * states it). The arrays are read before init into this file's static arrays (the tool
 * allocates nothing itself) and every gather and scatter module of the --model line points at
 * them. The library checks the mesh when the model is planned: every index in [0, nodes), and
 * the data's extent against the node or edge count; its refusal names the edge and the value.
 */
#include <hdf5.h>
#include <limits.h>
#include <string.h>

#include "tools/train/train.h"

/* Edges a mesh may have here (two int32 arrays of this many: 16 MiB, touched as read). */
#define MESH_EDGES_MAX (1 << 21)

static int32_t index_rows[2 * MESH_EDGES_MAX];
static struct strata_mesh mesh;

/* The attribute "nodes" of @p ds into @p nodes when it has one: 0, or 2 after the message. */
static int read_nodes(const char *file, hid_t ds, int *nodes)
{
        long long v = 0;
        hid_t a, sp = -1;
        int rc = 0;

        if (H5Aexists(ds, "nodes") <= 0)
                return 0;
        a = H5Aopen(ds, "nodes", H5P_DEFAULT);
        if (a >= 0)
                sp = H5Aget_space(a);
        if (a < 0 || sp < 0 || H5Sget_simple_extent_npoints(sp) != 1 ||
            H5Aread(a, H5T_NATIVE_LLONG, &v) < 0)
                rc = bad("--mesh %s: edge_index's attribute 'nodes' is not one integer", file);
        else if (v < 1 || v > INT_MAX)
                rc = bad("--mesh %s: edge_index's attribute 'nodes' is %lld (1 to %d)", file, v,
                         INT_MAX);
        else
                *nodes = (int)v;
        if (sp >= 0)
                H5Sclose(sp);
        if (a >= 0)
                H5Aclose(a);
        return rc;
}

/* Dataset edge_index of open file @p f into the arrays and counts: 0, or 2 after the message. */
static int read_edges(const char *file, hid_t f)
{
        hsize_t dims[2] = { 0, 0 };
        hid_t ds = H5Dopen2(f, "edge_index", H5P_DEFAULT), sp = -1, ty = -1;
        int rc = 0, nodes = 0;

        if (ds < 0)
                return bad("--mesh %s: no dataset 'edge_index' (integers [2, edges])", file);
        sp = H5Dget_space(ds);
        ty = H5Dget_type(ds);
        if (sp < 0 || ty < 0 || H5Tget_class(ty) != H5T_INTEGER ||
            H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0 ||
            dims[0] != 2 || dims[1] < 1)
                rc = bad("--mesh %s: dataset 'edge_index' is not integers [2, edges] (rows: "
                         "sources, destinations)", file);
        else if (dims[1] > MESH_EDGES_MAX)
                rc = bad("--mesh %s: %llu edges (at most %d)", file, (unsigned long long)dims[1],
                         MESH_EDGES_MAX);
        else if (H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, index_rows) < 0)
                rc = bad("--mesh %s: dataset 'edge_index' could not be read", file);
        if (!rc)
                rc = read_nodes(file, ds, &nodes);
        if (!rc) {
                mesh.edges = (int)dims[1];
                mesh.src = index_rows;
                mesh.dst = index_rows + mesh.edges;
                for (int e = 0; e < 2 * mesh.edges && !nodes; e++)
                        mesh.nodes = index_rows[e] >= mesh.nodes && index_rows[e] < INT_MAX
                                     ? index_rows[e] + 1 : mesh.nodes;
                mesh.nodes = nodes ? nodes : mesh.nodes;
        }
        if (ty >= 0)
                H5Tclose(ty);
        if (sp >= 0)
                H5Sclose(sp);
        H5Dclose(ds);
        return rc;
}

/*
 * @brief --mesh read into the tool's mesh and set on every gather and scatter module of the
 *        parsed --model line; a line with such modules needs --mesh, and --mesh a line with
 *        them. 0, or 2 after the message.
 */
int mesh_attach(struct run *r)
{
        int graph = 0;
        hid_t f;
        int rc;

        for (int i = 0; i < r->model.nmodules; i++)
                graph += r->mods[i].ops == &strata_gather || r->mods[i].ops == &strata_scatter;
        if (!r->o.mesh && !graph)
                return 0;
        if (!r->o.mesh)
                return bad("--model: its gather and scatter modules need a mesh: --mesh FILE.h5 "
                           "(dataset edge_index, integers [2, edges])");
        if (!graph)
                return bad("--mesh %s: the --model line has no gather or scatter module to "
                           "read it", r->o.mesh);
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the user sees Strata's message only */
        f = H5Fis_hdf5(r->o.mesh) > 0 ? H5Fopen(r->o.mesh, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
        if (f < 0)
                return bad("--mesh %s: not a readable HDF5 file", r->o.mesh);
        rc = read_edges(r->o.mesh, f);
        H5Fclose(f);
        for (int i = 0; !rc && i < r->model.nmodules; i++)
                if (r->mods[i].ops == &strata_gather || r->mods[i].ops == &strata_scatter)
                        r->mods[i].mesh = &mesh;
        return rc;
}
