/*
 * coll.c - every collective against a reference computed locally.
 *
 *   Data movement: Bcast, Gather(v), Scatter(v), Allgather(v), Alltoall(v/w), for per-block
 *   counts 0, 1, 7, 1001 and a large one (>= 1 MiB moved), with MPI_INT and with a strided
 *   vector type (2 ints, stride 2: holes that must stay untouched) on either side, with
 *   MPI_IN_PLACE where the standard allows it, from several roots.
 *   Reductions: Reduce, Allreduce, Reduce_scatter(_block), Scan, Exscan, Reduce_local with
 *   MPI_SUM on MPI_INT, MPI_SUM on the vector type (a derived type of one basic type),
 *   MPI_MINLOC/MPI_MAXLOC on MPI_2INT and MPI_DOUBLE_INT, a commutative user operation and a
 *   non-commutative one (composition of affine maps, which only rank order gets right), in
 *   place and not; MPI_Op_commutative.
 *   Non-blocking: the I-form of every collective, several outstanding at once on two
 *   communicators, completed by Waitall, Testall and Waitany.
 *   Everything runs on MPI_COMM_WORLD and on a duplicate.
 *
 * usage: coll [--only NAME] [--large INTS] [--split [--free-pending]]
 *   --only NAME   run one group: barrier bcast gather scatter allgather alltoall reduce
 *                 allreduce reduce_scatter scan nonblocking local
 *   --large INTS  the large count (default 262144 ints = 1 MiB)
 *   --split       also run everything on a split of MPI_COMM_WORLD: from 3 ranks on without
 *                 world rank 1 (which gets a communicator of its own), ranks in reverse order,
 *                 so that on several nodes the node leaders are not world's and a node may hold
 *                 members of non-adjacent ranks
 *   --free-pending  with --split: also free a duplicate of the split while an MPI_Iallreduce on
 *                 it is pending (legal MPI: it completes normally, and the communicator goes
 *                 when it has).
 *
 * Every rank computes every rank's input from a formula, so every check is local.
 */
#include "stormtest.h"

#define HOLE (-77777)

static int rank, size;
static long large_ints = 262144;
static const char *only;
static int split, free_pending;
static MPI_Comm comm;
static MPI_Datatype vec_t, affine_t;
static MPI_Op affine_op, user_sum_op;
/* Known limits of the reference MPICH (4.0.2), worked around with a note: predefined operations
 * on derived datatypes are refused (MPIR_SUM_check_dtype), MPI_Reduce with MPI_IN_PLACE at a
 * non-zero root crashes from about 1000 elements, and MPI_Reduce_scatter with MPI_IN_PLACE moves
 * a rank's block to the front with an overlapping memcpy (an assertion) when blocks are large. */
static int is_mpich;

static int want(const char *name)
{
    return only == NULL || strcmp(only, name) == 0;
}

/* Element k of rank r's data (salt tells collectives apart). */
static int val(int r, long k, int salt)
{
    return (int)(((long)r * 7919L + k * 104729L + (long)salt * 31L) % 2001L) - 1000;
}

/* ---- layouts: MPI_INT, or the vector type (2 ints at offsets 0 and 2, extent 3) ---------- */

typedef struct {
    MPI_Datatype t;
    int per; /* ints per instance */
    int ext; /* extent in ints */
    const char *name;
} layout;

static layout L_INT, L_VEC;

/* ints of memory for `n` ints of data */
static long span(const layout *L, long n)
{
    return n / L->per * L->ext;
}

/* index of data int k */
static long idx(const layout *L, long k)
{
    return k / L->per * L->ext + (k % L->per) * 2;
}

static int *alloc_ints(long n)
{
    int *p = (int *)test_malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    long i;
    for (i = 0; i < n; i++)
        p[i] = HOLE;
    return p;
}

/* Writes data ints [k0, k0 + n) of (r, salt) at data positions [at, at + n) of buf. */
static void put(int *buf, const layout *L, long at, long n, int r, long k0, int salt)
{
    long k;
    for (k = 0; k < n; k++)
        buf[idx(L, at + k)] = val(r, k0 + k, salt);
}

static void expect(const int *buf, const layout *L, long at, long n, int r, long k0, int salt,
                   const char *what)
{
    long k;
    for (k = 0; k < n; k++) {
        int got = buf[idx(L, at + k)], w = val(r, k0 + k, salt);
        if (got != w)
            FAIL("%s: element %ld (data of rank %d) is %d, expected %d", what, at + k, r, got, w);
    }
}

/* Every int of buf[0, total) that is not a data position of [0, ndata) must still be HOLE. */
static void holes(const int *buf, const layout *L, long total, long ndata, const char *what)
{
    long i;
    for (i = 0; i < total; i++) {
        int data = 0;
        if (L->per == 2) {
            long inst = i / 3, off = i % 3;
            data = off != 1 && inst * 2 + (off == 2) < ndata;
        } else {
            data = i < ndata;
        }
        if (!data && buf[i] != HOLE)
            FAIL("%s: int %ld outside the data was overwritten (%d)", what, i, buf[i]);
    }
}

static long counts[5];
static const int ncounts = 5;

/* layout pairs for data movement: send side, receive side */
static const layout *pairs[3][2];

/* Data ints of a message for count c with layout pair li: c for INT/INT, 2c otherwise. */
static long data_ints(int li, long c)
{
    return li == 0 ? c : 2 * c;
}

static char what[256];

/* ---- barrier ---------------------------------------------------------------------------- */

static void test_barrier(void)
{
    double entered, left;
    int i;
    for (i = 0; i < 5; i++)
        CHECK_MPI(MPI_Barrier(comm));
    /* The last rank enters late; nobody may leave before it entered. Compared on the one clock
     * all ranks of a node share (MPI_Wtime is CLOCK_MONOTONIC here), so a rank descheduled
     * between the barriers cannot make a correct barrier look early. */
    if (rank == size - 1)
        test_sleep_ms(100);
    entered = MPI_Wtime();
    CHECK_MPI(MPI_Barrier(comm));
    left = MPI_Wtime();
    CHECK_MPI(MPI_Bcast(&entered, 1, MPI_DOUBLE, size - 1, comm));
    CHECK(left >= entered, "left the barrier %.3f ms before the late rank %d entered it",
          (entered - left) * 1e3, size - 1);
}

/* ---- broadcast -------------------------------------------------------------------------- */

static void test_bcast(void)
{
    int ci, li, ri;
    int roots[3] = {0, size - 1, size / 2};
    for (ci = 0; ci < ncounts; ci++)
        for (li = 0; li < 3; li++)
            for (ri = 0; ri < 3; ri++) {
                int root = roots[ri], salt = 1 + ci * 10 + li * 3 + ri;
                long n = data_ints(li, counts[ci]);
                /* the root sends with one layout, the others receive with the other */
                const layout *L = rank == root ? pairs[li][0] : pairs[li][1];
                long total = span(L, n);
                int *buf = alloc_ints(total);
                if (rank == root)
                    put(buf, L, 0, n, root, 0, salt);
                CHECK_MPI(MPI_Bcast(buf, (int)(n / L->per), L->t, root, comm));
                snprintf(what, sizeof what, "Bcast count %ld %s root %d", counts[ci], L->name, root);
                expect(buf, L, 0, n, root, 0, salt, what);
                holes(buf, L, total, n, what);
                free(buf);
            }
}

/* ---- gather and scatter ----------------------------------------------------------------- */

static void test_gather(int scatter)
{
    int ci, li, ri, inplace;
    int roots[3] = {0, size - 1, size / 2};
    for (ci = 0; ci < ncounts; ci++)
        for (li = 0; li < 3; li++)
            for (ri = 0; ri < 3; ri++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int root = roots[ri], salt = 100 + ci * 20 + li * 6 + ri * 2 + inplace, r;
                    long c = ci == ncounts - 1 ? counts[ci] / size + 1 : counts[ci];
                    long n = data_ints(li, c);
                    const layout *S = pairs[li][0], *R = pairs[li][1];
                    /* the root's all-blocks buffer (R for gather, S for scatter) */
                    const layout *A = scatter ? S : R, *B = scatter ? R : S;
                    long atotal = span(A, n * size), btotal = span(B, n);
                    int *all = alloc_ints(rank == root ? atotal : 0);
                    int *mine = alloc_ints(btotal);
                    int in_place = inplace && rank == root;
                    if (!scatter) {
                        if (in_place) /* the root's own block sits in the receive buffer */
                            put(all, A, n * root, n, rank, 0, salt);
                        else
                            put(mine, B, 0, n, rank, 0, salt);
                        CHECK_MPI(MPI_Gather(in_place ? MPI_IN_PLACE : mine, (int)(n / B->per), B->t,
                                             all, (int)(n / A->per), A->t, root, comm));
                        if (rank == root) {
                            snprintf(what, sizeof what, "Gather count %ld %s->%s root %d%s", c, B->name,
                                     A->name, root, in_place ? " in place" : "");
                            for (r = 0; r < size; r++)
                                expect(all, A, n * r, n, r, 0, salt, what);
                            holes(all, A, atotal, n * size, what);
                        }
                    } else {
                        if (rank == root)
                            for (r = 0; r < size; r++)
                                put(all, A, n * r, n, r, 0, salt);
                        CHECK_MPI(MPI_Scatter(all, (int)(n / A->per), A->t,
                                              in_place ? MPI_IN_PLACE : mine, (int)(n / B->per), B->t,
                                              root, comm));
                        snprintf(what, sizeof what, "Scatter count %ld %s->%s root %d%s", c, A->name,
                                 B->name, root, in_place ? " in place" : "");
                        if (!in_place) {
                            expect(mine, B, 0, n, rank, 0, salt, what);
                            holes(mine, B, btotal, n, what);
                        } else {
                            for (r = 0; r < size; r++)
                                expect(all, A, n * r, n, r, 0, salt, what);
                        }
                    }
                    free(all);
                    free(mine);
                }
}

/* Counts of the v-variants: rank r has base + 2 * (r % 3) data ints; blocks are separated by a
 * gap of 2 data ints (one vector instance) in the receive buffer. */
static long vcount(long base, int r)
{
    return base + 2 * (r % 3);
}

static long vdispl(long base, int r)
{
    long d = 0;
    int q;
    for (q = 0; q < r; q++)
        d += vcount(base, q) + 2;
    return d;
}

static void test_gatherv(int scatter)
{
    int ci, li, ri, inplace, r;
    int roots[2] = {0, size - 1};
    int *cnt = (int *)test_malloc(sizeof(int) * (size_t)size);
    int *dsp = (int *)test_malloc(sizeof(int) * (size_t)size);
    for (ci = 0; ci < ncounts; ci++)
        for (li = 0; li < 3; li++)
            for (ri = 0; ri < 2; ri++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int root = roots[ri], salt = 300 + ci * 20 + li * 4 + ri * 2 + inplace;
                    long base = 2 * (ci == ncounts - 1 ? counts[ci] / size / 2 + 1 : counts[ci]);
                    const layout *S = pairs[li][0], *R = pairs[li][1];
                    const layout *A = scatter ? S : R, *B = scatter ? R : S;
                    long n = vcount(base, rank), end = vdispl(base, size);
                    long atotal = span(A, end), btotal = span(B, n);
                    int *all = alloc_ints(rank == root ? atotal : 0);
                    int *mine = alloc_ints(btotal);
                    int in_place = inplace && rank == root;
                    for (r = 0; r < size; r++) {
                        cnt[r] = (int)(vcount(base, r) / A->per);
                        dsp[r] = (int)(vdispl(base, r) / A->per);
                    }
                    if (!scatter) {
                        put(mine, B, 0, n, rank, 0, salt);
                        if (in_place)
                            put(all, A, vdispl(base, root), n, rank, 0, salt);
                        CHECK_MPI(MPI_Gatherv(in_place ? MPI_IN_PLACE : mine, (int)(n / B->per), B->t,
                                              all, cnt, dsp, A->t, root, comm));
                        if (rank == root) {
                            snprintf(what, sizeof what, "Gatherv base %ld %s->%s root %d%s", base, B->name,
                                     A->name, root, in_place ? " in place" : "");
                            for (r = 0; r < size; r++)
                                expect(all, A, vdispl(base, r), vcount(base, r), r, 0, salt, what);
                            if (A->per == 1)
                                for (r = 0; r < size; r++) {
                                    long g = vdispl(base, r) + vcount(base, r);
                                    CHECK(all[g] == HOLE && all[g + 1] == HOLE, "%s: gap after block %d written",
                                          what, r);
                                }
                        }
                    } else {
                        if (rank == root)
                            for (r = 0; r < size; r++)
                                put(all, A, vdispl(base, r), vcount(base, r), r, 0, salt);
                        CHECK_MPI(MPI_Scatterv(all, cnt, dsp, A->t, in_place ? MPI_IN_PLACE : mine,
                                               (int)(n / B->per), B->t, root, comm));
                        snprintf(what, sizeof what, "Scatterv base %ld %s->%s root %d%s", base, A->name,
                                 B->name, root, in_place ? " in place" : "");
                        if (!in_place) {
                            expect(mine, B, 0, n, rank, 0, salt, what);
                            holes(mine, B, btotal, n, what);
                        }
                    }
                    free(all);
                    free(mine);
                }
    free(cnt);
    free(dsp);
}

/* ---- allgather -------------------------------------------------------------------------- */

static void test_allgather(void)
{
    int ci, li, inplace, r, v;
    int *cnt = (int *)test_malloc(sizeof(int) * (size_t)size);
    int *dsp = (int *)test_malloc(sizeof(int) * (size_t)size);
    for (v = 0; v < 2; v++)
        for (ci = 0; ci < ncounts; ci++)
            for (li = 0; li < 3; li++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int salt = 500 + v * 200 + ci * 20 + li * 2 + inplace;
                    long c = ci == ncounts - 1 ? counts[ci] / size + 1 : counts[ci];
                    const layout *S = pairs[li][0], *R = pairs[li][1];
                    long base = v ? 2 * c : data_ints(li, c);
                    long n = v ? vcount(base, rank) : base;
                    long end = v ? vdispl(base, size) : base * size;
                    long rtotal = span(R, end);
                    int *all = alloc_ints(rtotal), *mine = alloc_ints(span(S, n));
                    long at = v ? vdispl(base, rank) : base * rank;
                    for (r = 0; r < size; r++) {
                        cnt[r] = (int)((v ? vcount(base, r) : base) / R->per);
                        dsp[r] = (int)((v ? vdispl(base, r) : base * r) / R->per);
                    }
                    if (inplace)
                        put(all, R, at, n, rank, 0, salt);
                    else
                        put(mine, S, 0, n, rank, 0, salt);
                    if (v)
                        CHECK_MPI(MPI_Allgatherv(inplace ? MPI_IN_PLACE : mine, (int)(n / S->per), S->t, all,
                                                 cnt, dsp, R->t, comm));
                    else
                        CHECK_MPI(MPI_Allgather(inplace ? MPI_IN_PLACE : mine, (int)(n / S->per), S->t, all,
                                                cnt[0], R->t, comm));
                    snprintf(what, sizeof what, "Allgather%s count %ld %s->%s%s", v ? "v" : "", c, S->name,
                             R->name, inplace ? " in place" : "");
                    for (r = 0; r < size; r++)
                        expect(all, R, v ? vdispl(base, r) : base * r, v ? vcount(base, r) : base, r, 0, salt,
                               what);
                    if (!v)
                        holes(all, R, rtotal, end, what);
                    free(all);
                    free(mine);
                }
    free(cnt);
    free(dsp);
}

/* ---- all-to-all ------------------------------------------------------------------------- */

/* Data of the block rank `from` sends to rank `to`: rank (from * size + to) of the formula. */
static int pair_id(int from, int to)
{
    return from * size + to;
}

static void test_alltoall(void)
{
    int ci, li, inplace, r, v;
    int *sc = (int *)test_malloc(sizeof(int) * (size_t)size), *sd = (int *)test_malloc(sizeof(int) * (size_t)size);
    int *rc = (int *)test_malloc(sizeof(int) * (size_t)size), *rd = (int *)test_malloc(sizeof(int) * (size_t)size);
    MPI_Datatype *st = (MPI_Datatype *)test_malloc(sizeof(MPI_Datatype) * (size_t)size);
    MPI_Datatype *rt = (MPI_Datatype *)test_malloc(sizeof(MPI_Datatype) * (size_t)size);
    for (v = 0; v < 3; v++) /* alltoall, alltoallv, alltoallw */
        for (ci = 0; ci < ncounts; ci++)
            for (li = 0; li < 3; li++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int salt = 900 + v * 200 + ci * 20 + li * 2 + inplace;
                    long c = ci == ncounts - 1 ? counts[ci] / size + 1 : counts[ci];
                    const layout *S = pairs[li][0], *R = pairs[li][1];
                    long base = v ? 2 * c : data_ints(li, c);
                    /* v and w: block from->to has vcount(base, from + to) ints */
                    long send_end = 0, recv_end = 0;
                    int *sbuf, *rbuf;
                    long sdsp[64], rdsp[64];
                    if (inplace)
                        S = R;
                    for (r = 0; r < size; r++) {
                        long sn = v ? vcount(base, rank + r) : base, rn = v ? vcount(base, r + rank) : base;
                        /* w: alternate the layouts per peer (only data of equal size moves) */
                        const layout *SL = (v == 2 && !inplace) ? ((r % 2) ? &L_VEC : &L_INT) : S;
                        const layout *RL = v == 2 ? ((r % 2) ? &L_INT : &L_VEC) : R;
                        if (v == 2 && inplace)
                            SL = RL;
                        sdsp[r] = send_end;
                        rdsp[r] = recv_end;
                        sc[r] = (int)(sn / SL->per);
                        rc[r] = (int)(rn / RL->per);
                        st[r] = SL->t;
                        rt[r] = RL->t;
                        /* displacements: extents for v (one layout), bytes for w */
                        send_end += span(SL, sn) + (v ? SL->ext : 0);
                        recv_end += span(RL, rn) + (v ? RL->ext : 0);
                        sd[r] = (int)(v == 2 ? sdsp[r] * (long)sizeof(int) : sdsp[r] / SL->ext);
                        rd[r] = (int)(v == 2 ? rdsp[r] * (long)sizeof(int) : rdsp[r] / RL->ext);
                    }
                    sbuf = alloc_ints(send_end);
                    rbuf = alloc_ints(recv_end);
                    for (r = 0; r < size; r++) {
                        long sn = v ? vcount(base, rank + r) : base;
                        const layout *SL = (v == 2) ? ((r % 2) ? &L_VEC : &L_INT) : S;
                        const layout *RL = v == 2 ? ((r % 2) ? &L_INT : &L_VEC) : R;
                        if (inplace)
                            put(rbuf + rdsp[r], RL, 0, sn, pair_id(rank, r), 0, salt);
                        else
                            put(sbuf + sdsp[r], SL, 0, sn, pair_id(rank, r), 0, salt);
                    }
                    if (v == 0)
                        CHECK_MPI(MPI_Alltoall(inplace ? MPI_IN_PLACE : sbuf, sc[0], S->t, rbuf, rc[0], R->t,
                                               comm));
                    else if (v == 1)
                        CHECK_MPI(MPI_Alltoallv(inplace ? MPI_IN_PLACE : sbuf, sc, sd, S->t, rbuf, rc, rd,
                                                R->t, comm));
                    else
                        CHECK_MPI(MPI_Alltoallw(inplace ? MPI_IN_PLACE : sbuf, sc, sd, st, rbuf, rc, rd, rt,
                                                comm));
                    snprintf(what, sizeof what, "Alltoall%s count %ld %s->%s%s", v == 0 ? "" : v == 1 ? "v" : "w",
                             c, S->name, R->name, inplace ? " in place" : "");
                    for (r = 0; r < size; r++) {
                        long rn = v ? vcount(base, r + rank) : base;
                        const layout *RL = v == 2 ? ((r % 2) ? &L_INT : &L_VEC) : R;
                        expect(rbuf + rdsp[r], RL, 0, rn, pair_id(r, rank), 0, salt, what);
                        if (v)
                            CHECK(rbuf[rdsp[r] + span(RL, rn)] == HOLE, "%s: gap after block %d written", what, r);
                    }
                    free(sbuf);
                    free(rbuf);
                }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(st);
    free(rt);
}

/* ---- reductions ------------------------------------------------------------------------- */

/* affine maps x -> m x + c as pairs of unsigned: a op b applies a, then b */
static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const unsigned *a = (const unsigned *)in;
    unsigned *b = (unsigned *)inout;
    int i;
    if (*dt != affine_t)
        FAIL("the affine operation was called with another datatype");
    for (i = 0; i < *len; i++) {
        unsigned m = a[2 * i] * b[2 * i], c = a[2 * i + 1] * b[2 * i] + b[2 * i + 1];
        b[2 * i] = m;
        b[2 * i + 1] = c;
    }
}

static void affine_in(int r, long k, unsigned *out)
{
    out[0] = 3u + 2u * (unsigned)(((long)r * 7 + k) % 5);
    out[1] = (unsigned)(((long)r * 31 + k * 17) % 1000);
}

/* composition over ranks [lo, hi) of element k */
static void affine_ref(int lo, int hi, long k, unsigned *out)
{
    int r;
    affine_in(lo, k, out);
    for (r = lo + 1; r < hi; r++) {
        unsigned x[2], m, c;
        affine_in(r, k, x);
        m = out[0] * x[0];
        c = out[1] * x[0] + x[1];
        out[0] = m;
        out[1] = c;
    }
}

static void user_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i;
    if (*dt != MPI_INT)
        FAIL("the user sum was called with another datatype");
    for (i = 0; i < *len; i++)
        ((int *)inout)[i] += ((const int *)in)[i];
}

/* Reduction kinds: the datatype, the operation, and how to fill and check an element. */
enum { K_SUM, K_VEC, K_USER, K_AFFINE, K_MINLOC, K_MAXLOC_DI, NKINDS };
static const char *kind_names[NKINDS] = {"MPI_SUM/MPI_INT", "MPI_SUM/vector", "user sum/MPI_INT",
                                         "affine (non-commutative)", "MPI_MINLOC/MPI_2INT",
                                         "MPI_MAXLOC/MPI_DOUBLE_INT"};

typedef struct {
    double v;
    int i;
} double_int;

/* Elements of kind k: ints per element in memory (vector: per data int, stride via layout). */
static size_t elem_bytes(int k)
{
    switch (k) {
    case K_AFFINE:
    case K_MINLOC:
        return 2 * sizeof(int);
    case K_MAXLOC_DI:
        return sizeof(double_int);
    default:
        return sizeof(int);
    }
}

static MPI_Datatype kind_type(int k)
{
    switch (k) {
    case K_VEC:
        return vec_t;
    case K_AFFINE:
        return affine_t;
    case K_MINLOC:
        return MPI_2INT;
    case K_MAXLOC_DI:
        return MPI_DOUBLE_INT;
    default:
        return MPI_INT;
    }
}

static MPI_Op kind_op(int k)
{
    switch (k) {
    case K_USER:
        return user_sum_op;
    case K_AFFINE:
        return affine_op;
    case K_MINLOC:
        return MPI_MINLOC;
    case K_MAXLOC_DI:
        return MPI_MAXLOC;
    default:
        return MPI_SUM;
    }
}

/* A buffer of n elements of kind k (vector: n data ints, n even). */
static void *red_alloc(int k, long n)
{
    size_t bytes = k == K_VEC ? (size_t)span(&L_VEC, n) * sizeof(int) : (size_t)n * elem_bytes(k);
    void *p = test_malloc(bytes + 16);
    long i;
    for (i = 0; i < (long)(bytes / sizeof(int)); i++)
        ((int *)p)[i] = HOLE;
    return p;
}

static void red_put(int k, void *buf, long at, long n, int r, long k0, int salt)
{
    long j;
    for (j = 0; j < n; j++) {
        long e = k0 + j;
        switch (k) {
        case K_VEC:
            ((int *)buf)[idx(&L_VEC, at + j)] = val(r, e, salt);
            break;
        case K_AFFINE:
            affine_in(r, e + salt, (unsigned *)buf + 2 * (at + j));
            break;
        case K_MINLOC:
            ((int *)buf)[2 * (at + j)] = val(r, e, salt) % 7;
            ((int *)buf)[2 * (at + j) + 1] = r;
            break;
        case K_MAXLOC_DI: {
            double_int *d = (double_int *)buf + at + j;
            d->v = (double)(val(r, e, salt) % 5);
            d->i = r;
            break;
        }
        default:
            ((int *)buf)[at + j] = val(r, e, salt);
        }
    }
}

/* Checks elements [at, at + n) against the reduction of ranks [lo, hi) of elements k0... */
static void red_expect(int k, const void *buf, long at, long n, int lo, int hi, long k0, int salt,
                       const char *w)
{
    long j;
    int r;
    for (j = 0; j < n; j++) {
        long e = k0 + j;
        switch (k) {
        case K_AFFINE: {
            unsigned ref[2];
            const unsigned *g = (const unsigned *)buf + 2 * (at + j);
            affine_ref(lo, hi, e + salt, ref);
            if (g[0] != ref[0] || g[1] != ref[1])
                FAIL("%s: element %ld is (%u, %u), expected (%u, %u)", w, at + j, g[0], g[1], ref[0], ref[1]);
            break;
        }
        case K_MINLOC: {
            const int *g = (const int *)buf + 2 * (at + j);
            int best = val(lo, e, salt) % 7, who = lo;
            for (r = lo + 1; r < hi; r++)
                if (val(r, e, salt) % 7 < best) {
                    best = val(r, e, salt) % 7;
                    who = r;
                }
            if (g[0] != best || g[1] != who)
                FAIL("%s: element %ld is (%d, %d), expected (%d, %d)", w, at + j, g[0], g[1], best, who);
            break;
        }
        case K_MAXLOC_DI: {
            const double_int *g = (const double_int *)buf + at + j;
            double best = (double)(val(lo, e, salt) % 5);
            int who = lo;
            for (r = lo + 1; r < hi; r++)
                if ((double)(val(r, e, salt) % 5) > best) {
                    best = (double)(val(r, e, salt) % 5);
                    who = r;
                }
            if (g->v != best || g->i != who)
                FAIL("%s: element %ld is (%g, %d), expected (%g, %d)", w, at + j, g->v, g->i, best, who);
            break;
        }
        default: {
            int sum = 0, got = k == K_VEC ? ((const int *)buf)[idx(&L_VEC, at + j)] : ((const int *)buf)[at + j];
            for (r = lo; r < hi; r++)
                sum += val(r, e, salt);
            if (got != sum)
                FAIL("%s: element %ld is %d, expected %d", w, at + j, got, sum);
        }
        }
    }
    if (k == K_VEC)
        holes((const int *)buf, &L_VEC, span(&L_VEC, at + n), at + n, w);
}

/* MPI count for n elements of kind k */
static int red_count(int k, long n)
{
    return (int)(k == K_VEC ? n / 2 : n);
}

/* Whether kind k runs on this library. */
static int kind_ok(int k)
{
    return !(is_mpich && k == K_VEC);
}

static long red_n(int k, int ci)
{
    long n = counts[ci];
    if (ci == ncounts - 1 && k != K_SUM)
        n /= 4; /* the large case once per kind, a quarter the size */
    return k == K_VEC ? 2 * n : n;
}

static void test_reduce(int all)
{
    int ci, k, ri, inplace;
    int roots[2] = {0, size - 1};
    for (k = 0; k < NKINDS; k++)
        for (ci = 0; ci < ncounts; ci++)
            for (ri = 0; ri < (all ? 1 : 2); ri++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int root = roots[ri], salt = 2000 + k * 100 + ci * 10 + ri * 2 + inplace;
                    long n = red_n(k, ci);
                    void *in, *out;
                    int ip = inplace && (all || rank == root);
                    if (!kind_ok(k) || (is_mpich && !all && inplace && root != 0 && n > 7))
                        continue;
                    in = red_alloc(k, n);
                    out = red_alloc(k, n);
                    red_put(k, ip ? out : in, 0, n, rank, 0, salt);
                    if (all)
                        CHECK_MPI(MPI_Allreduce(ip ? MPI_IN_PLACE : in, out, red_count(k, n), kind_type(k),
                                                kind_op(k), comm));
                    else
                        CHECK_MPI(MPI_Reduce(ip ? MPI_IN_PLACE : in, out, red_count(k, n), kind_type(k),
                                             kind_op(k), root, comm));
                    snprintf(what, sizeof what, "%s %s count %ld%s root %d", all ? "Allreduce" : "Reduce",
                             kind_names[k], n, ip ? " in place" : "", root);
                    if (all || rank == root)
                        red_expect(k, out, 0, n, 0, size, 0, salt, what);
                    free(in);
                    free(out);
                }
}

static void test_reduce_scatter(void)
{
    int ci, k, inplace, v, r;
    int *cnt = (int *)test_malloc(sizeof(int) * (size_t)size);
    for (v = 0; v < 2; v++)
        for (k = 0; k < NKINDS; k++)
            for (ci = 0; ci < ncounts; ci++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int salt = 3000 + v * 1000 + k * 100 + ci * 10 + inplace;
                    long base = red_n(k, ci) / (ci == ncounts - 1 ? size : 1);
                    long total = 0, mine, at = 0;
                    void *in, *out;
                    if (!kind_ok(k) || (is_mpich && v && inplace && ci >= 3))
                        continue;
                    if (k == K_VEC)
                        base -= base % 2;
                    for (r = 0; r < size; r++) {
                        long c = v ? base + (k == K_VEC ? 2 : 1) * (r % 3) : base;
                        cnt[r] = red_count(k, c);
                        if (r < rank)
                            at += c;
                        total += c;
                    }
                    mine = v ? base + (k == K_VEC ? 2 : 1) * (rank % 3) : base;
                    in = red_alloc(k, total);
                    out = red_alloc(k, total);
                    red_put(k, inplace ? out : in, 0, total, rank, 0, salt);
                    if (v)
                        CHECK_MPI(MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : in, out, cnt, kind_type(k), kind_op(k),
                                                     comm));
                    else
                        CHECK_MPI(MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : in, out, cnt[0], kind_type(k),
                                                           kind_op(k), comm));
                    snprintf(what, sizeof what, "Reduce_scatter%s %s count %ld%s", v ? "" : "_block",
                             kind_names[k], base, inplace ? " in place" : "");
                    red_expect(k, out, 0, mine, 0, size, at, salt, what);
                    free(in);
                    free(out);
                }
    free(cnt);
}

static void test_scan(void)
{
    int ci, k, inplace, ex;
    for (ex = 0; ex < 2; ex++)
        for (k = 0; k < NKINDS; k++)
            for (ci = 0; ci < ncounts; ci++)
                for (inplace = 0; inplace < 2; inplace++) {
                    int salt = 6000 + ex * 1000 + k * 100 + ci * 10 + inplace;
                    long n = red_n(k, ci);
                    void *in, *out;
                    if (!kind_ok(k))
                        continue;
                    in = red_alloc(k, n);
                    out = red_alloc(k, n);
                    red_put(k, inplace ? out : in, 0, n, rank, 0, salt);
                    if (ex)
                        CHECK_MPI(MPI_Exscan(inplace ? MPI_IN_PLACE : in, out, red_count(k, n), kind_type(k),
                                             kind_op(k), comm));
                    else
                        CHECK_MPI(MPI_Scan(inplace ? MPI_IN_PLACE : in, out, red_count(k, n), kind_type(k),
                                           kind_op(k), comm));
                    snprintf(what, sizeof what, "%s %s count %ld%s", ex ? "Exscan" : "Scan", kind_names[k], n,
                             inplace ? " in place" : "");
                    if (!ex || rank > 0)
                        red_expect(k, out, 0, n, 0, ex ? rank : rank + 1, 0, salt, what);
                    free(in);
                    free(out);
                }
}

static void test_local(void)
{
    int k, ci, flag;
    for (k = 0; k < NKINDS; k++)
        for (ci = 0; ci < ncounts; ci++) {
            long n = red_n(k, ci);
            void *a, *b;
            if (!kind_ok(k))
                continue;
            a = red_alloc(k, n);
            b = red_alloc(k, n);
            red_put(k, a, 0, n, 0, 0, 9000 + k);
            red_put(k, b, 0, n, 1, 0, 9000 + k);
            CHECK_MPI(MPI_Reduce_local(a, b, red_count(k, n), kind_type(k), kind_op(k)));
            snprintf(what, sizeof what, "Reduce_local %s count %ld", kind_names[k], n);
            red_expect(k, b, 0, n, 0, 2, 0, 9000 + k, what);
            free(a);
            free(b);
        }
    CHECK_MPI(MPI_Op_commutative(affine_op, &flag));
    CHECK(flag == 0, "the affine operation reports commutative");
    CHECK_MPI(MPI_Op_commutative(user_sum_op, &flag));
    CHECK(flag == 1, "the user sum reports non-commutative");
    CHECK_MPI(MPI_Op_commutative(MPI_SUM, &flag));
    CHECK(flag == 1, "MPI_SUM reports non-commutative");
}

/* ---- non-blocking ----------------------------------------------------------------------- */

static void test_nonblocking(MPI_Comm other)
{
    enum { NREQ = 14 };
    MPI_Request req[NREQ];
    long n = 1001, big = large_ints / 4, r;
    int root = size - 1, i, q, done, idx_done, flag;
    int *bc = alloc_ints(big), *ar_in = alloc_ints(n), *ar_out = alloc_ints(n), *ag = alloc_ints(n * size);
    int *a2a_s = alloc_ints(7 * size), *a2a_r = alloc_ints(7 * size), *g = alloc_ints(3 * size), *sc = alloc_ints(3);
    int *rs_in = alloc_ints(5 * size), *rs_out = alloc_ints(5), *scan_in = alloc_ints(n), *scan_out = alloc_ints(n);
    int *red_out = alloc_ints(n), *ex_out = alloc_ints(n), *ar2 = alloc_ints(n), *bc2 = alloc_ints(n);
    unsigned *aff_in = (unsigned *)test_malloc(2 * sizeof(unsigned) * 33), *aff_out = (unsigned *)test_malloc(2 * sizeof(unsigned) * 33);
    int *sv = alloc_ints(3 * size), *gv = alloc_ints(3 * size), *cnt = (int *)test_malloc(sizeof(int) * (size_t)size), *dsp = (int *)test_malloc(sizeof(int) * (size_t)size);
    for (i = 0; i < size; i++) {
        cnt[i] = 3;
        dsp[i] = 3 * i;
    }
    if (rank == root)
        put(bc, &L_INT, 0, big, root, 0, 1);
    put(ar_in, &L_INT, 0, n, rank, 0, 2);
    put(ag + n * rank, &L_INT, 0, n, rank, 0, 3);
    for (q = 0; q < size; q++)
        put(a2a_s + 7 * q, &L_INT, 0, 7, pair_id(rank, q), 0, 4);
    put(sc, &L_INT, 0, 3, rank, 0, 5);
    put(rs_in, &L_INT, 0, 5 * size, rank, 0, 6);
    put(scan_in, &L_INT, 0, n, rank, 0, 7);
    put(ar2, &L_INT, 0, n, rank, 0, 8);
    if (rank == 0)
        put(bc2, &L_INT, 0, n, 0, 0, 9);
    for (i = 0; i < 33; i++)
        affine_in(rank, i + 10, aff_in + 2 * i);
    if (rank == root)
        for (q = 0; q < size; q++)
            put(sv + 3 * q, &L_INT, 0, 3, q, 0, 11);

    CHECK_MPI(MPI_Ibarrier(comm, &req[0]));
    CHECK_MPI(MPI_Ibcast(bc, (int)big, MPI_INT, root, comm, &req[1]));
    CHECK_MPI(MPI_Iallreduce(ar_in, ar_out, (int)n, MPI_INT, MPI_SUM, comm, &req[2]));
    CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, (int)n, MPI_INT, comm, &req[3]));
    CHECK_MPI(MPI_Ialltoall(a2a_s, 7, MPI_INT, a2a_r, 7, MPI_INT, comm, &req[4]));
    CHECK_MPI(MPI_Igather(sc, 3, MPI_INT, g, 3, MPI_INT, 0, comm, &req[5]));
    CHECK_MPI(MPI_Ireduce_scatter_block(rs_in, rs_out, 5, MPI_INT, MPI_SUM, comm, &req[6]));
    CHECK_MPI(MPI_Iscan(scan_in, scan_out, (int)n, MPI_INT, MPI_SUM, comm, &req[7]));
    CHECK_MPI(MPI_Ireduce(scan_in, red_out, (int)n, MPI_INT, MPI_SUM, root, comm, &req[8]));
    CHECK_MPI(MPI_Iexscan(scan_in, ex_out, (int)n, MPI_INT, MPI_SUM, comm, &req[9]));
    /* on the other communicator, interleaved */
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, ar2, (int)n, MPI_INT, MPI_SUM, other, &req[10]));
    CHECK_MPI(MPI_Ibcast(bc2, (int)n, MPI_INT, 0, other, &req[11]));
    CHECK_MPI(MPI_Iallreduce(aff_in, aff_out, 33, affine_t, affine_op, other, &req[12]));
    CHECK_MPI(MPI_Iscatterv(sv, cnt, dsp, MPI_INT, gv, 3, MPI_INT, root, other, &req[13]));

    /* complete some with Waitany and Testall, the rest with Waitall */
    CHECK_MPI(MPI_Waitany(NREQ, req, &idx_done, MPI_STATUS_IGNORE));
    CHECK(idx_done >= 0 && idx_done < NREQ && req[idx_done] == MPI_REQUEST_NULL, "Waitany index %d", idx_done);
    done = 0;
    for (i = 0; i < 100000 && !done; i++)
        CHECK_MPI(MPI_Testall(NREQ, req, &done, MPI_STATUSES_IGNORE));
    if (!done)
        CHECK_MPI(MPI_Waitall(NREQ, req, MPI_STATUSES_IGNORE));
    for (i = 0; i < NREQ; i++)
        CHECK(req[i] == MPI_REQUEST_NULL, "request %d not completed", i);
    flag = 0;
    CHECK_MPI(MPI_Test(&req[0], &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "a null request tests incomplete");

    expect(bc, &L_INT, 0, big, root, 0, 1, "Ibcast");
    for (r = 0; r < n; r++) {
        int s = 0, s2 = 0, ps = 0, pe = 0;
        for (q = 0; q < size; q++) {
            s += val(q, r, 2);
            s2 += val(q, r, 8);
            if (q <= rank)
                ps += val(q, r, 7);
            if (q < rank)
                pe += val(q, r, 7);
        }
        CHECK(ar_out[r] == s, "Iallreduce element %ld: %d, expected %d", r, ar_out[r], s);
        CHECK(ar2[r] == s2, "Iallreduce in place element %ld: %d, expected %d", r, ar2[r], s2);
        CHECK(scan_out[r] == ps, "Iscan element %ld: %d, expected %d", r, scan_out[r], ps);
        if (rank > 0)
            CHECK(ex_out[r] == pe, "Iexscan element %ld: %d, expected %d", r, ex_out[r], pe);
        if (rank == root) {
            int t = 0;
            for (q = 0; q < size; q++)
                t += val(q, r, 7);
            CHECK(red_out[r] == t, "Ireduce element %ld: %d, expected %d", r, red_out[r], t);
        }
    }
    for (q = 0; q < size; q++) {
        expect(ag, &L_INT, n * q, n, q, 0, 3, "Iallgather in place");
        expect(a2a_r + 7 * q, &L_INT, 0, 7, pair_id(q, rank), 0, 4, "Ialltoall");
        if (rank == 0)
            expect(g + 3 * q, &L_INT, 0, 3, q, 0, 5, "Igather");
    }
    expect(bc2, &L_INT, 0, n, 0, 0, 9, "Ibcast on the other communicator");
    expect(gv, &L_INT, 0, 3, rank, 0, 11, "Iscatterv");
    for (i = 0; i < 5; i++) {
        int s = 0;
        for (q = 0; q < size; q++)
            s += val(q, 5 * rank + i, 6);
        CHECK(rs_out[i] == s, "Ireduce_scatter_block element %d: %d, expected %d", i, rs_out[i], s);
    }
    for (i = 0; i < 33; i++) {
        unsigned ref[2];
        affine_ref(0, size, i + 10, ref);
        CHECK(aff_out[2 * i] == ref[0] && aff_out[2 * i + 1] == ref[1], "Iallreduce affine element %d", i);
    }
    free(bc);
    free(ar_in);
    free(ar_out);
    free(ag);
    free(a2a_s);
    free(a2a_r);
    free(g);
    free(sc);
    free(rs_in);
    free(rs_out);
    free(scan_in);
    free(scan_out);
    free(red_out);
    free(ex_out);
    free(ar2);
    free(bc2);
    free(aff_in);
    free(aff_out);
    free(sv);
    free(gv);
    free(cnt);
    free(dsp);

    /* many small ones outstanding at once */
    {
        enum { MANY = 24 };
        MPI_Request rq[MANY];
        int vals[MANY], sums[MANY];
        for (i = 0; i < MANY; i++) {
            vals[i] = rank * 100 + i;
            CHECK_MPI(MPI_Iallreduce(&vals[i], &sums[i], 1, MPI_INT, MPI_SUM, i % 2 ? comm : other, &rq[i]));
        }
        CHECK_MPI(MPI_Waitall(MANY, rq, MPI_STATUSES_IGNORE));
        for (i = 0; i < MANY; i++)
            CHECK(sums[i] == 100 * size * (size - 1) / 2 + i * size, "Iallreduce %d of many: %d", i, sums[i]);
    }
}

/* ---- main -------------------------------------------------------------------------------- */

static void run_all(void)
{
    if (want("barrier"))
        test_barrier();
    if (want("bcast"))
        test_bcast();
    if (want("gather")) {
        test_gather(0);
        test_gatherv(0);
    }
    if (want("scatter")) {
        test_gather(1);
        test_gatherv(1);
    }
    if (want("allgather"))
        test_allgather();
    if (want("alltoall"))
        test_alltoall();
    if (want("reduce"))
        test_reduce(0);
    if (want("allreduce"))
        test_reduce(1);
    if (want("reduce_scatter"))
        test_reduce_scatter();
    if (want("scan"))
        test_scan();
    if (want("local"))
        test_local();
}

int main(int argc, char **argv)
{
    int i;
    MPI_Comm dup;
    MPI_Init(&argc, &argv);
    test_begin("coll");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--large") == 0 && i + 1 < argc)
            large_ints = atol(argv[++i]);
        else if (strcmp(argv[i], "--split") == 0)
            split = 1;
        else if (strcmp(argv[i], "--free-pending") == 0)
            free_pending = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= 64, "at most 64 ranks");
    {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        CHECK_MPI(MPI_Get_library_version(lib, &len));
        is_mpich = strncmp(lib, "MPICH", 5) == 0;
        if (is_mpich && rank == 0)
            printf("note: MPICH: reductions over the vector type, in-place MPI_Reduce at a non-zero root "
                   "above 7 elements and large in-place MPI_Reduce_scatter skipped (MPICH limits)\n");
    }
    CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &vec_t));
    CHECK_MPI(MPI_Type_commit(&vec_t));
    CHECK_MPI(MPI_Type_contiguous(2, MPI_UNSIGNED, &affine_t));
    CHECK_MPI(MPI_Type_commit(&affine_t));
    CHECK_MPI(MPI_Op_create(affine_fn, 0, &affine_op));
    CHECK_MPI(MPI_Op_create(user_sum_fn, 1, &user_sum_op));
    L_INT.t = MPI_INT;
    L_INT.per = 1;
    L_INT.ext = 1;
    L_INT.name = "MPI_INT";
    L_VEC.t = vec_t;
    L_VEC.per = 2;
    L_VEC.ext = 3;
    L_VEC.name = "vector";
    pairs[0][0] = &L_INT;
    pairs[0][1] = &L_INT;
    pairs[1][0] = &L_VEC;
    pairs[1][1] = &L_INT;
    pairs[2][0] = &L_INT;
    pairs[2][1] = &L_VEC;
    counts[0] = 0;
    counts[1] = 1;
    counts[2] = 7;
    counts[3] = 1001;
    counts[4] = large_ints + 1;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    comm = MPI_COMM_WORLD;
    run_all();
    comm = dup;
    run_all();
    if (want("nonblocking")) {
        comm = MPI_COMM_WORLD;
        test_nonblocking(dup);
        comm = dup;
        test_nonblocking(MPI_COMM_WORLD);
    }
    CHECK_MPI(MPI_Comm_free(&dup));
    if (split) {
        MPI_Comm sub, sub_dup;
        int world_rank = rank, world_size = size;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, (size >= 3 && rank == 1) ? 1 : 0, size - rank, &sub));
        MPI_Comm_rank(sub, &rank);
        MPI_Comm_size(sub, &size);
        CHECK(rank == (world_size >= 3 && world_rank == 1 ? 0 : size - 1 - (world_rank > 1 && world_size >= 3 ? world_rank - 1 : world_rank)),
              "rank in the split communicator");
        comm = sub;
        run_all();
        if (want("nonblocking")) {
            CHECK_MPI(MPI_Comm_dup(sub, &sub_dup));
            test_nonblocking(sub_dup);
            CHECK_MPI(MPI_Comm_free(&sub_dup));
        }
        if (want("nonblocking") && free_pending) {
            MPI_Request rq;
            int v = rank + 1, s = 0;
            /* Freed while a non-blocking collective on it is pending: it completes normally. (A
             * blocking collective first, which makes a node-aware library's hidden
             * communicators.) */
            CHECK_MPI(MPI_Comm_dup(sub, &sub_dup));
            CHECK_MPI(MPI_Barrier(sub_dup));
            CHECK_MPI(MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, sub_dup, &rq));
            CHECK_MPI(MPI_Comm_free(&sub_dup));
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            CHECK(s == size * (size + 1) / 2, "Iallreduce on a communicator freed meanwhile: %d", s);
        }
        CHECK_MPI(MPI_Comm_free(&sub));
        rank = world_rank;
        size = world_size;
    }
    CHECK_MPI(MPI_Op_free(&affine_op));
    CHECK(affine_op == MPI_OP_NULL, "MPI_Op_free did not reset the handle");
    CHECK_MPI(MPI_Op_free(&user_sum_op));
    CHECK_MPI(MPI_Type_free(&vec_t));
    CHECK_MPI(MPI_Type_free(&affine_t));
    return test_end();
}
