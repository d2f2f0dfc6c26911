/*
 * long_double.c - reductions on C's long double, which Rust has no type for.
 *
 * The core cannot add or multiply an x87 80-bit (or, elsewhere, a binary128) long double itself;
 * the C compiler of the platform can, with the target's own rounding, so the Linux shim builds
 * this file and registers stormpi_long_double_op with the core (see docs/DESIGN.md).
 *
 * kind 0: long double; 1: long double _Complex; 2: {long double; int} pairs (MINLOC/MAXLOC),
 * each element `stride` bytes apart with its int at `index_at`.
 * op: 0 sum, 1 prod, 2 max, 3 min, 4 maxloc, 5 minloc.
 * Returns 0, 1 if the operation is not defined on the kind, 2 if `elem` is not sizeof(long
 * double) (the core and the compiler disagree on the type).
 */
#include <complex.h>
#include <stddef.h>
#include <string.h>

int stormpi_long_double_op(int op, int kind, unsigned char *inout, const unsigned char *in,
                           size_t n, size_t elem, size_t stride, size_t index_at)
{
    size_t i;
    if (elem != sizeof(long double))
        return 2;
    switch (kind) {
    case 0:
        if (op < 0 || op > 3)
            return 1;
        for (i = 0; i < n; i++) {
            long double a, b;
            memcpy(&a, in + i * stride, sizeof a);
            memcpy(&b, inout + i * stride, sizeof b);
            switch (op) {
            case 0: b = a + b; break;
            case 1: b = a * b; break;
            case 2: b = a > b ? a : b; break;
            default: b = a < b ? a : b; break;
            }
            memcpy(inout + i * stride, &b, sizeof b);
        }
        return 0;
    case 1:
        if (op < 0 || op > 1)
            return 1;
        for (i = 0; i < n; i++) {
            long double _Complex a, b;
            memcpy(&a, in + i * stride, sizeof a);
            memcpy(&b, inout + i * stride, sizeof b);
            b = op == 0 ? a + b : a * b;
            memcpy(inout + i * stride, &b, sizeof b);
        }
        return 0;
    case 2:
        if (op != 4 && op != 5)
            return 1;
        for (i = 0; i < n; i++) {
            long double a, b;
            int ia, ib;
            memcpy(&a, in + i * stride, sizeof a);
            memcpy(&b, inout + i * stride, sizeof b);
            memcpy(&ia, in + i * stride + index_at, sizeof ia);
            memcpy(&ib, inout + i * stride + index_at, sizeof ib);
            if (op == 4 ? a > b : a < b) {
                memcpy(inout + i * stride, &a, sizeof a);
                memcpy(inout + i * stride + index_at, &ia, sizeof ia);
            } else if (a == b && ia < ib) {
                memcpy(inout + i * stride + index_at, &ia, sizeof ia);
            }
        }
        return 0;
    default:
        return 1;
    }
}
