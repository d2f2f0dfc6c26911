/*
 * many_types.c - 10,000 derived datatypes alive at once, each nested 6 deep.
 *
 * Every rank builds N (default 10000) types, type i being
 *   L1 = struct { int; double; int[k] }            (k = 2 or 4: extent 24 or 32, no padding)
 *   L2 = vector(c2 blocks of 1 L1, stride s2)
 *   L3 = create_resized(L2, lb 0, extent + 8*m3)
 *   L4 = create_hvector(2 blocks of b4 L3, stride b4*extent(L3) + 8 bytes)
 *   L5 = struct { L4 at 0; double at D5 in a hole of L4 }
 *   L6 = create_resized(L5, lb 0, extent(L5) + 16)
 * with the counts, strides and padding varying with i; the intermediate handles are freed at
 * once (the types made from them keep them), the top ones committed and kept: N types alive, six
 * levels each. The expected type map (byte offsets of every element) is computed here by the
 * standard's rules; sizes and extents are checked against it. Then every type carries one message
 * (2 instances) to the right neighbour with MPI_Sendrecv, received with the same type into a
 * buffer of 0xff: every byte the type map covers must hold the sender's pattern, every other one
 * 0xff. The first type's chain is walked back with MPI_Type_get_envelope/get_contents. Then all
 * are freed.
 *
 * usage: many_types [N]
 */
#include "stormtest.h"

#define TAGS 32767

typedef struct {
    long off;
    int len;
} Elem;

typedef struct {
    Elem *e;
    int n, cap;
} Map;

static void push(Map *m, long off, int len)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->e = realloc(m->e, sizeof(Elem) * (size_t)m->cap);
        CHECK(m->e != NULL, "realloc failed");
    }
    m->e[m->n].off = off;
    m->e[m->n].len = len;
    m->n++;
}

/* Appends `src` shifted by `shift` bytes to `dst`. */
static void append(Map *dst, const Map *src, long shift)
{
    int j;
    for (j = 0; j < src->n; j++)
        push(dst, src->e[j].off + shift, src->e[j].len);
}

typedef struct {
    MPI_Datatype type;
    Map map;     /* one instance */
    long extent; /* lb is 0 at every level */
    long size;
} Built;

static unsigned char pattern(int i, long off) { return (unsigned char)((i * 131 + off * 7) % 127); }

static void check_shape(MPI_Datatype t, long size, long extent, int i, int level)
{
    MPI_Aint lb, ext;
    int sz;
    CHECK_MPI(MPI_Type_size(t, &sz));
    CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
    CHECK(sz == size && lb == 0 && ext == extent,
          "type %d level %d: size %d lb %ld extent %ld, expected size %ld lb 0 extent %ld", i, level,
          sz, (long)lb, (long)ext, size, extent);
}

static Built build(int i)
{
    Built b;
    Map m1 = {0}, m2 = {0}, m4 = {0};
    MPI_Datatype l1, l2, l3, l4, l5;
    int k = 2 + 2 * (i % 2), c2 = 2 + i % 3, s2 = 1 + i % 2, m3 = 1 + i % 4, b4 = 1 + i % 2;
    int j, r;
    long e1, e2, e3, s4, e4, d5, e6, size1;

    /* L1 */
    {
        int bl[3] = {1, 1, k};
        MPI_Aint dp[3] = {0, 8, 16};
        MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_INT};
        CHECK_MPI(MPI_Type_create_struct(3, bl, dp, ty, &l1));
        push(&m1, 0, 4);
        push(&m1, 8, 8);
        for (j = 0; j < k; j++)
            push(&m1, 16 + 4 * j, 4);
        e1 = 16 + 4 * k;
        size1 = 12 + 4 * k;
        check_shape(l1, size1, e1, i, 1);
    }
    /* L2 */
    CHECK_MPI(MPI_Type_vector(c2, 1, s2, l1, &l2));
    for (j = 0; j < c2; j++)
        append(&m2, &m1, (long)j * s2 * e1);
    e2 = ((long)(c2 - 1) * s2 + 1) * e1;
    check_shape(l2, size1 * c2, e2, i, 2);
    /* L3 */
    e3 = e2 + 8 * m3;
    CHECK_MPI(MPI_Type_create_resized(l2, 0, e3, &l3));
    check_shape(l3, size1 * c2, e3, i, 3);
    /* L4 */
    s4 = b4 * e3 + 8;
    CHECK_MPI(MPI_Type_create_hvector(2, b4, s4, l3, &l4));
    for (j = 0; j < 2; j++)
        for (r = 0; r < b4; r++)
            append(&m4, &m2, j * s4 + r * e3);
    e4 = s4 + b4 * e3;
    check_shape(l4, size1 * c2 * 2 * b4, e4, i, 4);
    /* L5: the double goes into a hole of L4 (L3's padding after the first L2), so the struct's
     * upper bound is L4's, inherited from the resize (create_resized sets sticky bounds). */
    d5 = e2 + 8 * ((i / 4) % m3);
    {
        int bl[2] = {1, 1};
        MPI_Aint dp[2] = {0, d5};
        MPI_Datatype ty[2] = {l4, MPI_DOUBLE};
        CHECK_MPI(MPI_Type_create_struct(2, bl, dp, ty, &l5));
    }
    b.map = m4;
    push(&b.map, d5, 8);
    b.size = size1 * c2 * 2 * b4 + 8;
    check_shape(l5, b.size, e4, i, 5);
    /* L6 */
    e6 = e4 + 16;
    CHECK_MPI(MPI_Type_create_resized(l5, 0, e6, &b.type));
    check_shape(b.type, b.size, e6, i, 6);
    CHECK_MPI(MPI_Type_commit(&b.type));
    b.extent = e6;
    /* The levels below live on inside the top type. */
    CHECK_MPI(MPI_Type_free(&l1));
    CHECK_MPI(MPI_Type_free(&l2));
    CHECK_MPI(MPI_Type_free(&l3));
    CHECK_MPI(MPI_Type_free(&l4));
    CHECK_MPI(MPI_Type_free(&l5));
    CHECK(l1 == MPI_DATATYPE_NULL && l5 == MPI_DATATYPE_NULL, "MPI_Type_free did not null handles");
    free(m1.e);
    free(m2.e);
    return b;
}

/* Sends 2 instances of type i to the right, receives 2 from the left with the same type. */
static void exchange(const Built *b, int i, int left, int right)
{
    long bytes = 2 * b->extent, o;
    unsigned char *sbuf = test_malloc((size_t)bytes), *rbuf = test_malloc((size_t)bytes);
    unsigned char *covered = calloc((size_t)bytes, 1);
    MPI_Status st;
    int n, j, count;

    CHECK(covered != NULL, "calloc failed");
    for (o = 0; o < bytes; o++) {
        sbuf[o] = pattern(i, o);
        rbuf[o] = 0xff;
    }
    for (n = 0; n < 2; n++)
        for (j = 0; j < b->map.n; j++)
            memset(covered + n * b->extent + b->map.e[j].off, 1, (size_t)b->map.e[j].len);
    CHECK_MPI(MPI_Sendrecv(sbuf, 2, b->type, right, i % TAGS, rbuf, 2, b->type, left, i % TAGS,
                           MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, b->type, &count));
    CHECK(count == 2, "type %d: received count %d, expected 2", i, count);
    for (o = 0; o < bytes; o++) {
        unsigned char want = covered[o] ? pattern(i, o) : 0xff;
        CHECK(rbuf[o] == want, "type %d: byte %ld of %ld is 0x%02x, expected 0x%02x (%s)", i, o,
              bytes, rbuf[o], want, covered[o] ? "data" : "a hole");
    }
    free(sbuf);
    free(rbuf);
    free(covered);
}

/* Walks type `t`'s construction back: the combiners must be `want`, in order. */
static void check_chain(MPI_Datatype t)
{
    static const int want[6] = {MPI_COMBINER_RESIZED, MPI_COMBINER_STRUCT, MPI_COMBINER_HVECTOR,
                                MPI_COMBINER_RESIZED, MPI_COMBINER_VECTOR, MPI_COMBINER_STRUCT};
    MPI_Datatype cur = t;
    int level;
    for (level = 0; level < 6; level++) {
        int ni, na, nd, comb, ints[8];
        MPI_Aint aints[8];
        MPI_Datatype types[4], next = MPI_DATATYPE_NULL;
        int j;
        CHECK_MPI(MPI_Type_get_envelope(cur, &ni, &na, &nd, &comb));
        CHECK(comb == want[level], "level %d: combiner %d, expected %d", 6 - level, comb, want[level]);
        CHECK(ni <= 8 && na <= 8 && nd <= 4, "level %d: envelope %d %d %d", 6 - level, ni, na, nd);
        CHECK_MPI(MPI_Type_get_contents(cur, ni, na, nd, ints, aints, types));
        for (j = 0; j < nd; j++) {
            int tni, tna, tnd, tcomb;
            CHECK_MPI(MPI_Type_get_envelope(types[j], &tni, &tna, &tnd, &tcomb));
            if (tcomb == MPI_COMBINER_NAMED)
                continue;
            if (next == MPI_DATATYPE_NULL)
                next = types[j];
            else
                CHECK_MPI(MPI_Type_free(&types[j]));
        }
        if (cur != t)
            CHECK_MPI(MPI_Type_free(&cur));
        if (level < 5)
            CHECK(next != MPI_DATATYPE_NULL, "level %d names no derived type", 6 - level);
        else
            CHECK(next == MPI_DATATYPE_NULL, "the innermost struct names a derived type");
        cur = next;
    }
}

int main(int argc, char **argv)
{
    int rank, size, left, right, n, i;
    Built *types;

    MPI_Init(&argc, &argv);
    test_begin("many_types");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    n = argc > 1 ? atoi(argv[1]) : 10000;
    CHECK(n > 0, "bad N");

    types = test_malloc(sizeof(Built) * (size_t)n);
    for (i = 0; i < n; i++)
        types[i] = build(i);
    check_chain(types[0].type);
    for (i = 0; i < n; i++)
        exchange(&types[i], i, left, right);
    for (i = 0; i < n; i++) {
        CHECK_MPI(MPI_Type_free(&types[i].type));
        free(types[i].map.e);
    }
    free(types);
    return test_end();
}
