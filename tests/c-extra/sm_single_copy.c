/*
 * sm_single_copy.c - large messages between the ranks of one node, with the sm BTL's single
 * copy (process_vm_readv) allowed, forbidden from the start, or forbidden midway.
 *
 * Every ordered pair of ranks exchanges messages of 64 KiB .. 16 MiB (odd sizes too):
 * contiguous MPI_BYTE, a contiguous derived type, a strided vector sent and received into a
 * contiguous buffer, and contiguous bytes received into a strided vector (holes checked). Every
 * byte is checked. The MPI_T counters pml_reads / pml_rget_sent then say which path carried them:
 *
 *   read        single copy on: every large message with contiguous buffers on both sides was
 *               read by its receiver (pml_reads counts exactly those);
 *   ring        no single copy (btl_sm_single_copy=off): nothing was offered nor read;
 *   deny-before a seccomp filter makes process_vm_readv fail with EPERM before MPI_Init: the
 *               probe at start turns single copy off, nothing offered nor read;
 *   deny-after  the same filter installed after MPI_Init and a first exchange read by single
 *               copy: offers are made, the reads fail with EPERM and the messages come through
 *               the ring instead, none lost.
 */
#define _GNU_SOURCE
#include "../c/stormtest.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "no seccomp architecture for this machine"
#endif

/* process_vm_readv fails with EPERM from now on, in this process and its threads. */
static void deny_cma(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        exit(2);
    }
}

static const size_t sizes[] = {65536,   65537,   100000,  262144,   1048576 - 8,
                               1048576, 4194304, 9999991, 16777215, 16777216};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define SMAX ((size_t)16 << 20)

static MPI_T_pvar_session session;

/* A started handle of the counter `name` of `session`. */
static MPI_T_pvar_handle counter(const char *name)
{
    int idx = -1, count = 0;
    MPI_T_pvar_handle h;
    CHECK_MPI(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_MPI(MPI_T_pvar_handle_alloc(session, idx, NULL, &h, &count));
    CHECK(count == 1, "%s: count %d", name, count);
    return h;
}

static unsigned long long value(MPI_T_pvar_handle h)
{
    unsigned long long v[8] = {0};
    CHECK_MPI(MPI_T_pvar_read(session, h, v));
    return v[0];
}

/* Every rank sends `n` bytes of pattern to every other and receives theirs; type 0: bytes,
 * 1: a contiguous derived type of 8-byte elements (when n is a multiple of 8). */
static void exchange_contig(int rank, int np, size_t n, int seq, MPI_Datatype t8,
                            unsigned char *sbuf, unsigned char *rbuf)
{
    int peer, use8 = t8 != MPI_DATATYPE_NULL;
    MPI_Datatype t = use8 ? t8 : MPI_BYTE;
    int count = use8 ? (int)(n / 8) : (int)n;
    for (int d = 1; d < np; d++) {
        int to = (rank + d) % np, from = (rank - d + np) % np;
        MPI_Request rq[2];
        pattern_fill(sbuf, n, test_key(rank, to, n, seq));
        memset(rbuf, 0, n);
        CHECK_MPI(MPI_Irecv(rbuf, count, t, from, seq, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Isend(sbuf, count, t, to, seq, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        long bad = pattern_check(rbuf, n, test_key(from, rank, n, seq));
        peer = from;
        CHECK(bad < 0, "%zu bytes (type %d) from %d: byte %ld is %u, want %u", n, use8, peer, bad,
              rbuf[bad], pattern_byte(test_key(from, rank, n, seq), (size_t)bad));
    }
}

/* A vector of n/8 doubles at stride 2 sent into contiguous memory (strided = 0), or contiguous
 * bytes received into such a vector (strided = 1); holes must keep their fill. */
static void exchange_strided(int rank, int np, size_t n, int seq, int strided_recv,
                             unsigned char *sbuf, unsigned char *rbuf, unsigned char *tmp)
{
    int k = (int)(n / 8);
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(k, 1, 2, MPI_DOUBLE, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    for (int d = 1; d < np; d++) {
        int to = (rank + d) % np, from = (rank - d + np) % np;
        MPI_Request rq[2];
        uint64_t skey = test_key(rank, to, n, seq), rkey = test_key(from, rank, n, seq);
        if (!strided_recv) {
            /* Packed pattern spread at stride 16 in sbuf. */
            pattern_fill(tmp, (size_t)k * 8, skey);
            for (int i = 0; i < k; i++)
                memcpy(sbuf + 16 * (size_t)i, tmp + 8 * (size_t)i, 8);
            memset(rbuf, 0, (size_t)k * 8);
            CHECK_MPI(MPI_Irecv(rbuf, k, MPI_DOUBLE, from, seq, MPI_COMM_WORLD, &rq[0]));
            CHECK_MPI(MPI_Isend(sbuf, 1, vec, to, seq, MPI_COMM_WORLD, &rq[1]));
            CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            long bad = pattern_check(rbuf, (size_t)k * 8, rkey);
            CHECK(bad < 0, "strided send of %d doubles from %d: byte %ld wrong", k, from, bad);
        } else {
            pattern_fill(sbuf, (size_t)k * 8, skey);
            memset(rbuf, 0xA5, 16 * (size_t)k);
            CHECK_MPI(MPI_Irecv(rbuf, 1, vec, from, seq, MPI_COMM_WORLD, &rq[0]));
            CHECK_MPI(MPI_Isend(sbuf, k, MPI_DOUBLE, to, seq, MPI_COMM_WORLD, &rq[1]));
            CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            for (int i = 0; i < k; i++) {
                memcpy(tmp + 8 * (size_t)i, rbuf + 16 * (size_t)i, 8);
                for (int j = 8; j < 16; j++)
                    CHECK(rbuf[16 * (size_t)i + j] == 0xA5, "hole byte %d of element %d written",
                          j, i);
            }
            long bad = pattern_check(tmp, (size_t)k * 8, rkey);
            CHECK(bad < 0, "strided receive of %d doubles from %d: byte %ld wrong", k, from,
                  bad);
        }
    }
    CHECK_MPI(MPI_Type_free(&vec));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "read";
    int rank, np, provided, seq = 0;
    int read_mode = strcmp(mode, "read") == 0;
    int deny_before = strcmp(mode, "deny-before") == 0, deny_after = strcmp(mode, "deny-after") == 0;
    if (!read_mode && !deny_before && !deny_after && strcmp(mode, "ring") != 0) {
        fprintf(stderr, "usage: sm_single_copy [read|ring|deny-before|deny-after]\n");
        return 2;
    }
    if (deny_before)
        deny_cma();
    MPI_Init(&argc, &argv);
    test_begin("sm_single_copy");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    unsigned char *sbuf = test_malloc(2 * SMAX), *rbuf = test_malloc(2 * SMAX);
    unsigned char *tmp = test_malloc(SMAX);
    if (deny_after) {
        /* Peers have read each other's memory once before the kernel says no. */
        exchange_contig(rank, np, (size_t)1 << 20, seq++, MPI_DATATYPE_NULL, sbuf, rbuf);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        deny_cma();
        errno = 0;
        CHECK(syscall(__NR_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0) == -1 &&
                  errno == EPERM,
              "the seccomp filter does not refuse process_vm_readv");
    }
    CHECK_MPI(MPI_T_pvar_session_create(&session));
    MPI_T_pvar_handle hreads = counter("pml_reads"), hoffers = counter("pml_rget_sent");
    unsigned long long reads0 = value(hreads), offers0 = value(hoffers);

    MPI_Datatype t8;
    CHECK_MPI(MPI_Type_contiguous(1, MPI_UINT64_T, &t8));
    CHECK_MPI(MPI_Type_commit(&t8));
    unsigned long long contiguous = 0;
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = sizes[i];
        exchange_contig(rank, np, n, seq++, MPI_DATATYPE_NULL, sbuf, rbuf);
        contiguous += (unsigned long long)(np - 1);
        if (n % 8 == 0) {
            exchange_contig(rank, np, n, seq++, t8, sbuf, rbuf);
            contiguous += (unsigned long long)(np - 1);
        }
        if (n <= ((size_t)4 << 20)) {
            exchange_strided(rank, np, n, seq++, 0, sbuf, rbuf, tmp);
            exchange_strided(rank, np, n, seq++, 1, sbuf, rbuf, tmp);
        }
    }
    CHECK_MPI(MPI_Type_free(&t8));
    unsigned long long reads = value(hreads) - reads0;
    unsigned long long offers = value(hoffers) - offers0, all_offers = 0;
    CHECK_MPI(MPI_Allreduce(&offers, &all_offers, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM,
                            MPI_COMM_WORLD));
    if (read_mode) {
        CHECK(reads == contiguous, "%llu messages read by single copy, want %llu", reads,
              contiguous);
    } else {
        CHECK(reads == 0, "%llu messages read by single copy, want none (%s)", reads, mode);
        if (deny_after)
            CHECK(all_offers > 0, "no offer was made before the reads failed");
        else
            CHECK(all_offers == 0, "%llu offers made with single copy off (%s)", all_offers,
                  mode);
    }
    if (rank == 0)
        printf("sm_single_copy %s: rank 0 read %llu, %llu offers in all\n", mode, reads,
               all_offers);
    free(sbuf);
    free(rbuf);
    free(tmp);
    CHECK_MPI(MPI_T_pvar_handle_free(session, &hreads));
    CHECK_MPI(MPI_T_pvar_handle_free(session, &hoffers));
    CHECK_MPI(MPI_T_pvar_session_free(&session));
    MPI_T_finalize();
    return test_end();
}
