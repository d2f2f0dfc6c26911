/*
 * nbc_polled.c - a window of non-blocking collectives on four communicators, completed by
 * every Wait and Test form, Test ones polled in loops.
 *
 * Checked: N operations (default 2000; Ibarrier, Ibcast, Iallreduce, Ireduce with a user
 * operation freed before completion, Igather into a duplicated type freed before completion,
 * Ialltoall, Iscan, and Isend/Irecv pairs) with up to 20 outstanding, on MPI_COMM_WORLD and
 * three duplicates chosen pseudo-randomly (the same at every rank); a slot is reused after its
 * operation is completed by one of Wait, Waitall, Waitany, Waitsome, or loops of Test, Testall,
 * Testany, Testsome; each result is checked when it completes. With more ranks than cores a
 * polling loop that never lets go of the core starves the peers it waits for: run at 10 ranks
 * with 20000 operations this took minutes (the conformance suite's "hang"), seconds now.
 *
 * usage: nbc_polled [N]
 */
#include "stormtest.h"

#define WIN 20
#define C 8

static int rank, size;

typedef struct {
    int kind, salt, root;
    int *a, *b;
    MPI_Comm comm;
} slot;

static void sum_fn(void *in, void *io, int *len, MPI_Datatype *t)
{
    int i;
    (void)t;
    for (i = 0; i < *len; i++)
        ((int *)io)[i] += ((int *)in)[i];
}

static int v(int r, int k, int salt)
{
    return (r * 31 + k * 7 + salt) % 1009;
}

static void verify(const slot *s)
{
    int i, j, want;
    switch (s->kind) {
    case 1: /* Ibcast */
        for (i = 0; i < C; i++)
            CHECK(s->a[i] == v(s->root, i, s->salt), "Ibcast [%d] = %d", i, s->a[i]);
        break;
    case 2: /* Iallreduce */
    case 3: /* Ireduce, user op */
        if (s->kind == 3 && rank != s->root)
            break;
        for (i = 0; i < C; i++) {
            want = 0;
            for (j = 0; j < size; j++)
                want += v(j, i, s->salt);
            CHECK(s->b[i] == want, "%s [%d] = %d, expected %d",
                  s->kind == 2 ? "Iallreduce" : "Ireduce", i, s->b[i], want);
        }
        break;
    case 4: /* Igather */
        if (rank == s->root)
            for (j = 0; j < size; j++)
                for (i = 0; i < C; i++)
                    CHECK(s->b[j * C + i] == v(j, i, s->salt), "Igather block %d [%d] = %d", j,
                          i, s->b[j * C + i]);
        break;
    case 5: /* Ialltoall: block j of rank r is v(r, j * C + i) */
        for (j = 0; j < size; j++)
            for (i = 0; i < C; i++)
                CHECK(s->b[j * C + i] == v(j, rank * C + i, s->salt), "Ialltoall block %d [%d]",
                      j, i);
        break;
    case 6: /* Iscan */
        for (i = 0; i < C; i++) {
            want = 0;
            for (j = 0; j <= rank; j++)
                want += v(j, i, s->salt);
            CHECK(s->b[i] == want, "Iscan [%d] = %d, expected %d", i, s->b[i], want);
        }
        break;
    case 7: /* Irecv from the left neighbour */
        for (i = 0; i < C; i++)
            CHECK(s->b[i] == v((rank + size - 1) % size, i, s->salt), "Irecv [%d] = %d", i,
                  s->b[i]);
        break;
    default:
        break;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000, it, i, k;
    unsigned x = 12345u;
    MPI_Comm comms[4];
    MPI_Request reqs[2 * WIN];
    slot slots[WIN];

    MPI_Init(&argc, &argv);
    test_begin("nbc_polled");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    comms[0] = MPI_COMM_WORLD;
    for (i = 1; i < 4; i++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]));
    for (i = 0; i < WIN; i++) {
        slots[i].kind = 0;
        slots[i].a = test_malloc((size_t)size * C * sizeof(int));
        slots[i].b = test_malloc((size_t)size * C * sizeof(int));
    }
    for (i = 0; i < 2 * WIN; i++)
        reqs[i] = MPI_REQUEST_NULL;

    for (it = 0; it <= n; it++) {
        int s = it % WIN;
        x = x * 1103515245u + 12345u;
        /* complete slot s (its send half at s + WIN, for the point-to-point pairs) */
        if (reqs[s] != MPI_REQUEST_NULL || reqs[s + WIN] != MPI_REQUEST_NULL) {
            int m = (int)((x >> 20) % 8), idx, flag, outc, ids[2 * WIN];
            while (reqs[s] != MPI_REQUEST_NULL || reqs[s + WIN] != MPI_REQUEST_NULL) {
                switch (m) {
                case 0:
                    CHECK_MPI(MPI_Wait(&reqs[s], MPI_STATUS_IGNORE));
                    CHECK_MPI(MPI_Wait(&reqs[s + WIN], MPI_STATUS_IGNORE));
                    break;
                case 1:
                    CHECK_MPI(MPI_Waitall(2 * WIN, reqs, MPI_STATUSES_IGNORE));
                    break;
                case 2:
                    CHECK_MPI(MPI_Waitany(2 * WIN, reqs, &idx, MPI_STATUS_IGNORE));
                    break;
                case 3:
                    CHECK_MPI(MPI_Waitsome(2 * WIN, reqs, &outc, ids, MPI_STATUSES_IGNORE));
                    break;
                case 4:
                    CHECK_MPI(MPI_Test(&reqs[s], &flag, MPI_STATUS_IGNORE));
                    CHECK_MPI(MPI_Test(&reqs[s + WIN], &flag, MPI_STATUS_IGNORE));
                    break;
                case 5:
                    CHECK_MPI(MPI_Testall(2 * WIN, reqs, &flag, MPI_STATUSES_IGNORE));
                    break;
                case 6:
                    CHECK_MPI(MPI_Testany(2 * WIN, reqs, &idx, &flag, MPI_STATUS_IGNORE));
                    break;
                default:
                    CHECK_MPI(MPI_Testsome(2 * WIN, reqs, &outc, ids, MPI_STATUSES_IGNORE));
                    break;
                }
            }
        }
        /* every slot completed so far may be checked (Waitall and friends complete others) */
        for (k = 0; k < WIN; k++)
            if (slots[k].kind != 0 && reqs[k] == MPI_REQUEST_NULL &&
                reqs[k + WIN] == MPI_REQUEST_NULL) {
                verify(&slots[k]);
                slots[k].kind = 0;
            }
        if (it == n)
            break;
        {
            slot *sl = &slots[s];
            MPI_Comm c = comms[(x >> 4) % 4];
            int kind = (int)((x >> 8) % 8), *a = sl->a, *b = sl->b;
            sl->kind = kind;
            sl->salt = it % 500;
            sl->root = (int)((x >> 12) % (unsigned)size);
            sl->comm = c;
            for (i = 0; i < size * C; i++) {
                a[i] = v(rank, i, sl->salt);
                b[i] = -1;
            }
            switch (kind) {
            case 0:
                CHECK_MPI(MPI_Ibarrier(c, &reqs[s]));
                break;
            case 1:
                if (rank != sl->root)
                    for (i = 0; i < C; i++)
                        a[i] = -1;
                CHECK_MPI(MPI_Ibcast(a, C, MPI_INT, sl->root, c, &reqs[s]));
                break;
            case 2:
                CHECK_MPI(MPI_Iallreduce(a, b, C, MPI_INT, MPI_SUM, c, &reqs[s]));
                break;
            case 3: {
                MPI_Op op;
                CHECK_MPI(MPI_Op_create(sum_fn, 1, &op));
                CHECK_MPI(MPI_Ireduce(a, b, C, MPI_INT, op, sl->root, c, &reqs[s]));
                CHECK_MPI(MPI_Op_free(&op));
                break;
            }
            case 4: {
                MPI_Datatype t;
                CHECK_MPI(MPI_Type_dup(MPI_INT, &t));
                CHECK_MPI(MPI_Igather(a, C, MPI_INT, b, C, t, sl->root, c, &reqs[s]));
                CHECK_MPI(MPI_Type_free(&t));
                break;
            }
            case 5:
                CHECK_MPI(MPI_Ialltoall(a, C, MPI_INT, b, C, MPI_INT, c, &reqs[s]));
                break;
            case 6:
                CHECK_MPI(MPI_Iscan(a, b, C, MPI_INT, MPI_SUM, c, &reqs[s]));
                break;
            default:
                CHECK_MPI(MPI_Irecv(b, C, MPI_INT, (rank + size - 1) % size, 5, c, &reqs[s]));
                CHECK_MPI(MPI_Isend(a, C, MPI_INT, (rank + 1) % size, 5, c, &reqs[s + WIN]));
                break;
            }
        }
    }
    CHECK_MPI(MPI_Waitall(2 * WIN, reqs, MPI_STATUSES_IGNORE));
    for (i = 0; i < WIN; i++) {
        if (slots[i].kind != 0)
            verify(&slots[i]);
        free(slots[i].a);
        free(slots[i].b);
    }
    for (i = 1; i < 4; i++)
        CHECK_MPI(MPI_Comm_free(&comms[i]));
    return test_end();
}
