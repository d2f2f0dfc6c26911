/*
 * topo.c - process topologies and neighbourhood collectives against hand-computed answers:
 * Dims_create; a periodic/non-periodic Cartesian grid (Cart_create, Cartdim_get, Cart_get,
 * Cart_rank, Cart_coords, Cart_shift, Cart_sub, Cart_map, Topo_test); a ring as a graph
 * (Graph_create and its queries) and as distributed graphs (Dist_graph_create_adjacent with
 * weights, Dist_graph_create with each edge named by its source only); Neighbor_allgather(v)
 * and Neighbor_alltoall(v/w) on all three (a 2-wide periodic dimension makes one process both
 * neighbours, so blocks must still land in their own slots).
 */
#include "stormtest.h"

static int rank, size;

static void test_dims(void)
{
    int d2[2] = {0, 0}, d3[3] = {0, 0, 0}, fixed[3] = {0, 3, 0};
    CHECK_MPI(MPI_Dims_create(12, 2, d2));
    CHECK(d2[0] == 4 && d2[1] == 3, "Dims_create(12, 2) = %d x %d", d2[0], d2[1]);
    CHECK_MPI(MPI_Dims_create(16, 3, d3));
    CHECK(d3[0] == 4 && d3[1] == 2 && d3[2] == 2, "Dims_create(16, 3) = %d %d %d", d3[0], d3[1],
          d3[2]);
    CHECK_MPI(MPI_Dims_create(24, 3, fixed));
    CHECK(fixed[0] == 4 && fixed[1] == 3 && fixed[2] == 2, "Dims_create(24, {0,3,0}) = %d %d %d",
          fixed[0], fixed[1], fixed[2]);
}

/* The expected value of block j that rank `from` sends to the neighbour at slot `slot`. */
static int val(int from, int slot, int k) { return from * 1000 + slot * 10 + k; }

static void test_cart(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 0}, coords[2], d2[2], p2[2], c2[2];
    int nd, r, src, dst, i, status, nr, k;
    MPI_Comm cart, row;

    CHECK_MPI(MPI_Dims_create(size, 2, dims));
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    CHECK_MPI(MPI_Topo_test(cart, &status));
    CHECK(status == MPI_CART, "Topo_test(cart) = %d", status);
    CHECK_MPI(MPI_Topo_test(MPI_COMM_WORLD, &status));
    CHECK(status == MPI_UNDEFINED, "Topo_test(world) = %d", status);
    CHECK_MPI(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2, "Cartdim_get = %d", nd);
    CHECK_MPI(MPI_Cart_get(cart, 2, d2, p2, c2));
    CHECK(d2[0] == dims[0] && d2[1] == dims[1] && p2[0] == 1 && p2[1] == 0, "Cart_get dims/periods");
    CHECK(c2[0] == rank / dims[1] && c2[1] == rank % dims[1], "Cart_get coords %d,%d", c2[0],
          c2[1]);
    for (r = 0; r < size; r++) {
        CHECK_MPI(MPI_Cart_coords(cart, r, 2, coords));
        CHECK(coords[0] == r / dims[1] && coords[1] == r % dims[1], "Cart_coords(%d)", r);
        CHECK_MPI(MPI_Cart_rank(cart, coords, &i));
        CHECK(i == r, "Cart_rank(coords(%d)) = %d", r, i);
    }
    /* dimension 0 is periodic */
    CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK(src == ((c2[0] + dims[0] - 1) % dims[0]) * dims[1] + c2[1], "shift(0) source %d", src);
    CHECK(dst == ((c2[0] + 1) % dims[0]) * dims[1] + c2[1], "shift(0) dest %d", dst);
    /* dimension 1 is not */
    CHECK_MPI(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    CHECK(src == (c2[1] == 0 ? MPI_PROC_NULL : rank - 1), "shift(1) source %d", src);
    CHECK(dst == (c2[1] == dims[1] - 1 ? MPI_PROC_NULL : rank + 1), "shift(1) dest %d", dst);
    CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &nr));
    CHECK(nr == rank, "Cart_map = %d", nr);

    /* rows: keep dimension 1 */
    {
        int remain[2] = {0, 1}, rs, rr;
        CHECK_MPI(MPI_Cart_sub(cart, remain, &row));
        CHECK_MPI(MPI_Comm_size(row, &rs));
        CHECK_MPI(MPI_Comm_rank(row, &rr));
        CHECK(rs == dims[1] && rr == c2[1], "Cart_sub row: size %d rank %d", rs, rr);
        CHECK_MPI(MPI_Cartdim_get(row, &nd));
        CHECK(nd == 1, "Cart_sub kept %d dims", nd);
        CHECK_MPI(MPI_Comm_free(&row));
    }

    /* neighbour collectives: slots are (dim0 -, dim0 +, dim1 -, dim1 +) */
    {
        int sendv[4], recvv[4], nb[4], gath[4], counts[4], displs[4];
        MPI_Aint bdispls[4];
        MPI_Datatype types[4];
        CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]));
        CHECK_MPI(MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]));
        for (k = 0; k < 4; k++) {
            sendv[k] = val(rank, k, 0);
            recvv[k] = gath[k] = -1;
        }
        CHECK_MPI(MPI_Neighbor_alltoall(sendv, 1, MPI_INT, recvv, 1, MPI_INT, cart));
        for (k = 0; k < 4; k++) {
            /* my slot k (from the lower neighbour when k is even) got what that neighbour sent
               towards me: its slot k^1 */
            int want = nb[k] == MPI_PROC_NULL ? -1 : val(nb[k], k ^ 1, 0);
            CHECK(recvv[k] == want, "cart alltoall slot %d: %d, expected %d", k, recvv[k], want);
        }
        CHECK_MPI(MPI_Neighbor_allgather(&rank, 1, MPI_INT, gath, 1, MPI_INT, cart));
        for (k = 0; k < 4; k++)
            CHECK(gath[k] == (nb[k] == MPI_PROC_NULL ? -1 : nb[k]), "cart allgather slot %d: %d",
                  k, gath[k]);
        /* alltoallv with reversed displacements, alltoallw with byte displacements */
        for (k = 0; k < 4; k++) {
            counts[k] = 1;
            displs[k] = 3 - k;
            recvv[k] = -1;
        }
        CHECK_MPI(MPI_Neighbor_alltoallv(sendv, counts, displs, MPI_INT, recvv, counts, displs,
                                         MPI_INT, cart));
        /* (a peer that is both neighbours of a dimension is skipped here: MPICH pairs those
           blocks by posting order in the v/w forms) */
        for (k = 0; k < 4; k++) {
            int want = nb[k] == MPI_PROC_NULL ? -1 : val(nb[k], 3 - (k ^ 1), 0);
            if (nb[k] == nb[k ^ 1])
                continue;
            CHECK(recvv[3 - k] == want, "cart alltoallv slot %d: %d, expected %d", k,
                  recvv[3 - k], want);
        }
        for (k = 0; k < 4; k++) {
            bdispls[k] = (MPI_Aint)(k * sizeof(int));
            types[k] = MPI_INT;
            recvv[k] = -1;
        }
        CHECK_MPI(MPI_Neighbor_alltoallw(sendv, counts, bdispls, types, recvv, counts, bdispls,
                                         types, cart));
        for (k = 0; k < 4; k++) {
            int want = nb[k] == MPI_PROC_NULL ? -1 : val(nb[k], k ^ 1, 0);
            if (nb[k] == nb[k ^ 1])
                continue;
            CHECK(recvv[k] == want, "cart alltoallw slot %d: %d, expected %d", k, recvv[k], want);
        }
    }
    CHECK_MPI(MPI_Comm_free(&cart));
}

static void test_graph(void)
{
    /* a ring: node i's neighbours are i-1 and i+1 (once each when size is 2, none when 1) */
    int *index = malloc(sizeof(int) * size), *edges = malloc(sizeof(int) * 2 * size);
    int i, ne = 0, nn, nedges, cnt, nb[2], status, got[2], sendv[2], recvv[2];
    MPI_Comm g;
    for (i = 0; i < size; i++) {
        if (size > 1)
            edges[ne++] = (i + size - 1) % size;
        if (size > 2)
            edges[ne++] = (i + 1) % size;
        index[i] = ne;
    }
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g));
    CHECK_MPI(MPI_Topo_test(g, &status));
    CHECK(status == MPI_GRAPH, "Topo_test(graph) = %d", status);
    CHECK_MPI(MPI_Graphdims_get(g, &nn, &nedges));
    CHECK(nn == size && nedges == ne, "Graphdims_get %d %d", nn, nedges);
    CHECK_MPI(MPI_Graph_neighbors_count(g, rank, &cnt));
    CHECK(cnt == (size > 2 ? 2 : size - 1), "Graph_neighbors_count = %d", cnt);
    CHECK_MPI(MPI_Graph_neighbors(g, rank, 2, nb));
    if (cnt > 0)
        CHECK(nb[0] == (rank + size - 1) % size, "Graph_neighbors[0] = %d", nb[0]);
    if (cnt > 1)
        CHECK(nb[1] == (rank + 1) % size, "Graph_neighbors[1] = %d", nb[1]);
    for (i = 0; i < 2; i++) {
        got[i] = recvv[i] = -1;
        sendv[i] = val(rank, i, 1);
    }
    CHECK_MPI(MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, g));
    for (i = 0; i < cnt; i++)
        CHECK(got[i] == nb[i], "graph allgather slot %d: %d", i, got[i]);
    if (size != 2) {
        /* with 2 ranks the ring has one edge each way: fine too, but the slot rule differs */
        CHECK_MPI(MPI_Neighbor_alltoall(sendv, 1, MPI_INT, recvv, 1, MPI_INT, g));
        for (i = 0; i < cnt; i++) {
            /* neighbour nb[i] sent me its block addressed to me: I am its slot 1 if I am its
               successor, slot 0 if its predecessor */
            int slot = (nb[i] + 1) % size == rank ? 1 : 0;
            CHECK(recvv[i] == val(nb[i], slot, 1), "graph alltoall slot %d: %d", i, recvv[i]);
        }
    }
    CHECK_MPI(MPI_Comm_free(&g));
    free(index);
    free(edges);
}

static void test_dist_graph(void)
{
    int src = (rank + size - 1) % size, dst = (rank + 1) % size, w_in = 10 + src, w_out = 10 + rank;
    int indeg, outdeg, weighted, s, d, sw, dw, status, got, deg = 1;
    MPI_Comm g;

    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &src, &w_in, 1, &dst, &w_out,
                                             MPI_INFO_NULL, 0, &g));
    CHECK_MPI(MPI_Topo_test(g, &status));
    CHECK(status == MPI_DIST_GRAPH, "Topo_test(dist graph) = %d", status);
    CHECK_MPI(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && weighted, "adjacent counts %d %d %d", indeg, outdeg,
          weighted);
    CHECK_MPI(MPI_Dist_graph_neighbors(g, 1, &s, &sw, 1, &d, &dw));
    CHECK(s == src && d == dst && sw == w_in && dw == w_out, "adjacent neighbours");
    got = -1;
    CHECK_MPI(MPI_Neighbor_allgather(&rank, 1, MPI_INT, &got, 1, MPI_INT, g));
    CHECK(got == src, "dist graph allgather got %d, expected %d", got, src);
    CHECK_MPI(MPI_Comm_free(&g));

    /* general form: each rank names only its out-edge rank -> rank+1, unweighted */
    CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &deg, &dst, MPI_UNWEIGHTED,
                                    MPI_INFO_NULL, 0, &g));
    CHECK_MPI(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && !weighted, "general counts %d %d %d", indeg, outdeg,
          weighted);
    CHECK_MPI(MPI_Dist_graph_neighbors(g, 1, &s, MPI_UNWEIGHTED, 1, &d, MPI_UNWEIGHTED));
    CHECK(s == src && d == dst, "general neighbours %d %d", s, d);
    {
        int counts = 1, displs = 0;
        got = -1;
        CHECK_MPI(MPI_Neighbor_allgatherv(&rank, 1, MPI_INT, &got, &counts, &displs, MPI_INT, g));
        CHECK(got == src, "dist graph allgatherv got %d", got);
    }
    CHECK_MPI(MPI_Comm_free(&g));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("topo");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_dims();
    test_cart();
    test_graph();
    test_dist_graph();
    return test_end();
}
