/*
 * hetero - data between processes of different architectures: every predefined datatype, a
 * struct type, vector types, MPI_PACKED, Bcast and Allreduce, values checked.
 *
 * Meant for a job whose ranks run builds of this program for different machines (byte order,
 * the size of long, the format of long double), e.g.
 *     stormrun -n 2 ./hetero-x86_64 : -n 1 ./hetero-s390x : -n 1 ./hetero-i686
 * but correct on any job of 2 or more ranks. Every pair of ranks exchanges in both directions.
 * Values are chosen to be exactly representable on every architecture; each receiver computes
 * the expected values itself and compares by value (padding bytes never matter).
 *
 * A 64-bit long value above 2^31 sent to a rank whose long has 32 bits must fail with
 * MPI_ERR_VALUE_TOO_LARGE, not arrive truncated. A long double between formats that cannot be
 * converted (IBM double-double on ppc64 and x87/binary128 elsewhere) must fail with
 * MPI_ERR_UNSUPPORTED_OPERATION at the receiver, not arrive as garbage.
 */
#include "stormtest.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <wchar.h>

#ifndef MPI_ERR_VALUE_TOO_LARGE
#define MPI_ERR_VALUE_TOO_LARGE MPI_ERR_OTHER /* before MPI 4.0 (Open MPI 4) */
#endif
#ifndef MPI_ERR_UNSUPPORTED_OPERATION
#define MPI_ERR_UNSUPPORTED_OPERATION MPI_ERR_OTHER
#endif

#define N 7

enum kind {
    K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64, K_LONG, K_ULONG,
    K_FLOAT, K_DOUBLE, K_LDOUBLE, K_QUAD,
    K_CFLOAT, K_CDOUBLE, K_CLDOUBLE, K_CQUAD,
    K_BOOL, K_LOGICAL, K_CHAR, K_WCHAR, K_BYTE, K_AINT, K_OFFSET, K_COUNT,
    K_2INT, K_FLOAT_INT, K_DOUBLE_INT, K_LONG_INT, K_SHORT_INT, K_LDOUBLE_INT, K_2FLOAT,
    K_2DOUBLE,
};

struct entry {
    MPI_Datatype type;
    const char *name;
    enum kind kind;
    size_t size; /* bytes of one element in this process's memory (its extent) */
};

struct float_int { float v; int i; };
struct double_int { double v; int i; };
struct long_int { long v; int i; };
struct short_int { short v; int i; };
struct ldouble_int { long double v; int i; };

#define E(t, k, c) { t, #t, k, sizeof(c) }
static const struct entry types[] = {
    E(MPI_CHAR, K_CHAR, char),
    E(MPI_SIGNED_CHAR, K_I8, signed char),
    E(MPI_UNSIGNED_CHAR, K_U8, unsigned char),
    E(MPI_BYTE, K_BYTE, unsigned char),
    E(MPI_WCHAR, K_WCHAR, wchar_t),
    E(MPI_SHORT, K_I16, short),
    E(MPI_UNSIGNED_SHORT, K_U16, unsigned short),
    E(MPI_INT, K_I32, int),
    E(MPI_UNSIGNED, K_U32, unsigned),
    E(MPI_LONG, K_LONG, long),
    E(MPI_UNSIGNED_LONG, K_ULONG, unsigned long),
    E(MPI_LONG_LONG, K_I64, long long),
    E(MPI_UNSIGNED_LONG_LONG, K_U64, unsigned long long),
    E(MPI_FLOAT, K_FLOAT, float),
    E(MPI_DOUBLE, K_DOUBLE, double),
    E(MPI_LONG_DOUBLE, K_LDOUBLE, long double),
    E(MPI_INT8_T, K_I8, int8_t),
    E(MPI_INT16_T, K_I16, int16_t),
    E(MPI_INT32_T, K_I32, int32_t),
    E(MPI_INT64_T, K_I64, int64_t),
    E(MPI_UINT8_T, K_U8, uint8_t),
    E(MPI_UINT16_T, K_U16, uint16_t),
    E(MPI_UINT32_T, K_U32, uint32_t),
    E(MPI_UINT64_T, K_U64, uint64_t),
    E(MPI_C_BOOL, K_BOOL, bool),
    E(MPI_CXX_BOOL, K_BOOL, bool),
    E(MPI_AINT, K_AINT, MPI_Aint),
    E(MPI_OFFSET, K_OFFSET, MPI_Offset),
    E(MPI_COUNT, K_COUNT, MPI_Count),
    E(MPI_C_FLOAT_COMPLEX, K_CFLOAT, float _Complex),
    E(MPI_C_DOUBLE_COMPLEX, K_CDOUBLE, double _Complex),
    E(MPI_C_LONG_DOUBLE_COMPLEX, K_CLDOUBLE, long double _Complex),
    E(MPI_CXX_FLOAT_COMPLEX, K_CFLOAT, float _Complex),
    E(MPI_CXX_DOUBLE_COMPLEX, K_CDOUBLE, double _Complex),
    E(MPI_CXX_LONG_DOUBLE_COMPLEX, K_CLDOUBLE, long double _Complex),
    E(MPI_INTEGER, K_I32, int32_t),
    E(MPI_REAL, K_FLOAT, float),
    E(MPI_DOUBLE_PRECISION, K_DOUBLE, double),
    E(MPI_LOGICAL, K_LOGICAL, int32_t),
    E(MPI_CHARACTER, K_CHAR, char),
    E(MPI_COMPLEX, K_CFLOAT, float _Complex),
    E(MPI_DOUBLE_COMPLEX, K_CDOUBLE, double _Complex),
    E(MPI_INTEGER1, K_I8, int8_t),
    E(MPI_INTEGER2, K_I16, int16_t),
    E(MPI_INTEGER4, K_I32, int32_t),
    E(MPI_INTEGER8, K_I64, int64_t),
    E(MPI_REAL4, K_FLOAT, float),
    E(MPI_REAL8, K_DOUBLE, double),
    { MPI_REAL16, "MPI_REAL16", K_QUAD, 16 },
    E(MPI_COMPLEX8, K_CFLOAT, float _Complex),
    E(MPI_COMPLEX16, K_CDOUBLE, double _Complex),
    { MPI_COMPLEX32, "MPI_COMPLEX32", K_CQUAD, 32 },
    { MPI_2INT, "MPI_2INT", K_2INT, 2 * sizeof(int) },
    { MPI_2INTEGER, "MPI_2INTEGER", K_2INT, 2 * sizeof(int) },
    E(MPI_FLOAT_INT, K_FLOAT_INT, struct float_int),
    E(MPI_DOUBLE_INT, K_DOUBLE_INT, struct double_int),
    E(MPI_LONG_INT, K_LONG_INT, struct long_int),
    E(MPI_SHORT_INT, K_SHORT_INT, struct short_int),
    E(MPI_LONG_DOUBLE_INT, K_LDOUBLE_INT, struct ldouble_int),
    { MPI_2REAL, "MPI_2REAL", K_2FLOAT, 2 * sizeof(float) },
    { MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION", K_2DOUBLE, 2 * sizeof(double) },
};
#define NTYPES (sizeof types / sizeof types[0])

static int big_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 0;
}

/* An IEEE binary128 value equal to double d (exact for normal doubles), in native byte order. */
static void quad_of(double d, unsigned char out[16])
{
    uint64_t bits, hi = 0, lo = 0;
    memcpy(&bits, &d, 8);
    uint64_t sign = bits >> 63, exp = (bits >> 52) & 0x7ff, frac = bits & ((1ull << 52) - 1);
    if (exp != 0) {
        hi = (sign << 63) | ((exp - 1023 + 16383) << 48) | (frac >> 4);
        lo = frac << 60;
    } else {
        hi = sign << 63; /* zero (the values used here have no subnormals) */
    }
    uint64_t words[2];
    if (big_endian()) {
        words[0] = hi;
        words[1] = lo;
    } else {
        words[0] = lo;
        words[1] = hi;
    }
    memcpy(out, words, 16);
}

/* The values, as exact numbers every architecture stores without rounding. */
static long long ival(int k, int bits) /* signed, fits `bits` */
{
    long long v = (long long)(k - 3);
    switch (bits) {
    case 8: return v * 37;
    case 16: return v * 10007;
    case 32: return v * 700000001LL;
    default: return v * 3000000000007LL;
    }
}
static unsigned long long uval(int k, int bits)
{
    unsigned long long v = (unsigned long long)k;
    switch (bits) {
    case 8: return v * 41 + 3;
    case 16: return v * 9001 + 5;
    case 32: return v * 600000001ULL + 7;
    default: return v * 2000000000003ULL + 11;
    }
}
/* Exact on every FPU (i386's x87 rounds products twice): small binary fractions scaled by
 * powers of two. */
static double dval(int k) { return ldexp((k - 3) * 1.5 + 0.25, 200 + k); }
static float fval(int k) { return (float)(k - 3) * 1.25f + 0.5f; }
static long double ldval(int k) { return (long double)(k - 3) * 1.5L + 0.125L; }

/* Writes element k of `kind` at p. */
static void put(enum kind kind, int k, void *p)
{
    switch (kind) {
    case K_I8: *(int8_t *)p = (int8_t)ival(k, 8); break;
    case K_U8: *(uint8_t *)p = (uint8_t)uval(k, 8); break;
    case K_I16: *(int16_t *)p = (int16_t)ival(k, 16); break;
    case K_U16: *(uint16_t *)p = (uint16_t)uval(k, 16); break;
    case K_I32: *(int32_t *)p = (int32_t)ival(k, 32); break;
    case K_U32: *(uint32_t *)p = (uint32_t)uval(k, 32); break;
    case K_I64: *(int64_t *)p = (int64_t)ival(k, 64); break;
    case K_U64: *(uint64_t *)p = (uint64_t)uval(k, 64); break;
    case K_LONG: *(long *)p = (long)ival(k, 32); break;
    case K_ULONG: *(unsigned long *)p = (unsigned long)uval(k, 32); break;
    case K_AINT: *(MPI_Aint *)p = (MPI_Aint)ival(k, 32); break;
    case K_OFFSET: *(MPI_Offset *)p = (MPI_Offset)ival(k, 64); break;
    case K_COUNT: *(MPI_Count *)p = (MPI_Count)ival(k, 64); break;
    case K_FLOAT: *(float *)p = fval(k); break;
    case K_DOUBLE: *(double *)p = dval(k); break;
    case K_LDOUBLE: *(long double *)p = ldval(k); break;
    case K_QUAD: quad_of(dval(k), p); break;
    case K_CFLOAT: ((float *)p)[0] = fval(k); ((float *)p)[1] = fval(k + 1); break;
    case K_CDOUBLE: ((double *)p)[0] = dval(k); ((double *)p)[1] = dval(k + 2); break;
    case K_CLDOUBLE: ((long double *)p)[0] = ldval(k); ((long double *)p)[1] = ldval(k + 3); break;
    case K_CQUAD: quad_of(dval(k), p); quad_of(dval(k + 1), (unsigned char *)p + 16); break;
    case K_BOOL: *(bool *)p = k % 2; break;
    case K_LOGICAL: *(int32_t *)p = k % 2; break;
    case K_CHAR: *(char *)p = (char)('a' + k); break;
    case K_WCHAR: *(wchar_t *)p = (wchar_t)(0x263a + k); break;
    case K_BYTE: *(unsigned char *)p = (unsigned char)(k * 13 + 1); break;
    case K_2INT: ((int *)p)[0] = (int)ival(k, 32); ((int *)p)[1] = 3 * k - 7; break;
    case K_FLOAT_INT: ((struct float_int *)p)->v = fval(k); ((struct float_int *)p)->i = 3 * k - 7; break;
    case K_DOUBLE_INT: ((struct double_int *)p)->v = dval(k); ((struct double_int *)p)->i = 3 * k - 7; break;
    case K_LONG_INT: ((struct long_int *)p)->v = (long)ival(k, 32); ((struct long_int *)p)->i = 3 * k - 7; break;
    case K_SHORT_INT: ((struct short_int *)p)->v = (short)ival(k, 16); ((struct short_int *)p)->i = 3 * k - 7; break;
    case K_LDOUBLE_INT: ((struct ldouble_int *)p)->v = ldval(k); ((struct ldouble_int *)p)->i = 3 * k - 7; break;
    case K_2FLOAT: ((float *)p)[0] = fval(k); ((float *)p)[1] = fval(k + 4); break;
    case K_2DOUBLE: ((double *)p)[0] = dval(k); ((double *)p)[1] = dval(k + 4); break;
    }
}

/* Whether element k of `kind` at p has its value (compared by value: no padding bytes). */
static int same(enum kind kind, int k, const void *p)
{
    unsigned char want[64];
    memset(want, 0, sizeof want);
    put(kind, k, want);
    switch (kind) {
    case K_LDOUBLE: return *(const long double *)p == *(const long double *)want;
    case K_CLDOUBLE:
        return ((const long double *)p)[0] == ((const long double *)want)[0] &&
               ((const long double *)p)[1] == ((const long double *)want)[1];
    case K_FLOAT_INT: {
        const struct float_int *a = p, *b = (const void *)want;
        return a->v == b->v && a->i == b->i;
    }
    case K_DOUBLE_INT: {
        const struct double_int *a = p, *b = (const void *)want;
        return a->v == b->v && a->i == b->i;
    }
    case K_LONG_INT: {
        const struct long_int *a = p, *b = (const void *)want;
        return a->v == b->v && a->i == b->i;
    }
    case K_SHORT_INT: {
        const struct short_int *a = p, *b = (const void *)want;
        return a->v == b->v && a->i == b->i;
    }
    case K_LDOUBLE_INT: {
        const struct ldouble_int *a = p, *b = (const void *)want;
        return a->v == b->v && a->i == b->i;
    }
    case K_BOOL: return *(const bool *)p == *(const bool *)want;
    default: {
        size_t n;
        switch (kind) {
        case K_I8: case K_U8: case K_CHAR: case K_BYTE: n = 1; break;
        case K_I16: case K_U16: n = 2; break;
        case K_I32: case K_U32: case K_LOGICAL: case K_FLOAT: n = 4; break;
        case K_WCHAR: n = sizeof(wchar_t); break;
        case K_LONG: case K_ULONG: n = sizeof(long); break;
        case K_AINT: n = sizeof(MPI_Aint); break;
        case K_OFFSET: n = sizeof(MPI_Offset); break;
        case K_COUNT: n = sizeof(MPI_Count); break;
        case K_I64: case K_U64: case K_DOUBLE: case K_CFLOAT: case K_2INT: case K_2FLOAT: n = 8; break;
        case K_QUAD: case K_CDOUBLE: case K_2DOUBLE: n = 16; break;
        case K_CQUAD: n = 32; break;
        default: n = 0; break;
        }
        return memcmp(p, want, n) == 0;
    }
    }
}

/* One record of the struct test: padding differs between architectures, the type signature
 * does not. */
struct rec {
    char c;
    int i;
    double d;
    long l;
    short s[3];
};

static MPI_Datatype rec_type(void)
{
    int lens[5] = {1, 1, 1, 1, 3};
    MPI_Aint displs[5] = {offsetof(struct rec, c), offsetof(struct rec, i),
                          offsetof(struct rec, d), offsetof(struct rec, l),
                          offsetof(struct rec, s)};
    MPI_Datatype ts[5] = {MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_LONG, MPI_SHORT};
    MPI_Datatype t, r;
    CHECK_MPI(MPI_Type_create_struct(5, lens, displs, ts, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, sizeof(struct rec), &r));
    CHECK_MPI(MPI_Type_free(&t));
    CHECK_MPI(MPI_Type_commit(&r));
    return r;
}

static void rec_fill(struct rec *r, int k)
{
    memset(r, 0, sizeof *r);
    r->c = (char)('A' + k);
    r->i = (int)ival(k, 32);
    r->d = dval(k);
    r->l = (long)ival(k + 1, 32);
    for (int j = 0; j < 3; j++)
        r->s[j] = (short)ival(k + j, 16);
}

static int rec_same(const struct rec *r, int k)
{
    struct rec w;
    rec_fill(&w, k);
    return r->c == w.c && r->i == w.i && r->d == w.d && r->l == w.l && r->s[0] == w.s[0] &&
           r->s[1] == w.s[1] && r->s[2] == w.s[2];
}

/* Mantissa bits of each rank's long double (53 binary64, 64 x87, 106 IBM double-double, 113
 * binary128): the known IEEE-style formats convert into each other, double-double does not. */
static int ld_mant[16];

static int is_long_double(enum kind k)
{
    return k == K_LDOUBLE || k == K_CLDOUBLE || k == K_LDOUBLE_INT;
}

static int ld_convertible(int a, int b)
{
    return ld_mant[a] == ld_mant[b] || (ld_mant[a] != 106 && ld_mant[b] != 106);
}

/* from -> to: every predefined type, the struct, vectors, packed data. */
static void exchange(int me, int from, int to, MPI_Datatype rec)
{
    const int tag = 40 + from;
    if (me == from) {
        union {
            long double align;
            unsigned char b[N * 64];
        } u;
        unsigned char *buf = u.b;
        for (size_t t = 0; t < NTYPES; t++) {
            for (int k = 0; k < N; k++)
                put(types[t].kind, k, buf + k * types[t].size);
            CHECK_MPI(MPI_Send(buf, N, types[t].type, to, tag, MPI_COMM_WORLD));
        }
        struct rec rs[5];
        for (int k = 0; k < 5; k++)
            rec_fill(&rs[k], k);
        CHECK_MPI(MPI_Send(rs, 5, rec, to, tag, MPI_COMM_WORLD));

        /* Column 2 of an 8x6 matrix of doubles, sent as a vector. */
        double m[8][6];
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 6; c++)
                m[r][c] = dval(r * 6 + c);
        MPI_Datatype col;
        CHECK_MPI(MPI_Type_vector(8, 1, 6, MPI_DOUBLE, &col));
        CHECK_MPI(MPI_Type_commit(&col));
        CHECK_MPI(MPI_Send(&m[0][2], 1, col, to, tag, MPI_COMM_WORLD));
        /* A contiguous row of ints, received into a column on the other side. */
        int row[8];
        for (int r = 0; r < 8; r++)
            row[r] = (int)ival(r, 32) + r;
        CHECK_MPI(MPI_Send(row, 8, MPI_INT, to, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Type_free(&col));

        /* Packed data: ints and a double, packed for this communicator. */
        char packed[256];
        int pos = 0, ints[3] = {(int)ival(1, 32), (int)ival(2, 32), (int)ival(5, 32)};
        double d = dval(6);
        CHECK_MPI(MPI_Pack(ints, 3, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Pack(&d, 1, MPI_DOUBLE, packed, sizeof packed, &pos, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(packed, pos, MPI_PACKED, to, tag, MPI_COMM_WORLD));
    } else if (me == to) {
        union {
            long double align;
            unsigned char b[N * 64];
        } u;
        unsigned char *buf = u.b;
        for (size_t t = 0; t < NTYPES; t++) {
            memset(buf, 0xa5, sizeof u.b);
            MPI_Status st;
            if (is_long_double(types[t].kind) && !ld_convertible(from, me)) {
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
                int rc = MPI_Recv(buf, N, types[t].type, from, tag, MPI_COMM_WORLD, &st);
                MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
                int class = MPI_SUCCESS;
                MPI_Error_class(rc, &class);
                CHECK(class == MPI_ERR_UNSUPPORTED_OPERATION,
                      "%s from rank %d (%d-bit long double mantissa, mine %d): error class %d, "
                      "want MPI_ERR_UNSUPPORTED_OPERATION", types[t].name, from, ld_mant[from],
                      ld_mant[me], class);
                continue;
            }
            CHECK_MPI(MPI_Recv(buf, N, types[t].type, from, tag, MPI_COMM_WORLD, &st));
            int count = -1;
            CHECK_MPI(MPI_Get_count(&st, types[t].type, &count));
            CHECK(count == N, "%s from rank %d: count %d, want %d", types[t].name, from, count, N);
            for (int k = 0; k < N; k++)
                CHECK(same(types[t].kind, k, buf + k * types[t].size),
                      "%s from rank %d: element %d differs", types[t].name, from, k);
        }
        struct rec rs[5];
        memset(rs, 0, sizeof rs);
        MPI_Status st;
        CHECK_MPI(MPI_Recv(rs, 5, rec, from, tag, MPI_COMM_WORLD, &st));
        int count = -1, elems = -1;
        CHECK_MPI(MPI_Get_count(&st, rec, &count));
        CHECK_MPI(MPI_Get_elements(&st, rec, &elems));
        CHECK(count == 5 && elems == 35, "struct from rank %d: count %d elements %d", from, count,
              elems);
        for (int k = 0; k < 5; k++)
            CHECK(rec_same(&rs[k], k), "struct from rank %d: record %d differs", from, k);

        double col[8];
        CHECK_MPI(MPI_Recv(col, 8, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int r = 0; r < 8; r++)
            CHECK(col[r] == dval(r * 6 + 2), "vector column from rank %d: row %d", from, r);
        int m[8][3];
        memset(m, 0, sizeof m);
        MPI_Datatype icol;
        CHECK_MPI(MPI_Type_vector(8, 1, 3, MPI_INT, &icol));
        CHECK_MPI(MPI_Type_commit(&icol));
        CHECK_MPI(MPI_Recv(&m[0][1], 1, icol, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int r = 0; r < 8; r++)
            CHECK(m[r][1] == (int)ival(r, 32) + r && m[r][0] == 0 && m[r][2] == 0,
                  "int column from rank %d: row %d", from, r);
        CHECK_MPI(MPI_Type_free(&icol));

        char packed[256];
        CHECK_MPI(MPI_Recv(packed, sizeof packed, MPI_PACKED, from, tag, MPI_COMM_WORLD, &st));
        int n = 0, pos = 0, ints[3];
        double d = 0;
        CHECK_MPI(MPI_Get_count(&st, MPI_PACKED, &n));
        CHECK_MPI(MPI_Unpack(packed, n, &pos, ints, 3, MPI_INT, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Unpack(packed, n, &pos, &d, 1, MPI_DOUBLE, MPI_COMM_WORLD));
        CHECK(ints[0] == (int)ival(1, 32) && ints[1] == (int)ival(2, 32) &&
                  ints[2] == (int)ival(5, 32) && d == dval(6),
              "packed data from rank %d differs", from);
    }
}

/* from -> to: a long that does not fit the receiver's long is an error there, not truncation. */
static void overflow(int me, int from, int to, const int *long_bytes)
{
    if (long_bytes[from] <= long_bytes[to])
        return;
    if (me == from) {
        long v[2] = {5, (long)(((unsigned long)1) << (8 * long_bytes[to] - 1)) * 4};
        CHECK_MPI(MPI_Send(v, 2, MPI_LONG, to, 99, MPI_COMM_WORLD));
    } else if (me == to) {
        long v[2] = {0, 0};
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Recv(v, 2, MPI_LONG, from, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        int class = MPI_SUCCESS;
        MPI_Error_class(rc, &class);
        CHECK(class == MPI_ERR_VALUE_TOO_LARGE,
              "a %d-byte long above 2^%d from rank %d gave error class %d, want "
              "MPI_ERR_VALUE_TOO_LARGE", long_bytes[from], 8 * long_bytes[to] - 1, from, class);
        CHECK(v[0] == 5, "the value that fits still arrived (got %ld)", v[0]);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("hetero");
    int me, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    CHECK(size <= 16, "at most 16 ranks");

    /* Who is what, for the log and the overflow check. */
    int long_bytes[16];
    int mine[3] = {(int)sizeof(long), big_endian(), LDBL_MANT_DIG};
    int all[48];
    for (int r = 0; r < size; r++) {
        int v[3];
        memcpy(v, mine, sizeof v);
        CHECK_MPI(MPI_Bcast(v, 3, MPI_INT, r, MPI_COMM_WORLD));
        memcpy(&all[3 * r], v, sizeof v);
        long_bytes[r] = v[0];
        ld_mant[r] = v[2];
    }
    if (me == 0)
        for (int r = 0; r < size; r++)
            printf("rank %d: %s-endian, %d-byte long, %d-bit long double mantissa\n", r,
                   all[3 * r + 1] ? "big" : "little", all[3 * r], all[3 * r + 2]);

    MPI_Datatype rec = rec_type();
    for (int a = 0; a < size; a++)
        for (int b = 0; b < size; b++)
            if (a != b) {
                exchange(me, a, b, rec);
                overflow(me, a, b, long_bytes);
            }
    CHECK_MPI(MPI_Type_free(&rec));

    /* Collectives: every rank the root once. */
    for (int root = 0; root < size; root++) {
        int iv[5];
        double dv[5];
        for (int k = 0; k < 5; k++) {
            iv[k] = me == root ? (int)ival(k, 32) + root : -1;
            dv[k] = me == root ? dval(k + root) : -1.0;
        }
        CHECK_MPI(MPI_Bcast(iv, 5, MPI_INT, root, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Bcast(dv, 5, MPI_DOUBLE, root, MPI_COMM_WORLD));
        for (int k = 0; k < 5; k++)
            CHECK(iv[k] == (int)ival(k, 32) + root && dv[k] == dval(k + root),
                  "Bcast from %d: element %d", root, k);
    }
    int isum[4], iwant[4];
    double dmax[4], dwant[4];
    long lsum[2], lwant[2];
    for (int k = 0; k < 4; k++) {
        isum[k] = (me + 1) * (k + 1) * 1000 - k;
        dmax[k] = (double)((me * 7 + k * 3) % size) + 0.5 * k;
        iwant[k] = 0;
        dwant[k] = -1.0;
        for (int r = 0; r < size; r++) {
            iwant[k] += (r + 1) * (k + 1) * 1000 - k;
            double v = (double)((r * 7 + k * 3) % size) + 0.5 * k;
            dwant[k] = v > dwant[k] ? v : dwant[k];
        }
    }
    for (int k = 0; k < 2; k++) {
        lsum[k] = (long)(me + 1) * 100000 * (k + 1);
        lwant[k] = 0;
        for (int r = 0; r < size; r++)
            lwant[k] += (long)(r + 1) * 100000 * (k + 1);
    }
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, isum, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, dmax, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, lsum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < 4; k++)
        CHECK(isum[k] == iwant[k] && dmax[k] == dwant[k],
              "Allreduce element %d: sum %d (want %d), max %g (want %g)", k, isum[k], iwant[k],
              dmax[k], dwant[k]);
    for (int k = 0; k < 2; k++)
        CHECK(lsum[k] == lwant[k], "Allreduce MPI_LONG element %d: %ld, want %ld", k, lsum[k],
              lwant[k]);
    return test_end();
}
