/*
 * rma_atomics.c - accumulates are atomic element-wise whichever way they are applied.
 *
 * Part 1 (every rank at once, under MPI_Win_lock_all, against counters on the last rank):
 * MPI_Fetch_and_op MPI_SUM, a single-element MPI_Accumulate, a 4-element MPI_Accumulate, a
 * 4-element MPI_Get_accumulate, an accumulate through a vector type and a compare-and-swap
 * increment loop all add to the same MPI_LONG element, mixed; MPI_INT and MPI_SHORT counters
 * the same with fetch-and-op and multi-element accumulates; MPI_MAX and MPI_BXOR from every
 * rank. The totals must be exact, and the values MPI_Fetch_and_op returned on a counter only
 * it touches must be every value from 0 up, once each.
 *
 * Part 2 (one origin): every predefined integer type with every operation that applies to it
 * (MPI_SUM, PROD, MAX, MIN, BAND, BOR, BXOR, LAND, LOR, LXOR, REPLACE, NO_OP) and
 * MPI_Compare_and_swap, at an aligned element (where a shared window uses the CPU's atomics)
 * and at a misaligned one (where it uses the accumulate lock), each checked against the
 * same operation computed here in C and against the other.
 */
#include "stormtest.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ITERS 300

enum { NOPS = 12 };
static const char *op_names[NOPS] = {"SUM", "PROD", "MAX",  "MIN", "BAND",    "BOR",
                                     "BXOR", "LAND", "LOR", "LXOR", "REPLACE", "NO_OP"};

static MPI_Op op_of(int k)
{
    MPI_Op ops[NOPS] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN,  MPI_BAND,    MPI_BOR,
                        MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_REPLACE, MPI_NO_OP};
    return ops[k];
}

/* The result of op k on target value a with operand b, in type T (wrapping as the hardware). */
#define REF(T, k, a, b)                                                                    \
    ((k) == 0    ? (T)((unsigned long long)(a) + (unsigned long long)(b))                  \
     : (k) == 1  ? (T)((unsigned long long)(a) * (unsigned long long)(b))                  \
     : (k) == 2  ? ((a) > (b) ? (a) : (b))                                                 \
     : (k) == 3  ? ((a) < (b) ? (a) : (b))                                                 \
     : (k) == 4  ? (T)((a) & (b))                                                          \
     : (k) == 5  ? (T)((a) | (b))                                                          \
     : (k) == 6  ? (T)((a) ^ (b))                                                          \
     : (k) == 7  ? (T)((a) && (b))                                                         \
     : (k) == 8  ? (T)((a) || (b))                                                         \
     : (k) == 9  ? (T)(!(a) != !(b))                                                       \
     : (k) == 10 ? (b)                                                                     \
                 : (a))

/* Part 2 for one type: window bytes [ALIGNED, +8) aligned, [MISALIGNED, +8) odd. */
#define ALIGNED 128
#define MISALIGNED 193
#define TYPE_CASES(T, MT)                                                                  \
    do {                                                                                   \
        T vals[4][2] = {{(T)5, (T)3}, {(T)-7, (T)2}, {(T)0, (T)9}, {(T)12, (T)0}};         \
        for (int k = 0; k < NOPS; k++) {                                                   \
            for (int v = 0; v < 4; v++) {                                                  \
                T a = vals[v][0], b = vals[v][1], want = REF(T, k, a, b);                  \
                T got[2], old[2];                                                          \
                MPI_Aint at[2] = {ALIGNED, MISALIGNED};                                    \
                for (int p = 0; p < 2; p++) {                                              \
                    CHECK_MPI(MPI_Put(&a, 1, MT, t, at[p], 1, MT, win));                   \
                    CHECK_MPI(MPI_Win_flush(t, win));                                      \
                    if (p == 0)                                                            \
                        CHECK_MPI(MPI_Fetch_and_op(&b, &old[p], MT, t, at[p], op_of(k), win)); \
                    else                                                                   \
                        CHECK_MPI(MPI_Get_accumulate(&b, 1, MT, &old[p], 1, MT, t, at[p], 1, \
                                                     MT, op_of(k), win));                  \
                    CHECK_MPI(MPI_Win_flush(t, win));                                      \
                    CHECK_MPI(MPI_Get(&got[p], 1, MT, t, at[p], 1, MT, win));              \
                    CHECK_MPI(MPI_Win_flush(t, win));                                      \
                    CHECK(old[p] == a && got[p] == want,                                   \
                          "%s %s at %s: %lld op %lld gave %lld (old %lld), want %lld", #MT,   \
                          op_names[k], p ? "misaligned" : "aligned", (long long)a,         \
                          (long long)b, (long long)got[p], (long long)old[p],              \
                          (long long)want);                                                \
                }                                                                          \
                CHECK(got[0] == got[1], "%s %s: atomic and locked paths differ", #MT,      \
                      op_names[k]);                                                        \
                if (k == NOPS - 1)                                                         \
                    continue;                                                              \
                /* Three elements in one accumulate, aligned: each combined. */            \
                T three_a[3] = {a, a, a}, three_b[3] = {b, b, b}, three[3];                \
                CHECK_MPI(MPI_Put(three_a, 3, MT, t, ALIGNED, 3, MT, win));                \
                CHECK_MPI(MPI_Accumulate(three_b, 3, MT, t, ALIGNED, 3, MT, op_of(k), win)); \
                CHECK_MPI(MPI_Get(three, 3, MT, t, ALIGNED, 3, MT, win));                  \
                CHECK_MPI(MPI_Win_flush(t, win));                                          \
                for (int e = 0; e < 3; e++)                                                \
                    CHECK(three[e] == want, "%s %s: element %d of 3 is %lld, want %lld",   \
                          #MT, op_names[k], e, (long long)three[e], (long long)want);       \
            }                                                                              \
        }                                                                                  \
        for (int p = 0; p < 2; p++) {                                                      \
            MPI_Aint at = p ? MISALIGNED : ALIGNED;                                        \
            T a = (T)7, n = (T)-3, wrong = (T)8, old = 0, got = 0;                         \
            CHECK_MPI(MPI_Put(&a, 1, MT, t, at, 1, MT, win));                              \
            CHECK_MPI(MPI_Compare_and_swap(&n, &wrong, &old, MT, t, at, win));             \
            CHECK_MPI(MPI_Get(&got, 1, MT, t, at, 1, MT, win));                            \
            CHECK_MPI(MPI_Win_flush(t, win));                                              \
            CHECK(old == a && got == a, "%s CAS with a wrong compare swapped", #MT);       \
            CHECK_MPI(MPI_Compare_and_swap(&n, &a, &old, MT, t, at, win));                 \
            CHECK_MPI(MPI_Get(&got, 1, MT, t, at, 1, MT, win));                            \
            CHECK_MPI(MPI_Win_flush(t, win));                                              \
            CHECK(old == a && got == n, "%s CAS with the right compare did not swap", #MT); \
        }                                                                                  \
    } while (0)

struct counters {
    long total;      /* every kind of accumulate, mixed */
    long pad0[3];    /* the 4-element accumulates' other elements */
    long fop_only;   /* only MPI_Fetch_and_op */
    long max;        /* MPI_MAX */
    long bxor;       /* MPI_BXOR */
    int ints[4];     /* MPI_INT: fetch-and-op and 4-element accumulates */
    short shorts[4]; /* MPI_SHORT: the same */
};

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_atomics");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int t = size - 1;

    char *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    memset(mem, 0, 4096);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Part 1. */
    MPI_Datatype two_apart; /* elements 0 and 2 of a long array */
    CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_LONG, &two_apart));
    CHECK_MPI(MPI_Type_commit(&two_apart));
    long *fetched = malloc(ITERS * sizeof(long));
    CHECK(fetched != NULL, "malloc");
    long one = 1, ones[4] = {1, 1, 1, 1}, olds[4], old;
    int ione = 1, iones[4] = {1, 1, 1, 1};
    short sone = 1, sones[4] = {1, 1, 1, 1}, sold;
    long mine_xor = 0;
    MPI_Aint ints_at = offsetof(struct counters, ints), shorts_at = offsetof(struct counters, shorts);
    CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < ITERS; i++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, t, 0, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, t, 0, 1, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(ones, 4, MPI_LONG, t, 0, 4, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Get_accumulate(ones, 4, MPI_LONG, olds, 4, MPI_LONG, t, 0, 4, MPI_LONG,
                                     MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(ones, 2, MPI_LONG, t, 0, 1, two_apart, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(t, win));
        /* Increment by compare-and-swap: read, then swap in old+1 until nobody came between. */
        long cur, next, seen;
        CHECK_MPI(MPI_Fetch_and_op(NULL, &cur, MPI_LONG, t, 0, MPI_NO_OP, win));
        CHECK_MPI(MPI_Win_flush(t, win));
        for (;;) {
            next = cur + 1;
            CHECK_MPI(MPI_Compare_and_swap(&next, &cur, &seen, MPI_LONG, t, 0, win));
            CHECK_MPI(MPI_Win_flush(t, win));
            if (seen == cur)
                break;
            cur = seen;
        }
        CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[i], MPI_LONG, t, offsetof(struct counters, fop_only),
                                   MPI_SUM, win));
        long mx = (long)rank * ITERS + i, x = ((long)rank << 20) ^ i;
        mine_xor ^= x;
        CHECK_MPI(MPI_Fetch_and_op(&mx, &old, MPI_LONG, t, offsetof(struct counters, max), MPI_MAX, win));
        CHECK_MPI(MPI_Accumulate(&x, 1, MPI_LONG, t, offsetof(struct counters, bxor), 1, MPI_LONG,
                                 MPI_BXOR, win));
        int iold;
        CHECK_MPI(MPI_Fetch_and_op(&ione, &iold, MPI_INT, t, ints_at, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(iones, 4, MPI_INT, t, ints_at, 4, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Fetch_and_op(&sone, &sold, MPI_SHORT, t, shorts_at, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(sones, 4, MPI_SHORT, t, shorts_at, 4, MPI_SHORT, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(t, win));
    }
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    long *all = NULL;
    if (rank == 0) {
        all = malloc((size_t)size * ITERS * sizeof(long));
        CHECK(all != NULL, "malloc");
    }
    CHECK_MPI(MPI_Gather(fetched, ITERS, MPI_LONG, all, ITERS, MPI_LONG, 0, MPI_COMM_WORLD));
    long xor_all = 0;
    CHECK_MPI(MPI_Reduce(&mine_xor, &xor_all, 1, MPI_LONG, MPI_BXOR, 0, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Bcast(&xor_all, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        long n = (long)size * ITERS;
        char *seen = calloc((size_t)n, 1);
        CHECK(seen != NULL, "calloc");
        for (long i = 0; i < n; i++) {
            CHECK(all[i] >= 0 && all[i] < n && !seen[all[i]],
                  "MPI_Fetch_and_op returned %ld twice or out of 0..%ld", all[i], n - 1);
            seen[all[i]] = 1;
        }
        free(seen);
        free(all);
    }
    if (rank == t) {
        struct counters *c = (struct counters *)mem;
        long n = (long)size * ITERS;
        CHECK(c->total == 6 * n, "mixed accumulates on one long: %ld, want %ld", c->total, 6 * n);
        CHECK(c->pad0[0] == 2 * n && c->pad0[1] == 3 * n && c->pad0[2] == 2 * n,
              "4-element accumulates: %ld %ld %ld, want %ld %ld %ld", c->pad0[0], c->pad0[1],
              c->pad0[2], 2 * n, 3 * n, 2 * n);
        CHECK(c->fop_only == n, "fetch-and-op counter %ld, want %ld", c->fop_only, n);
        CHECK(c->max == n - 1, "MPI_MAX gave %ld, want %ld", c->max, n - 1);
        CHECK(c->bxor == xor_all, "MPI_BXOR gave %lx, want %lx", c->bxor, xor_all);
        CHECK(c->ints[0] == 2 * n && c->ints[3] == n, "MPI_INT counters %d %d, want %ld %ld",
              c->ints[0], c->ints[3], 2 * n, n);
        CHECK(c->shorts[0] == (short)(2 * n) && c->shorts[3] == (short)n,
              "MPI_SHORT counters %d %d", c->shorts[0], c->shorts[3]);
    }
    free(fetched);
    CHECK_MPI(MPI_Type_free(&two_apart));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Part 2: rank 0 alone, on the last rank's memory. */
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
        TYPE_CASES(int8_t, MPI_INT8_T);
        TYPE_CASES(int16_t, MPI_INT16_T);
        TYPE_CASES(int32_t, MPI_INT32_T);
        TYPE_CASES(int64_t, MPI_INT64_T);
        TYPE_CASES(uint8_t, MPI_UINT8_T);
        TYPE_CASES(uint16_t, MPI_UINT16_T);
        TYPE_CASES(uint32_t, MPI_UINT32_T);
        TYPE_CASES(uint64_t, MPI_UINT64_T);
        TYPE_CASES(short, MPI_SHORT);
        TYPE_CASES(int, MPI_INT);
        TYPE_CASES(long, MPI_LONG);
        TYPE_CASES(long long, MPI_LONG_LONG);
        TYPE_CASES(unsigned, MPI_UNSIGNED);
        TYPE_CASES(unsigned long, MPI_UNSIGNED_LONG);
        TYPE_CASES(signed char, MPI_SIGNED_CHAR);
        TYPE_CASES(unsigned char, MPI_UNSIGNED_CHAR);
        CHECK_MPI(MPI_Win_unlock(t, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_free(&win));
    return test_end();
}
