/*
 * heat2d.c - steady-state heat diffusion on a square plate, solved with Jacobi iteration.
 *
 * The plate is an N x N grid of interior points with fixed temperatures on its edge: the left
 * edge is held at 1.0, the top edge at 0.5, the other two at 0.0.  Each Jacobi sweep replaces
 * every interior value by the mean of its four neighbours.  The grid is split into blocks over
 * the ranks (a 2-D process grid by default, or 1-D row strips with -d 1); each sweep begins with
 * a halo exchange (MPI_Isend / MPI_Irecv / MPI_Waitall with the up-to-four neighbours), and
 * every k sweeps the largest change of any point (the residual) is combined with
 * MPI_Allreduce(MPI_MAX).  The run stops when the residual drops below the tolerance or after
 * the maximum number of sweeps.
 *
 * Each point is updated with the same arithmetic in the same order whatever the decomposition,
 * so the field, the residual and the iteration count are identical for every rank count; only
 * the floating-point checksum (the sum of all values, summed per rank and then across ranks)
 * can differ in the last bits.  The fixed-point checksum (values rounded to multiples of 2^-32,
 * summed as integers) is exactly reproducible.
 *
 * usage: heat2d [-n N] [-i max_iterations] [-t tolerance] [-k check_every] [-d 1|2]
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_UP 1   /* data travelling to the rank above */
#define TAG_DOWN 2 /* ... below */
#define TAG_LEFT 3
#define TAG_RIGHT 4

static int rank, size;

static void die(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "heat2d: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* Temperature held on the edge of the plate at global row gi, column gj (0 or N+1). */
static double edge_value(int gi, int gj, int n)
{
    if (gj == 0)
        return 1.0; /* left edge */
    if (gi == 0)
        return 0.5; /* top edge */
    (void)n;
    return 0.0; /* right and bottom edges */
}

/* Split n items into parts pieces; piece p gets [*lo, *hi). */
static void split(int n, int parts, int p, int *lo, int *hi)
{
    *lo = (int)((long)n * p / parts);
    *hi = (int)((long)n * (p + 1) / parts);
}

int main(int argc, char **argv)
{
    int n = 1024, max_iter = 1000, check_every = 10, dims = 2;
    double tol = 1e-6;
    int px, py, cx, cy, r0, r1, c0, c1, nr, nc, i, j, a, iter, converged = 0;
    int up, down, left, right;
    double *u, *unew, *tmp, *sendl, *sendr, *recvl, *recvr;
    double residual = INFINITY, t0, t1, local_sum = 0.0, sum = 0.0;
    long long local_fix = 0, fix = 0;
    MPI_Request req[8];
    MPI_Status st[8];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    for (a = 1; a < argc; a++) {
        if (a + 1 < argc && strcmp(argv[a], "-n") == 0)
            n = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "-i") == 0)
            max_iter = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "-t") == 0)
            tol = atof(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "-k") == 0)
            check_every = atoi(argv[++a]);
        else if (a + 1 < argc && strcmp(argv[a], "-d") == 0)
            dims = atoi(argv[++a]);
        else
            die("usage: heat2d [-n N] [-i max_iterations] [-t tolerance] [-k check_every] [-d 1|2]");
    }
    if (n < 1 || max_iter < 0 || check_every < 1 || (dims != 1 && dims != 2))
        die("bad arguments");

    /* process grid: px columns x py rows of blocks, as square as the rank count allows */
    px = 1;
    if (dims == 2)
        for (i = 1; i * i <= size; i++)
            if (size % i == 0)
                px = i;
    py = size / px;
    if (py > n || px > n)
        die("more blocks than grid rows or columns");
    cx = rank % px;
    cy = rank / px;
    split(n, py, cy, &r0, &r1); /* my global interior rows r0+1 .. r1 */
    split(n, px, cx, &c0, &c1);
    nr = r1 - r0;
    nc = c1 - c0;
    up = cy > 0 ? rank - px : MPI_PROC_NULL;
    down = cy < py - 1 ? rank + px : MPI_PROC_NULL;
    left = cx > 0 ? rank - 1 : MPI_PROC_NULL;
    right = cx < px - 1 ? rank + 1 : MPI_PROC_NULL;

#define AT(arr, li, lj) (arr)[(size_t)(li) * (size_t)(nc + 2) + (size_t)(lj)]
    u = calloc((size_t)(nr + 2) * (size_t)(nc + 2), sizeof *u);
    unew = calloc((size_t)(nr + 2) * (size_t)(nc + 2), sizeof *unew);
    sendl = malloc(sizeof(double) * (size_t)nr);
    sendr = malloc(sizeof(double) * (size_t)nr);
    recvl = malloc(sizeof(double) * (size_t)nr);
    recvr = malloc(sizeof(double) * (size_t)nr);
    if (!u || !unew || !sendl || !sendr || !recvl || !recvr)
        die("out of memory");

    /* fixed edge values in the halo cells that lie on the plate's edge */
    for (i = 0; i <= nr + 1; i++)
        for (j = 0; j <= nc + 1; j++) {
            int gi = r0 + i, gj = c0 + j;
            if (gi == 0 || gi == n + 1 || gj == 0 || gj == n + 1)
                AT(u, i, j) = AT(unew, i, j) = edge_value(gi, gj, n);
        }

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (iter = 0; iter < max_iter;) {
        int check;
        double local_res = 0.0;

        /* halo exchange */
        MPI_Irecv(&AT(u, 0, 1), nc, MPI_DOUBLE, up, TAG_DOWN, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(&AT(u, nr + 1, 1), nc, MPI_DOUBLE, down, TAG_UP, MPI_COMM_WORLD, &req[1]);
        MPI_Irecv(recvl, nr, MPI_DOUBLE, left, TAG_RIGHT, MPI_COMM_WORLD, &req[2]);
        MPI_Irecv(recvr, nr, MPI_DOUBLE, right, TAG_LEFT, MPI_COMM_WORLD, &req[3]);
        for (i = 0; i < nr; i++) {
            sendl[i] = AT(u, i + 1, 1);
            sendr[i] = AT(u, i + 1, nc);
        }
        MPI_Isend(&AT(u, 1, 1), nc, MPI_DOUBLE, up, TAG_UP, MPI_COMM_WORLD, &req[4]);
        MPI_Isend(&AT(u, nr, 1), nc, MPI_DOUBLE, down, TAG_DOWN, MPI_COMM_WORLD, &req[5]);
        MPI_Isend(sendl, nr, MPI_DOUBLE, left, TAG_LEFT, MPI_COMM_WORLD, &req[6]);
        MPI_Isend(sendr, nr, MPI_DOUBLE, right, TAG_RIGHT, MPI_COMM_WORLD, &req[7]);
        MPI_Waitall(8, req, st);
        if (left != MPI_PROC_NULL)
            for (i = 0; i < nr; i++)
                AT(u, i + 1, 0) = recvl[i];
        if (right != MPI_PROC_NULL)
            for (i = 0; i < nr; i++)
                AT(u, i + 1, nc + 1) = recvr[i];

        /* Jacobi sweep */
        iter++;
        check = (iter % check_every == 0) || iter == max_iter;
        for (i = 1; i <= nr; i++) {
            const double *above = &AT(u, i - 1, 0), *row = &AT(u, i, 0), *below = &AT(u, i + 1, 0);
            double *out = &AT(unew, i, 0);
            for (j = 1; j <= nc; j++)
                out[j] = 0.25 * (above[j] + below[j] + row[j - 1] + row[j + 1]);
            if (check)
                for (j = 1; j <= nc; j++) {
                    double d = fabs(out[j] - row[j]);
                    if (d > local_res)
                        local_res = d;
                }
        }
        tmp = u;
        u = unew;
        unew = tmp;

        if (check) {
            MPI_Allreduce(&local_res, &residual, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (residual < tol) {
                converged = 1;
                break;
            }
        }
    }
    t1 = MPI_Wtime();

    for (i = 1; i <= nr; i++)
        for (j = 1; j <= nc; j++) {
            local_sum += AT(u, i, j);
            local_fix += (long long)llround(ldexp(AT(u, i, j), 32));
        }
    MPI_Allreduce(&local_sum, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&local_fix, &fix, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("heat2d: grid %d x %d, %d ranks as %d x %d blocks\n", n, n, size, px, py);
        printf("iterations: %d (%s, tolerance %g, residual checked every %d)\n", iter,
               converged ? "converged" : "stopped at the maximum", tol, check_every);
        printf("residual: %.6e\n", residual);
        printf("checksum: %.15e\n", sum);
        printf("checksum (fixed-point): %lld\n", fix);
        printf("time: %.3f s (%.1f M point-updates/s)\n", t1 - t0,
               (double)n * n * iter / (t1 - t0) / 1e6);
    }

    free(u);
    free(unew);
    free(sendl);
    free(sendr);
    free(recvl);
    free(recvr);
    MPI_Finalize();
    return 0;
}
