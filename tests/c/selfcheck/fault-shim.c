/*
 * fault-shim.c - a PMPI interposition library that breaks one MPI behaviour on purpose, to show
 * that the test programs in tests/c notice.  The fault is chosen with STORMTEST_FAULT=<name>:
 *
 *   recv_corrupt       MPI_Recv flips one byte in the middle of every message of >= 64 bytes
 *   sendrecv_corrupt   MPI_Sendrecv flips one byte of messages of >= 2 bytes
 *   replace_corrupt    MPI_Sendrecv_replace flips one byte of messages of >= 8 bytes
 *   ssend_is_send      MPI_Issend/MPI_Ssend behave like MPI_Isend/MPI_Send
 *   recv_tag           MPI_Recv reports status.MPI_TAG + 1
 *   get_count_off      MPI_Get_count reports one element more than arrived (when > 0)
 *   allreduce_off      MPI_Allreduce(MPI_SUM) result off by one in its last element on rank 1
 *   barrier_noop       MPI_Barrier returns at once
 *   truncate_ok        MPI_Recv / MPI_Wait turn MPI_ERR_TRUNCATE into MPI_SUCCESS
 *   errclass_other     MPI_Error_class says MPI_ERR_OTHER for every error
 *   dup_is_parent      MPI_Comm_dup hands back the parent communicator (MPI_Comm_free is a no-op)
 *   cancel_lies        MPI_Test_cancelled reports the opposite
 *   testany_true       MPI_Testany reports "all requests null" instead of "none completed"
 *   tag_ub_small       the MPI_TAG_UB attribute reads 100
 *   bsend_is_ssend     MPI_Bsend behaves like MPI_Ssend (never completes locally)
 *   abort_returns      MPI_Abort returns instead of ending the job
 *   waitall_tag        MPI_Waitall reports status.MPI_TAG + 1 for every request
 *   type_size_off      MPI_Type_size(MPI_DOUBLE) reports 9
 *   thread_serialized  MPI_Init_thread and MPI_Query_thread report at most MPI_THREAD_SERIALIZED
 *   every_thread_main  MPI_Is_thread_main reports true in every thread
 *   big_lock           one process-wide lock is held across every MPI call the threads_*
 *                      programs make, blocking ones included (a library that serialises its
 *                      callers and keeps the lock while it waits)
 *
 * Build: mpicc -shared -fPIC -pthread -o fault-shim.so fault-shim.c
 * Use:   mpiexec -n 2 env LD_PRELOAD=./fault-shim.so STORMTEST_FAULT=recv_corrupt ./ring
 */
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *fault(void)
{
    const char *f = getenv("STORMTEST_FAULT");
    return f ? f : "";
}

static int is(const char *name) { return strcmp(fault(), name) == 0; }

/* big_lock: a recursive mutex taken around a call (recursive in case the library calls its own
 * MPI_ entry points). */
static pthread_mutex_t big;
static pthread_once_t big_once = PTHREAD_ONCE_INIT;

static void big_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&big, &a);
}

static int lock_begin(void)
{
    if (!is("big_lock"))
        return 0;
    pthread_once(&big_once, big_init);
    pthread_mutex_lock(&big);
    return 1;
}

static void lock_end(int locked)
{
    if (locked)
        pthread_mutex_unlock(&big);
}

/* A call that big_lock wraps and nothing else changes. */
#define LOCKED(call)                                                                               \
    do {                                                                                           \
        int l_ = lock_begin(), rc_ = (call);                                                       \
        lock_end(l_);                                                                              \
        return rc_;                                                                                \
    } while (0)

static int type_size(MPI_Datatype t)
{
    int s = 0;
    PMPI_Type_size(t, &s);
    return s;
}

static void flip_middle(void *buf, long bytes)
{
    if (bytes > 0)
        ((unsigned char *)buf)[bytes / 2] ^= 0x40;
}

int MPI_Recv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    MPI_Status local;
    int rc, got = 0, l;
    if (st == MPI_STATUS_IGNORE)
        st = &local;
    l = lock_begin();
    rc = PMPI_Recv(buf, count, t, src, tag, comm, st);
    lock_end(l);
    if (is("truncate_ok") && rc != MPI_SUCCESS)
        return MPI_SUCCESS;
    if (rc == MPI_SUCCESS && st->MPI_SOURCE != MPI_PROC_NULL) {
        PMPI_Get_count(st, MPI_BYTE, &got);
        if (is("recv_corrupt") && got >= 64)
            flip_middle(buf, got);
        if (is("recv_tag"))
            st->MPI_TAG++;
    }
    return rc;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    int l = lock_begin(), rc = PMPI_Wait(req, st);
    lock_end(l);
    if (is("truncate_ok") && rc != MPI_SUCCESS)
        return MPI_SUCCESS;
    return rc;
}

int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype st_, int dst, int stag, void *rb, int rc_,
                 MPI_Datatype rt, int src, int rtag, MPI_Comm comm, MPI_Status *status)
{
    int l = lock_begin(),
        rc = PMPI_Sendrecv(sb, sc, st_, dst, stag, rb, rc_, rt, src, rtag, comm, status);
    lock_end(l);
    if (is("sendrecv_corrupt") && (long)rc_ * type_size(rt) >= 2 && src != MPI_PROC_NULL)
        flip_middle(rb, (long)rc_ * type_size(rt));
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype t, int dst, int stag, int src, int rtag,
                         MPI_Comm comm, MPI_Status *status)
{
    int rc = PMPI_Sendrecv_replace(buf, count, t, dst, stag, src, rtag, comm, status);
    if (is("replace_corrupt") && (long)count * type_size(t) >= 8 && src != MPI_PROC_NULL)
        flip_middle(buf, (long)count * type_size(t));
    return rc;
}

int MPI_Issend(const void *buf, int count, MPI_Datatype t, int dst, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    if (is("ssend_is_send"))
        return PMPI_Isend(buf, count, t, dst, tag, comm, req);
    return PMPI_Issend(buf, count, t, dst, tag, comm, req);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype t, int dst, int tag, MPI_Comm comm)
{
    if (is("ssend_is_send"))
        return PMPI_Send(buf, count, t, dst, tag, comm);
    return PMPI_Ssend(buf, count, t, dst, tag, comm);
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype t, int dst, int tag, MPI_Comm comm)
{
    if (is("bsend_is_ssend"))
        return PMPI_Ssend(buf, count, t, dst, tag, comm);
    return PMPI_Bsend(buf, count, t, dst, tag, comm);
}

int MPI_Get_count(const MPI_Status *st, MPI_Datatype t, int *count)
{
    int rc = PMPI_Get_count(st, t, count);
    if (is("get_count_off") && rc == MPI_SUCCESS && *count > 0)
        (*count)++;
    return rc;
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    int l = lock_begin(), rc = PMPI_Allreduce(sb, rb, count, t, op, comm), rank;
    lock_end(l);
    PMPI_Comm_rank(comm, &rank);
    if (is("allreduce_off") && rc == MPI_SUCCESS && op == MPI_SUM && t == MPI_INT && count > 0 &&
        rank == 1)
        ((int *)rb)[count - 1] += 1;
    return rc;
}

int MPI_Barrier(MPI_Comm comm)
{
    if (is("barrier_noop"))
        return MPI_SUCCESS;
    LOCKED(PMPI_Barrier(comm));
}

int MPI_Error_class(int code, int *cls)
{
    int rc = PMPI_Error_class(code, cls);
    if (is("errclass_other") && code != MPI_SUCCESS)
        *cls = MPI_ERR_OTHER;
    return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    if (is("dup_is_parent")) {
        *out = comm;
        return MPI_SUCCESS;
    }
    LOCKED(PMPI_Comm_dup(comm, out));
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (is("dup_is_parent")) {
        *comm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    LOCKED(PMPI_Comm_free(comm));
}

int MPI_Test_cancelled(const MPI_Status *st, int *flag)
{
    int rc = PMPI_Test_cancelled(st, flag);
    if (is("cancel_lies"))
        *flag = !*flag;
    return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
    int l = lock_begin(), rc = PMPI_Testany(n, reqs, index, flag, st);
    lock_end(l);
    if (is("testany_true") && !*flag) {
        *flag = 1;
        *index = MPI_UNDEFINED;
    }
    return rc;
}

int MPI_Comm_get_attr(MPI_Comm comm, int key, void *val, int *flag)
{
    static int small = 100;
    int rc = PMPI_Comm_get_attr(comm, key, val, flag);
    if (is("tag_ub_small") && key == MPI_TAG_UB && *flag)
        *(int **)val = &small;
    return rc;
}

int MPI_Abort(MPI_Comm comm, int code)
{
    if (is("abort_returns"))
        return MPI_SUCCESS;
    return PMPI_Abort(comm, code);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    int rc, i;
    if (!is("waitall_tag") || sts == MPI_STATUSES_IGNORE)
        LOCKED(PMPI_Waitall(n, reqs, sts));
    rc = PMPI_Waitall(n, reqs, sts);
    for (i = 0; i < n; i++)
        sts[i].MPI_TAG++;
    return rc;
}

int MPI_Type_size(MPI_Datatype t, int *size)
{
    int rc = PMPI_Type_size(t, size);
    if (is("type_size_off") && t == MPI_DOUBLE)
        *size = 9;
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (is("thread_serialized") && *provided > MPI_THREAD_SERIALIZED)
        *provided = MPI_THREAD_SERIALIZED;
    return rc;
}

int MPI_Query_thread(int *provided)
{
    int rc = PMPI_Query_thread(provided);
    if (is("thread_serialized") && *provided > MPI_THREAD_SERIALIZED)
        *provided = MPI_THREAD_SERIALIZED;
    return rc;
}

int MPI_Is_thread_main(int *flag)
{
    int rc = PMPI_Is_thread_main(flag);
    if (is("every_thread_main"))
        *flag = 1;
    return rc;
}

/* The other calls of the threads_* programs, for big_lock. */
int MPI_Send(const void *buf, int count, MPI_Datatype t, int dst, int tag, MPI_Comm comm)
{
    LOCKED(PMPI_Send(buf, count, t, dst, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dst, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    LOCKED(PMPI_Isend(buf, count, t, dst, tag, comm, req));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    LOCKED(PMPI_Irecv(buf, count, t, src, tag, comm, req));
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    LOCKED(PMPI_Test(req, flag, st));
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    LOCKED(PMPI_Testall(n, reqs, flag, sts));
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[])
{
    LOCKED(PMPI_Testsome(n, reqs, outcount, idx, sts));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
    LOCKED(PMPI_Bcast(buf, count, t, root, comm));
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                  MPI_Comm comm)
{
    LOCKED(PMPI_Allgather(sb, sc, st, rb, rc, rt, comm));
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                 MPI_Comm comm)
{
    LOCKED(PMPI_Alltoall(sb, sc, st, rb, rc, rt, comm));
}

int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm)
{
    LOCKED(PMPI_Reduce(sb, rb, count, t, op, root, comm));
}

int MPI_Iallreduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req)
{
    LOCKED(PMPI_Iallreduce(sb, rb, count, t, op, comm, req));
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
    LOCKED(PMPI_Comm_split(comm, color, key, out));
}

int MPI_Iprobe(int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st)
{
    LOCKED(PMPI_Iprobe(src, tag, comm, flag, st));
}

int MPI_Mprobe(int src, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *st)
{
    LOCKED(PMPI_Mprobe(src, tag, comm, msg, st));
}

int MPI_Improbe(int src, int tag, MPI_Comm comm, int *flag, MPI_Message *msg, MPI_Status *st)
{
    LOCKED(PMPI_Improbe(src, tag, comm, flag, msg, st));
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype t, MPI_Message *msg, MPI_Status *st)
{
    LOCKED(PMPI_Mrecv(buf, count, t, msg, st));
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype t, MPI_Message *msg, MPI_Request *req)
{
    LOCKED(PMPI_Imrecv(buf, count, t, msg, req));
}
