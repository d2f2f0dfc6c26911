! User data representations with Fortran callbacks through mpif.h (datarep.inc).
program datarep_mpif
  implicit none
  include 'mpif.h'
  character(len=*), parameter :: test_name = 'datarep_mpif'
  include 'datarep.inc'
end program datarep_mpif

include 'datarep_cb.inc'
