! The Fortran binding through the mpi module (explicit interfaces).
program with_module
  use mpi
  implicit none
  character(len=*), parameter :: test_name = 'with_module'
  include 'checks.inc'
end program with_module

include 'procs.inc'
