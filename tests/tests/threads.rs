//! The multi-threaded C programs of `tests/c` (`threads_*.c`, see its README), for
//! `MPI_THREAD_MULTIPLE`: each asks `MPI_Init_thread` for it and fails at once, naming the level
//! it got, if the library provides less; then 2 to 6 threads per rank call MPI at the same time.
//! Built with stormcc (`-pthread`), run under stormrun at 2 ranks and at 4 (oversubscribed on a
//! 2-core machine, 16 to 24 threads in all), with the harness's job timeout.

use stormpi_tests::{c_program, run_job};

fn check(name: &str, np: u32) {
    run_job(np, &[], &c_program(name), &[]).assert_ok(name);
}

macro_rules! thread_tests {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        mod $name {
            #[test]
            fn np2() {
                super::check(stringify!($name), 2);
            }
            #[test]
            fn np4() {
                super::check(stringify!($name), 4);
            }
        }
    )*};
}

thread_tests! {
    /// MPI_THREAD_MULTIPLE provided and queried from every thread; MPI_Is_thread_main true only
    /// in the thread that initialised; 4 threads exchange messages on MPI_COMM_WORLD by tag.
    threads_init,
    /// 4 threads per rank ping-pong with the same thread of the partner rank, each on its own
    /// communicator (10^5 messages in all, 0 B .. 200 KiB), then on MPI_COMM_WORLD by tag; every
    /// payload, status and guard byte checked.
    threads_pingpong,
    /// A thread blocked in MPI_Recv(MPI_ANY_SOURCE) while three others send and receive on the
    /// same communicator (other tags) and on another one (wildcards there too); its messages are
    /// only sent after all that traffic is done.
    threads_anysource,
    /// MPI_Comm_dup / MPI_Comm_split / MPI_Comm_free from 4 threads at once on their own parent
    /// communicators; the new ones work and are distinct.
    threads_comm,
    /// Collectives (Barrier, Bcast, Allreduce, Allgather, Alltoall, Reduce, Iallreduce) on 4
    /// communicators from 4 threads, entered in opposite thread orders on even and odd ranks.
    threads_coll,
    /// MPI_Wait in one thread while another completes its requests with MPI_Test/Testall/
    /// Testany/Testsome; a request completed by another thread's progress is seen by its owner.
    threads_waittest,
    /// MPI_Mprobe/MPI_Improbe + MPI_Mrecv/MPI_Imrecv from 3 threads on one communicator: every
    /// message received once, in order per sending thread.
    threads_probe,
    /// Partitioned communication: one thread per send partition fills it and calls MPI_Pready
    /// while threads poll MPI_Parrived for the receive partitions (partitioned differently);
    /// 50 rounds, every element checked.
    threads_partitioned,
}
