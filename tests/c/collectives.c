/*
 * collectives.c - MPI_Barrier, MPI_Bcast, MPI_Reduce and MPI_Allreduce with predefined
 * datatypes and operations, checked against results computed locally.
 *
 *   Barrier:   no rank leaves before the last one entered (one rank enters 200 ms late, and
 *              every rank's barrier must take >= 50 ms), plus back-to-back barriers.
 *   Bcast:     from every root; counts 0, 1, 1000, 300000 ints; also doubles and 1 MiB of bytes.
 *   Reduce /   every defined (type, op) pair: MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN on C integer
 *   Allreduce: and floating types; MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR on C
 *              integer types; counts 0, 1, 1000 (Reduce at a rotating root), 300000; MPI_IN_PLACE;
 *              MPI_MAXLOC / MPI_MINLOC on the pair types with ties (the lowest index must win);
 *              collectives on MPI_COMM_SELF.
 *
 * usage: collectives [--full]
 * By default each (type, op) pair is run once (Allreduce or Reduce, 1000 elements) and the edge
 * counts for a selection, which keeps the run short on an oversubscribed machine; above 4 ranks
 * only half the pairs (odd and even rank counts take different halves).  With --full every pair
 * runs with both calls and counts 0, 1 and 1000, and more large cases.
 * Every rank generates every rank's input from a formula, so the reference result is computed
 * locally with the same C arithmetic (unsigned types wrap the same way).  Inputs are small
 * integers (or quarters) so floating-point results are exact in any reduction order.
 */
#include "stormtest.h"

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_LAND, OP_LOR, OP_LXOR, OP_BAND, OP_BOR, OP_BXOR, NOPS };
static const char *op_names[NOPS] = {"MPI_SUM", "MPI_PROD", "MPI_MAX",  "MPI_MIN", "MPI_LAND",
                                     "MPI_LOR", "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR"};
static MPI_Op ops[NOPS];

static int rank, size, full;

/* Input element i of rank r for operation op, before narrowing to the C type. */
static long long input(int r, long i, int op, int is_unsigned)
{
    uint64_t h = test_mix64(((uint64_t)(uint32_t)r << 40) ^ ((uint64_t)i << 4) ^ (uint64_t)op);
    switch (op) {
    case OP_SUM:
        return is_unsigned ? (long long)(h % 31) : (long long)(h % 61) - 30;
    case OP_PROD: {
        long long v = (h % 3 == 0) ? 2 : 1;
        return (!is_unsigned && (h >> 8) % 5 == 0) ? -v : v;
    }
    case OP_MAX:
    case OP_MIN:
        return is_unsigned ? (long long)(h % 200) : (long long)(h % 2001) - 1000;
    case OP_LAND:
    case OP_LOR:
    case OP_LXOR: /* mostly non-zero (several values), zero now and then */
        return (h % (uint64_t)(2 * size + 1) == 0) ? 0 : (long long)(1 + (h >> 8) % 3);
    default: /* bitwise ops take full-width values, see INT_TYPE */
        return (long long)(h & 0x7f);
    }
}

/* Per C type: element generator, reference combine, fill, check. */
#define COMMON_FUNCS(NAME, T)                                                                  \
    static void fill_##NAME(void *buf, int r, long n, int op)                                  \
    {                                                                                          \
        long i;                                                                                \
        for (i = 0; i < n; i++)                                                                \
            ((T *)buf)[i] = elem_##NAME(r, i, op);                                             \
    }                                                                                          \
    static long check_##NAME(const void *res, long n, int op, double *got, double *want)       \
    {                                                                                          \
        long i;                                                                                \
        int r;                                                                                 \
        for (i = 0; i < n; i++) {                                                              \
            T acc = elem_##NAME(0, i, op);                                                     \
            for (r = 1; r < size; r++)                                                         \
                acc = combine_##NAME(acc, elem_##NAME(r, i, op), op);                          \
            if (((const T *)res)[i] != acc) {                                                  \
                *got = (double)((const T *)res)[i];                                            \
                *want = (double)acc;                                                           \
                return i;                                                                      \
            }                                                                                  \
        }                                                                                      \
        return -1;                                                                             \
    }

/* MAX/MIN and bitwise ops on integers: the full range of the type (sign bit / top bit set half
 * the time), so signed/unsigned confusion shows. */
#define INT_TYPE(NAME, T, ISU)                                                                 \
    static T elem_##NAME(int r, long i, int op)                                                \
    {                                                                                          \
        if (op == OP_MAX || op == OP_MIN || op >= OP_BAND)                                     \
            return (T)test_mix64(((uint64_t)(uint32_t)r << 40) ^ ((uint64_t)i << 4) ^          \
                                 (uint64_t)(op + 99));                                         \
        return (T)input(r, i, op, ISU);                                                        \
    }                                                                                          \
    static T combine_##NAME(T a, T b, int op)                                                  \
    {                                                                                          \
        switch (op) {                                                                          \
        case OP_SUM: return (T)(a + b);                                                        \
        case OP_PROD: return (T)(a * b);                                                       \
        case OP_MAX: return a > b ? a : b;                                                     \
        case OP_MIN: return a < b ? a : b;                                                     \
        case OP_LAND: return (T)(a && b);                                                      \
        case OP_LOR: return (T)(a || b);                                                       \
        case OP_LXOR: return (T)(!a != !b);                                                    \
        case OP_BAND: return (T)(a & b);                                                       \
        case OP_BOR: return (T)(a | b);                                                        \
        default: return (T)(a ^ b);                                                            \
        }                                                                                      \
    }                                                                                          \
    COMMON_FUNCS(NAME, T)

#define FLOAT_TYPE(NAME, T)                                                                    \
    static T elem_##NAME(int r, long i, int op)                                                \
    {                                                                                          \
        long long v = input(r, i, op, 0);                                                      \
        return (op == OP_MAX || op == OP_MIN) ? (T)((double)v * 0.25) : (T)v;                  \
    }                                                                                          \
    static T combine_##NAME(T a, T b, int op)                                                  \
    {                                                                                          \
        switch (op) {                                                                          \
        case OP_SUM: return a + b;                                                             \
        case OP_PROD: return a * b;                                                            \
        case OP_MAX: return a > b ? a : b;                                                     \
        default: return a < b ? a : b;                                                         \
        }                                                                                      \
    }                                                                                          \
    COMMON_FUNCS(NAME, T)

INT_TYPE(int, int, 0)
INT_TYPE(long, long, 0)
INT_TYPE(longlong, long long, 0)
INT_TYPE(short, short, 0)
INT_TYPE(unsigned, unsigned, 1)
INT_TYPE(ulong, unsigned long, 1)
INT_TYPE(uchar, unsigned char, 1)
INT_TYPE(int64, int64_t, 0)
FLOAT_TYPE(float, float)
FLOAT_TYPE(double, double)

struct tdesc {
    const char *name;
    MPI_Datatype type;
    size_t size;
    int is_int;
    void (*fill)(void *, int, long, int);
    long (*check)(const void *, long, int, double *, double *);
};

#define TD(NAME, MPIT, T, ISINT) {#MPIT, MPIT, sizeof(T), ISINT, fill_##NAME, check_##NAME}
static struct tdesc types[] = {
    TD(int, MPI_INT, int, 1),
    TD(long, MPI_LONG, long, 1),
    TD(longlong, MPI_LONG_LONG, long long, 1),
    TD(short, MPI_SHORT, short, 1),
    TD(unsigned, MPI_UNSIGNED, unsigned, 1),
    TD(ulong, MPI_UNSIGNED_LONG, unsigned long, 1),
    TD(uchar, MPI_UNSIGNED_CHAR, unsigned char, 1),
    TD(int64, MPI_INT64_T, int64_t, 1),
    TD(float, MPI_FLOAT, float, 0),
    TD(double, MPI_DOUBLE, double, 0),
};
#define NTYPES ((int)(sizeof types / sizeof types[0]))

static unsigned char *sendbuf, *recvbuf;

/* Known bugs of the reference MPIs this test is validated with (a reference quirk is skipped
 * there, with a note on stdout, and checked everywhere else):
 *  - MPICH 4.0.2: MPI_MAX/MPI_MIN compare every unsigned integer type as signed
 *    (pmodels/mpich#6083);
 *  - Open MPI 4.1.2-4.1.4: MPI_MAX/MPI_MIN treat MPI_UNSIGNED_LONG as signed long
 *    (open-mpi/ompi#10525). */
static char libversion[MPI_MAX_LIBRARY_VERSION_STRING + 1];

static int reference_quirk(const struct tdesc *t, int op)
{
    int is_unsigned = t->type == MPI_UNSIGNED || t->type == MPI_UNSIGNED_LONG ||
                      t->type == MPI_UNSIGNED_CHAR;
    if (op != OP_MAX && op != OP_MIN)
        return 0;
    if (strncmp(libversion, "MPICH", 5) == 0 && strstr(libversion, "4.0.") && is_unsigned)
        return 1;
    if (strncmp(libversion, "Open MPI v4.1.", 14) == 0 && t->type == MPI_UNSIGNED_LONG &&
        libversion[14] >= '2' && libversion[14] <= '4')
        return 1;
    return 0;
}
#define MAXCOUNT 300000L

static void check_result(const struct tdesc *t, int op, long count, const char *call, int root)
{
    double got = 0, want = 0;
    long bad = t->check(recvbuf, count, op, &got, &want);
    CHECK(bad < 0, "%s(%s, %s, count %ld, root %d): element %ld is %.17g, expected %.17g", call,
          t->name, op_names[op], count, root, bad, got, want);
}

/* which: 0 = Allreduce only, 1 = Reduce only (at root), 2 = both */
static void reduce_case(const struct tdesc *t, int op, long count, int root, int which)
{
    if (reference_quirk(t, op)) {
        if (rank == 0)
            printf("note: skipped %s on %s: known bug of this reference MPI\n", op_names[op],
                   t->name);
        return;
    }
    t->fill(sendbuf, rank, count, op);
    if (which != 1) {
        memset(recvbuf, 0x5c, t->size * (size_t)count);
        CHECK_MPI(MPI_Allreduce(sendbuf, recvbuf, (int)count, t->type, ops[op], MPI_COMM_WORLD));
        check_result(t, op, count, "Allreduce", -1);
    }
    if (which != 0) {
        memset(recvbuf, 0x5c, t->size * (size_t)count);
        CHECK_MPI(MPI_Reduce(sendbuf, recvbuf, (int)count, t->type, ops[op], root, MPI_COMM_WORLD));
        if (rank == root)
            check_result(t, op, count, "Reduce", root);
    }
}

static int find_type(MPI_Datatype dt)
{
    int i;
    for (i = 0; i < NTYPES; i++)
        if (types[i].type == dt)
            return i;
    FAIL("type not in table");
    return -1;
}

/* MAXLOC / MINLOC on the pair types: value = h % 4 (many ties), index = 3 * rank + 1. */
#define LOC_TEST(NAME, VT, MPIT)                                                               \
    static void loc_##NAME(MPI_Op op, int is_max, long count, int which)                       \
    {                                                                                          \
        struct pair { VT v; int i; };                                                          \
        struct pair *in = (struct pair *)sendbuf, *out = (struct pair *)recvbuf;               \
        long e;                                                                                \
        int r, pass;                                                                           \
        for (e = 0; e < count; e++) {                                                          \
            in[e].v = (VT)(test_mix64((uint64_t)rank * 1000003u + (uint64_t)e) % 4);           \
            in[e].i = 3 * rank + 1;                                                            \
        }                                                                                      \
        for (pass = 0; pass < 2; pass++) {                                                     \
            if (which != 2 && which != pass)                                                   \
                continue;                                                                      \
            memset(out, 0, sizeof(struct pair) * (size_t)count);                               \
            if (pass == 0)                                                                     \
                CHECK_MPI(MPI_Allreduce(in, out, (int)count, MPIT, op, MPI_COMM_WORLD));       \
            else                                                                               \
                CHECK_MPI(MPI_Reduce(in, out, (int)count, MPIT, op, size - 1, MPI_COMM_WORLD)); \
            if (pass == 1 && rank != size - 1)                                                 \
                break;                                                                         \
            for (e = 0; e < count; e++) {                                                      \
                VT best = (VT)(test_mix64(e) % 4);                                             \
                int bi = 1;                                                                    \
                for (r = 1; r < size; r++) {                                                   \
                    VT v = (VT)(test_mix64((uint64_t)r * 1000003u + (uint64_t)e) % 4);        \
                    if (is_max ? v > best : v < best) {                                        \
                        best = v;                                                              \
                        bi = 3 * r + 1;                                                        \
                    }                                                                          \
                }                                                                              \
                CHECK(out[e].v == best && out[e].i == bi,                                      \
                      "%s(%s, %s, count %ld): element %ld is (%g, %d), expected (%g, %d)",     \
                      pass ? "Reduce" : "Allreduce", #MPIT, is_max ? "MPI_MAXLOC" : "MPI_MINLOC", \
                      count, e, (double)out[e].v, out[e].i, (double)best, bi);                 \
            }                                                                                  \
        }                                                                                      \
    }

LOC_TEST(2int, int, MPI_2INT)
LOC_TEST(doubleint, double, MPI_DOUBLE_INT)
LOC_TEST(floatint, float, MPI_FLOAT_INT)
LOC_TEST(longint, long, MPI_LONG_INT)
LOC_TEST(shortint, short, MPI_SHORT_INT)

static void test_barrier(void)
{
    double t0, dt;
    int i;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* Rank size-1 enters 200 ms late; nobody may leave before that, on the clock all ranks of
     * a node share (a rank descheduled between the barriers must not make it look early). */
    if (rank == size - 1)
        test_sleep_ms(200);
    t0 = MPI_Wtime();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    dt = MPI_Wtime();
    CHECK_MPI(MPI_Bcast(&t0, 1, MPI_DOUBLE, size - 1, MPI_COMM_WORLD));
    dt -= t0;
    CHECK(dt >= 0, "left the barrier %.3f ms before rank %d entered it 200 ms late", -dt * 1e3,
          size - 1);
    for (i = 0; i < (full ? 100 : 10); i++)
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_bcast(void)
{
    static const long counts[] = {0, 1, 1000, MAXCOUNT};
    int root, k;
    for (root = 0; root < size; root++) {
        for (k = 0; k < 4; k++) {
            size_t bytes = sizeof(int) * (size_t)counts[k];
            uint64_t key = test_key(root, -1, bytes, k);
            long off;
            /* every root sends 1000 ints; the other counts from two roots (all with --full) */
            if (!full && k != 2 && root != 0 && root != size - 1)
                continue;
            if (rank == root)
                pattern_fill(sendbuf, bytes, key);
            else
                memset(sendbuf, 0xee, bytes);
            CHECK_MPI(MPI_Bcast(sendbuf, (int)counts[k], MPI_INT, root, MPI_COMM_WORLD));
            off = pattern_check(sendbuf, bytes, key);
            CHECK(off < 0, "Bcast of %ld ints from root %d: wrong at byte %ld", counts[k], root, off);
        }
    }
    {
        double d[777];
        int i;
        root = size / 2;
        for (i = 0; i < 777; i++)
            d[i] = rank == root ? i * 0.5 - 100.0 : -1.0;
        CHECK_MPI(MPI_Bcast(d, 777, MPI_DOUBLE, root, MPI_COMM_WORLD));
        for (i = 0; i < 777; i++)
            CHECK(d[i] == i * 0.5 - 100.0, "Bcast of doubles: element %d is %g", i, d[i]);
    }
    {
        size_t bytes = (1 << 20) + 3;
        uint64_t key = test_key(size - 1, -1, bytes, 99);
        long off;
        if (rank == size - 1)
            pattern_fill(recvbuf, bytes, key);
        CHECK_MPI(MPI_Bcast(recvbuf, (int)bytes, MPI_BYTE, size - 1, MPI_COMM_WORLD));
        off = pattern_check(recvbuf, bytes, key);
        CHECK(off < 0, "Bcast of %zu bytes: wrong at byte %ld", bytes, off);
    }
}

static void test_reductions(void)
{
    static const long counts[] = {0, 1, 1000};
    int t, op, k, n = 0;

    /* every defined (type, op) pair: 1000 elements, alternately Allreduce and Reduce (rotating
     * root); with --full both calls and counts 0, 1 and 1000 */
    for (t = 0; t < NTYPES; t++)
        for (op = 0; op < NOPS; op++) {
            if (!types[t].is_int && op >= OP_LAND)
                continue; /* logical and bitwise ops are not defined for floating types */
            if (full) {
                for (k = 0; k < 3; k++)
                    reduce_case(&types[t], op, counts[k], n++ % size, 2);
            } else {
                /* past 4 ranks, where each collective is slow when oversubscribed, only every
                 * other pair: odd and even rank counts take different halves */
                if (size <= 4 || n % 2 == size % 2)
                    reduce_case(&types[t], op, 1000, n % size, (n / 2) % 2);
                n++;
            }
        }

    /* edge counts and large counts for a selection */
    reduce_case(&types[find_type(MPI_INT)], OP_SUM, 0, size - 1, 2);
    reduce_case(&types[find_type(MPI_DOUBLE)], OP_MAX, 1, 0, 0);
    reduce_case(&types[find_type(MPI_UNSIGNED)], OP_BXOR, 1, size / 2, 1);
    reduce_case(&types[find_type(MPI_INT)], OP_SUM, MAXCOUNT, 0, 0);
    reduce_case(&types[find_type(MPI_DOUBLE)], OP_SUM, MAXCOUNT, size - 1, 1);
    reduce_case(&types[find_type(MPI_FLOAT)], OP_MIN, MAXCOUNT, 0, 0);
    reduce_case(&types[find_type(MPI_UNSIGNED_CHAR)], OP_BOR, MAXCOUNT, 0, 0);
    if (full) {
        reduce_case(&types[find_type(MPI_LONG)], OP_MAX, MAXCOUNT, 1 % size, 2);
        reduce_case(&types[find_type(MPI_SHORT)], OP_PROD, MAXCOUNT, 0, 2);
        reduce_case(&types[find_type(MPI_UNSIGNED)], OP_LAND, MAXCOUNT, 0, 2);
    }

    /* MPI_IN_PLACE */
    {
        const struct tdesc *ti = &types[find_type(MPI_INT)], *td = &types[find_type(MPI_DOUBLE)];
        ti->fill(recvbuf, rank, 1000, OP_SUM);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, recvbuf, 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        check_result(ti, OP_SUM, 1000, "Allreduce(MPI_IN_PLACE)", -1);
        td->fill(recvbuf, rank, 1000, OP_MAX);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, recvbuf, 1000, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        check_result(td, OP_MAX, 1000, "Allreduce(MPI_IN_PLACE)", -1);
        if (rank == 0) {
            ti->fill(recvbuf, rank, 1000, OP_BOR);
            CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, recvbuf, 1000, MPI_INT, MPI_BOR, 0, MPI_COMM_WORLD));
            check_result(ti, OP_BOR, 1000, "Reduce(MPI_IN_PLACE at root)", 0);
        } else {
            ti->fill(sendbuf, rank, 1000, OP_BOR);
            CHECK_MPI(MPI_Reduce(sendbuf, NULL, 1000, MPI_INT, MPI_BOR, 0, MPI_COMM_WORLD));
        }
    }

    loc_2int(MPI_MAXLOC, 1, 1000, full ? 2 : 0);
    loc_2int(MPI_MINLOC, 0, 1000, full ? 2 : 1);
    loc_doubleint(MPI_MAXLOC, 1, 1000, full ? 2 : 1);
    loc_doubleint(MPI_MINLOC, 0, 1, full ? 2 : 0);
    loc_floatint(MPI_MINLOC, 0, 500, full ? 2 : 0);
    loc_longint(MPI_MAXLOC, 1, 300, full ? 2 : 1);
    loc_shortint(MPI_MINLOC, 0, 300, full ? 2 : 0);
}

static void test_self(void)
{
    int in[10], out[10], i;
    for (i = 0; i < 10; i++)
        in[i] = rank * 100 + i;
    CHECK_MPI(MPI_Allreduce(in, out, 10, MPI_INT, MPI_SUM, MPI_COMM_SELF));
    for (i = 0; i < 10; i++)
        CHECK(out[i] == in[i], "Allreduce on MPI_COMM_SELF: element %d is %d", i, out[i]);
    CHECK_MPI(MPI_Reduce(in, out, 10, MPI_INT, MPI_PROD, 0, MPI_COMM_SELF));
    CHECK(out[3] == in[3], "Reduce on MPI_COMM_SELF: %d", out[3]);
    CHECK_MPI(MPI_Bcast(in, 10, MPI_INT, 0, MPI_COMM_SELF));
    CHECK_MPI(MPI_Barrier(MPI_COMM_SELF));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("collectives");
    full = argc > 1 && strcmp(argv[1], "--full") == 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    {
        int len = 0;
        MPI_Get_library_version(libversion, &len);
    }
    ops[OP_SUM] = MPI_SUM;
    ops[OP_PROD] = MPI_PROD;
    ops[OP_MAX] = MPI_MAX;
    ops[OP_MIN] = MPI_MIN;
    ops[OP_LAND] = MPI_LAND;
    ops[OP_LOR] = MPI_LOR;
    ops[OP_LXOR] = MPI_LXOR;
    ops[OP_BAND] = MPI_BAND;
    ops[OP_BOR] = MPI_BOR;
    ops[OP_BXOR] = MPI_BXOR;
    sendbuf = test_malloc(MAXCOUNT * 16 + 16);
    recvbuf = test_malloc(MAXCOUNT * 16 + 16);

    test_barrier();
    test_bcast();
    test_reductions();
    test_self();

    free(sendbuf);
    free(recvbuf);
    return test_end();
}
