/*
 * blacs_combine.c - the reductions ScaLAPACK's BLACS makes (its ?GAMX2D/?GAMN2D "combines"), as
 * MPI calls, checked against values computed locally.
 *
 * BLACS builds a process grid with MPI_Comm_create and splits it into rows and columns. An
 * absolute-value maximum with its location reduces one struct instance: N values at offset 0
 * and N unsigned short "distances" (the rank that holds each) right after them, made with
 * MPI_Type_create_struct, committed, used once and freed, with a commutative user operation
 * created and freed around the call that ignores its count argument and walks the whole
 * layout from a global N (so it only works if the library hands it the user's layout, not a
 * packed or split copy). Without the location it reduces N plain values with an operation that
 * does use the count. Also: a struct padded to a larger extent with MPI_Type_create_resized (the
 * MPI_UB idiom), several instances in one reduction, and MPI_Reduce to every root.
 *
 * Values are small integers with many ties in magnitude, so the tie rule (lowest distance wins)
 * decides often; every rank checks value, sign and location of every element, and an Allreduce
 * must give every rank the same answer.
 */
#include "stormtest.h"

#include <math.h>
#include <stddef.h>

typedef unsigned short dist_t;

/* The element count the operations read, as BLACS keeps it in a global. */
static int g_n;

/* |max| with location over the BLACS layout: N floats, then N distances. */
static void amx_float(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)len;
    (void)dt;
    float *v1 = inout, *v2 = in;
    dist_t *d1 = (dist_t *)((char *)inout + g_n * sizeof(float));
    dist_t *d2 = (dist_t *)((char *)in + g_n * sizeof(float));
    for (int k = 0; k < g_n; k++) {
        float diff = fabsf(v1[k]) - fabsf(v2[k]);
        if (diff < 0 || (diff == 0 && d1[k] > d2[k])) {
            v1[k] = v2[k];
            d1[k] = d2[k];
        }
    }
}

/* The same over ints; BLACS aligns the distances after the values. */
static void amx_int(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)len;
    (void)dt;
    int *v1 = inout, *v2 = in;
    dist_t *d1 = (dist_t *)((char *)inout + g_n * sizeof(int));
    dist_t *d2 = (dist_t *)((char *)in + g_n * sizeof(int));
    for (int k = 0; k < g_n; k++) {
        int a = abs(v1[k]), b = abs(v2[k]);
        if (a < b || (a == b && d1[k] > d2[k])) {
            v1[k] = v2[k];
            d1[k] = d2[k];
        }
    }
}

/* |max| without location: the count says how many floats. */
static void amx2_float(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    float *v1 = inout, *v2 = in;
    for (int k = 0; k < *len; k++)
        if (fabsf(v1[k]) < fabsf(v2[k]))
            v1[k] = v2[k];
}

/* A padded record {float value; int where; (padding to 16 bytes)} per element. */
struct rec {
    float value;
    int where;
    char pad[8];
};

static void amx_rec(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    MPI_Aint lb, extent;
    MPI_Type_get_extent(*dt, &lb, &extent);
    if (extent != (MPI_Aint)sizeof(struct rec))
        FAIL("operation got a type of extent %ld, expected %zu", (long)extent, sizeof(struct rec));
    struct rec *a = inout, *b = in;
    for (int k = 0; k < *len; k++) {
        float diff = fabsf(a[k].value) - fabsf(b[k].value);
        if (diff < 0 || (diff == 0 && a[k].where > b[k].where)) {
            /* Only the typed fields: the padding is no part of the data. */
            a[k].value = b[k].value;
            a[k].where = b[k].where;
        }
    }
}

/* Element k's value at the process of rank r in a scope, for round `round`: -3..3. */
static int value_of(int round, int r, int k)
{
    unsigned x = (unsigned)(round * 7919 + r * 104729 + k * 1299709) * 2654435761u;
    return (int)((x >> 16) % 7) - 3;
}

/* The expected winner of element k among the scope's `np` ranks. */
static int winner(int round, int np, int k)
{
    int best = 0;
    for (int r = 1; r < np; r++)
        if (abs(value_of(round, r, k)) > abs(value_of(round, best, k)))
            best = r;
    return best;
}

/* One ?GAMX2D with location over `comm` (root < 0: everyone gets it). */
static void amx_with_location(MPI_Comm comm, int round, int n, int as_int, int root)
{
    int me, np;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &np);
    size_t vsize = as_int ? sizeof(int) : sizeof(float);
    size_t len = n * vsize + n * sizeof(dist_t);
    len = (len + 7) / 8 * 8; /* BLACS keeps the second buffer 8-byte aligned */
    char *buf = calloc(2, len);
    CHECK(buf != NULL, "out of memory");
    char *out = buf + len;
    for (int k = 0; k < n; k++) {
        if (as_int)
            ((int *)buf)[k] = value_of(round, me, k);
        else
            ((float *)buf)[k] = (float)value_of(round, me, k);
        ((dist_t *)(buf + n * vsize))[k] = (dist_t)me;
    }
    int lens[2] = {n, n};
    MPI_Aint disps[2] = {0, (MPI_Aint)(n * vsize)};
    MPI_Datatype types[2] = {as_int ? MPI_INT : MPI_FLOAT, MPI_UNSIGNED_SHORT}, t;
    MPI_Op op;
    g_n = n;
    CHECK_MPI(MPI_Type_create_struct(2, lens, disps, types, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Op_create(as_int ? amx_int : amx_float, 1, &op));
    if (root < 0)
        CHECK_MPI(MPI_Allreduce(buf, out, 1, t, op, comm));
    else
        CHECK_MPI(MPI_Reduce(buf, out, 1, t, op, root, comm));
    CHECK_MPI(MPI_Op_free(&op));
    CHECK_MPI(MPI_Type_free(&t));
    if (root < 0 || me == root) {
        for (int k = 0; k < n; k++) {
            int w = winner(round, np, k);
            int want = value_of(round, w, k);
            /* Exact: a float result must be the very value sent. */
            double got = as_int ? ((int *)out)[k] : ((float *)out)[k];
            int same = as_int ? ((int *)out)[k] == want : ((float *)out)[k] == (float)want;
            dist_t where = ((dist_t *)(out + n * vsize))[k];
            CHECK(same && where == w,
                  "round %d, %s n %d root %d, element %d: got %.9g from %u, expected %d from %d",
                  round, as_int ? "int" : "float", n, root, k, got, where, want, w);
        }
    }
    free(buf);
}

/* One ?GAMX2D without location: plain floats, the operation uses its count. */
static void amx_without_location(MPI_Comm comm, int round, int n)
{
    int me, np;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &np);
    float *in = malloc(2 * n * sizeof(float));
    CHECK(in != NULL, "out of memory");
    float *out = in + n;
    for (int k = 0; k < n; k++)
        in[k] = (float)value_of(round, me, k);
    MPI_Op op;
    CHECK_MPI(MPI_Op_create(amx2_float, 1, &op));
    CHECK_MPI(MPI_Allreduce(in, out, n, MPI_FLOAT, op, comm));
    CHECK_MPI(MPI_Op_free(&op));
    for (int k = 0; k < n; k++) {
        /* Without a location the sign of a tie is any holder's: compare magnitudes. */
        int want = abs(value_of(round, winner(round, np, k), k));
        CHECK(fabsf(out[k]) == (float)want, "round %d, n %d, element %d: |%g|, expected %d", round,
              n, k, out[k], want);
    }
    free(in);
}

/* Several padded records in one Allreduce: the type's extent, not its size, separates them. */
static void padded_records(MPI_Comm comm, int round, int n)
{
    int me, np;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &np);
    struct rec *in = calloc(2 * n, sizeof(struct rec));
    CHECK(in != NULL, "out of memory");
    struct rec *out = in + n;
    for (int k = 0; k < n; k++) {
        in[k].value = (float)value_of(round, me, k);
        in[k].where = me;
        memset(in[k].pad, 0x5a, sizeof in[k].pad);
        memset(out[k].pad, 0xa5, sizeof out[k].pad);
    }
    int lens[2] = {1, 1};
    MPI_Aint disps[2] = {offsetof(struct rec, value), offsetof(struct rec, where)};
    MPI_Datatype types[2] = {MPI_FLOAT, MPI_INT}, s, t;
    MPI_Op op;
    CHECK_MPI(MPI_Type_create_struct(2, lens, disps, types, &s));
    CHECK_MPI(MPI_Type_create_resized(s, 0, sizeof(struct rec), &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Op_create(amx_rec, 1, &op));
    CHECK_MPI(MPI_Allreduce(in, out, n, t, op, comm));
    CHECK_MPI(MPI_Op_free(&op));
    CHECK_MPI(MPI_Type_free(&t));
    CHECK_MPI(MPI_Type_free(&s));
    for (int k = 0; k < n; k++) {
        int w = winner(round, np, k);
        CHECK(out[k].value == (float)value_of(round, w, k) && out[k].where == w,
              "round %d, padded n %d, element %d: got %g from %d, expected %d from %d", round, n, k,
              out[k].value, out[k].where, value_of(round, w, k), w);
        for (size_t b = 0; b < sizeof out[k].pad; b++)
            CHECK((unsigned char)out[k].pad[b] == 0xa5,
                  "round %d, padded n %d: padding of element %d written", round, n, k);
    }
    free(in);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("blacs_combine");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 40;

    /* A grid of every process but the last (when there are more than two), as BLACS makes one
     * from a group: the others get MPI_COMM_NULL and sit out. */
    int in_grid = size > 2 ? size - 1 : size;
    MPI_Group world, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range[1][3] = {{0, in_grid - 1, 1}};
    CHECK_MPI(MPI_Group_range_incl(world, 1, range, &g));
    MPI_Comm all;
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &all));
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    if (rank < in_grid) {
        CHECK(all != MPI_COMM_NULL, "a grid member got MPI_COMM_NULL");
        int cols = in_grid >= 4 ? 2 : 1;
        MPI_Comm row, col;
        CHECK_MPI(MPI_Comm_split(all, rank / cols, rank % cols, &row));
        CHECK_MPI(MPI_Comm_split(all, rank % cols, rank / cols, &col));
        MPI_Comm scopes[3] = {all, row, col};
        for (int round = 0; round < rounds; round++) {
            int n = 1 + round % 13;
            for (int s = 0; s < 3; s++) {
                int np;
                MPI_Comm_size(scopes[s], &np);
                amx_with_location(scopes[s], round, n, round % 2, -1);
                amx_with_location(scopes[s], round, n, round % 2, round % np);
                amx_without_location(scopes[s], round, n);
                padded_records(scopes[s], round, n);
            }
        }
        MPI_Comm_free(&row);
        MPI_Comm_free(&col);
        MPI_Comm_free(&all);
    } else {
        CHECK(all == MPI_COMM_NULL, "a process outside the group got a communicator");
    }
    return test_end();
}
