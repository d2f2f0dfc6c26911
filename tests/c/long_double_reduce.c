/*
 * long_double_reduce.c - reductions on long double: MPI_LONG_DOUBLE, MPI_C_LONG_DOUBLE_COMPLEX
 * and MPI_LONG_DOUBLE_INT with MAXLOC/MINLOC.
 *
 * The values differ from each other only past a double's precision (1 + k * 2^-60), so a
 * reduction done in double, or on the wrong bytes, gives a different answer; every result is
 * exact in long double's 64-bit significand (x86_64) and compared for equality with the value
 * computed here. Checked: Allreduce SUM, PROD, MAX, MIN and Reduce SUM and Scan SUM on
 * MPI_LONG_DOUBLE (3 elements), Reduce_local; Allreduce SUM and PROD on
 * MPI_C_LONG_DOUBLE_COMPLEX (Gaussian integers, whose products stay exact); MAXLOC and MINLOC
 * on MPI_LONG_DOUBLE_INT with ties broken by the lower index.
 *
 * usage: long_double_reduce
 */
#include "stormtest.h"

#include <complex.h>
#include <float.h>
#include <math.h>

static long double tiny(void)
{
    return ldexpl(1.0L, -60);
}

int main(int argc, char **argv)
{
    int rank, size, r, i;
    long double in[3], out[3], want[3];
    long double _Complex cin[2], cout[2], cwant[2];
    struct {
        long double v;
        int i;
    } pin[2], pout[2];

    MPI_Init(&argc, &argv);
    test_begin("long_double_reduce");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (LDBL_MANT_DIG < 64) {
        if (rank == 0)
            printf("note: long double has %d significand bits here: skipped\n", LDBL_MANT_DIG);
        return test_end();
    }

    for (i = 0; i < 3; i++)
        in[i] = 1.0L + (long double)(rank + 1 + i) * tiny();
    /* SUM */
    for (i = 0; i < 3; i++) {
        want[i] = 0;
        for (r = 0; r < size; r++)
            want[i] += 1.0L + (long double)(r + 1 + i) * tiny();
    }
    CHECK_MPI(MPI_Allreduce(in, out, 3, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (i = 0; i < 3; i++)
        CHECK(out[i] == want[i], "Allreduce SUM [%d] = %.21Lg, expected %.21Lg", i, out[i],
              want[i]);
    memset(out, 0, sizeof out);
    CHECK_MPI(MPI_Reduce(in, out, 3, MPI_LONG_DOUBLE, MPI_SUM, size - 1, MPI_COMM_WORLD));
    if (rank == size - 1)
        for (i = 0; i < 3; i++)
            CHECK(out[i] == want[i], "Reduce SUM [%d] = %.21Lg, expected %.21Lg", i, out[i],
                  want[i]);
    CHECK_MPI(MPI_Scan(in, out, 3, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (i = 0; i < 3; i++) {
        long double s = 0;
        for (r = 0; r <= rank; r++)
            s += 1.0L + (long double)(r + 1 + i) * tiny();
        CHECK(out[i] == s, "Scan SUM [%d] = %.21Lg, expected %.21Lg", i, out[i], s);
    }
    /* PROD: (1 + a e)(1 + b e) = 1 + (a + b) e + a b e^2; e^2 = 2^-120 is below long double's
     * precision at 1, so use powers of two, which multiply exactly */
    for (i = 0; i < 3; i++)
        in[i] = ldexpl(1.0L + tiny(), rank % 4 + i);
    CHECK_MPI(MPI_Allreduce(in, out, 3, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD));
    for (i = 0; i < 3; i++) {
        long double p = 1;
        for (r = 0; r < size; r++)
            p *= ldexpl(1.0L + tiny(), r % 4 + i);
        CHECK(out[i] == p, "Allreduce PROD [%d] = %.21Lg, expected %.21Lg", i, out[i], p);
    }
    /* MAX and MIN: the extremes differ from the others by 2^-60 only */
    for (i = 0; i < 3; i++)
        in[i] = 1.0L + (long double)((rank * 7 + i) % size) * tiny();
    CHECK_MPI(MPI_Allreduce(in, out, 3, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    for (i = 0; i < 3; i++)
        CHECK(out[i] == 1.0L + (long double)(size - 1) * tiny(), "Allreduce MAX [%d] = %.21Lg",
              i, out[i]);
    CHECK_MPI(MPI_Allreduce(in, out, 3, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    for (i = 0; i < 3; i++)
        CHECK(out[i] == 1.0L, "Allreduce MIN [%d] = %.21Lg", i, out[i]);
    /* Reduce_local */
    in[0] = 1.0L;
    out[0] = tiny();
    CHECK_MPI(MPI_Reduce_local(in, out, 1, MPI_LONG_DOUBLE, MPI_SUM));
    CHECK(out[0] == 1.0L + tiny(), "Reduce_local SUM = %.21Lg", out[0]);

    /* complex: (r + 1) + i and 1 + tiny * i */
    cin[0] = (long double)(rank + 1) + 1.0L * I;
    cin[1] = 1.0L + (long double)(rank + 1) * tiny() * I;
    CHECK_MPI(MPI_Allreduce(cin, cout, 2, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
    cwant[0] = cwant[1] = 0;
    for (r = 0; r < size; r++) {
        cwant[0] += (long double)(r + 1) + 1.0L * I;
        cwant[1] += 1.0L + (long double)(r + 1) * tiny() * I;
    }
    for (i = 0; i < 2; i++)
        CHECK(cout[i] == cwant[i], "complex SUM [%d] = %.21Lg%+.21Lgi, expected %.21Lg%+.21Lgi",
              i, creall(cout[i]), cimagl(cout[i]), creall(cwant[i]), cimagl(cwant[i]));
    CHECK_MPI(MPI_Allreduce(cin, cout, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD));
    cwant[0] = 1;
    for (r = 0; r < size; r++)
        cwant[0] *= (long double)(r + 1) + 1.0L * I;
    CHECK(cout[0] == cwant[0], "complex PROD = %.21Lg%+.21Lgi, expected %.21Lg%+.21Lgi",
          creall(cout[0]), cimagl(cout[0]), creall(cwant[0]), cimagl(cwant[0]));

    /* MAXLOC / MINLOC: values 1 + (rank % 3) * tiny, so ties between ranks */
    for (i = 0; i < 2; i++) {
        pin[i].v = 1.0L + (long double)((rank + i) % 3) * tiny();
        pin[i].i = rank;
    }
    CHECK_MPI(MPI_Allreduce(pin, pout, 2, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    for (i = 0; i < 2; i++) {
        int best = -1;
        long double bv = 0;
        for (r = 0; r < size; r++) {
            long double v = 1.0L + (long double)((r + i) % 3) * tiny();
            if (best < 0 || v > bv) {
                best = r;
                bv = v;
            }
        }
        CHECK(pout[i].v == bv && pout[i].i == best, "MAXLOC [%d] = (%.21Lg, %d), expected (%.21Lg, %d)",
              i, pout[i].v, pout[i].i, bv, best);
    }
    CHECK_MPI(MPI_Allreduce(pin, pout, 2, MPI_LONG_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    for (i = 0; i < 2; i++) {
        int best = -1;
        long double bv = 0;
        for (r = 0; r < size; r++) {
            long double v = 1.0L + (long double)((r + i) % 3) * tiny();
            if (best < 0 || v < bv) {
                best = r;
                bv = v;
            }
        }
        CHECK(pout[i].v == bv && pout[i].i == best, "MINLOC [%d] = (%.21Lg, %d), expected (%.21Lg, %d)",
              i, pout[i].v, pout[i].i, bv, best);
    }
    return test_end();
}
