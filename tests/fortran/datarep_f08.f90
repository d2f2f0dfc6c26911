! User data representations with Fortran callbacks through mpi_f08: MPI_Register_datarep
! ('plus1', callbacks of MPI_Datarep_conversion_function's interface: every INTEGER stored plus
! one), MPI_Register_datarep_c ('plus2c', MPI_Datarep_conversion_function_c: an
! INTEGER(KIND=MPI_COUNT_KIND) count, plus two) and MPI_CONVERSION_FN_NULL / _C ('plain',
! 'plainc': native bytes). Each rank writes its block through a view in each representation,
! reads it back through the view, and reads the file's bytes through a native view (the
! conversions really ran, or for the null ones did not). The file's path is the first argument;
! each rank prints `fortran checks passed on rank R`, rank 0 then `OK datarep_f08`.
! The callbacks are external procedures after the program, sharing counters in a common block.

program datarep_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 5
  integer :: nread, nwrite, nextent, bad
  common /datarep_calls/ nread, nwrite, nextent, bad
  procedure(MPI_Datarep_conversion_function) :: plus1_read, plus1_write
  procedure(MPI_Datarep_conversion_function_c) :: plus2_read_c, plus2_write_c
  procedure(MPI_Datarep_extent_function) :: native_extent
  integer :: ierr, rank, nprocs, i, cls, calls
  type(MPI_File) :: fh
  type(MPI_Status) :: status
  integer :: buf(n), got(n)
  integer, allocatable :: whole(:)
  integer(kind=MPI_OFFSET_KIND) :: disp
  character(len=512) :: fname

  nread = 0
  nwrite = 0
  nextent = 0
  bad = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  call get_command_argument(1, fname)
  call expect(len_trim(fname) > 0, 'a file name argument')
  allocate(whole(n * nprocs))

  call MPI_Register_datarep('plus1', plus1_read, plus1_write, native_extent, &
                            7_MPI_ADDRESS_KIND, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_Register_datarep with Fortran callbacks')
  call MPI_Register_datarep_c('plus2c', plus2_read_c, plus2_write_c, native_extent, &
                              7_MPI_ADDRESS_KIND, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_Register_datarep_c with Fortran callbacks')
  ! No ierror: the default error handler is MPI_ERRORS_ARE_FATAL, so these must succeed.
  call MPI_Register_datarep('plain', MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, &
                            native_extent, 0_MPI_ADDRESS_KIND)
  call MPI_Register_datarep_c('plainc', MPI_CONVERSION_FN_NULL_C, MPI_CONVERSION_FN_NULL_C, &
                              native_extent, 0_MPI_ADDRESS_KIND, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_Register_datarep_c with MPI_CONVERSION_FN_NULL_C')
  call MPI_Register_datarep_c('plus1', plus2_read_c, plus2_write_c, native_extent, &
                              7_MPI_ADDRESS_KIND, ierr)
  call MPI_Error_class(ierr, cls)
  call expect(cls == MPI_ERR_DUP_DATAREP, 'a second plus1 is MPI_ERR_DUP_DATAREP')

  call MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh)
  call MPI_File_set_errhandler(fh, MPI_ERRORS_ARE_FATAL)
  disp = int(rank * n * 4, MPI_OFFSET_KIND)
  call round('plus1', 1, .true.)
  call round('plus2c', 2, .true.)
  call round('plain', 0, .false.)
  call round('plainc', 0, .false.)
  call expect(nextent > 0, 'the extent callback ran')
  call expect(bad == 0, 'the callbacks got MPI_INTEGER, a valid range and extra_state 7')
  call MPI_File_close(fh)
  call expect(fh == MPI_FILE_NULL, 'MPI_File_close')

  call MPI_Barrier(MPI_COMM_WORLD)
  print '(a,i0)', 'fortran checks passed on rank ', rank
  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    call MPI_File_delete(fname, MPI_INFO_NULL)
    print '(a)', 'OK datarep_f08'
  end if
  call MPI_Finalize()

contains

  ! Writes this rank's block through a view in `rep`, reads it back, and checks the file holds
  ! every value plus `add`; `converts` says whether the conversions must have run.
  subroutine round(rep, add, converts)
    character(len=*), intent(in) :: rep
    integer, intent(in) :: add
    logical, intent(in) :: converts
    integer :: r, before
    do i = 1, n
      buf(i) = rank * 1000 + i * 5 + len(rep)
    end do
    before = nread + nwrite
    call MPI_File_set_view(fh, disp, MPI_INTEGER, MPI_INTEGER, rep, MPI_INFO_NULL)
    call MPI_File_write_at_all(fh, 0_MPI_OFFSET_KIND, buf, n, MPI_INTEGER, status)
    call MPI_File_sync(fh)
    call MPI_Barrier(MPI_COMM_WORLD)
    call MPI_File_sync(fh)
    got = -1
    call MPI_File_read_at_all(fh, 0_MPI_OFFSET_KIND, got, n, MPI_INTEGER, status)
    call expect(all(got == buf), 'values read back through ' // rep)
    calls = nread + nwrite - before
    if (converts) then
      call expect(calls >= 2, 'the conversions of ' // rep // ' ran')
    else
      call expect(calls == 0, rep // ' calls no conversion')
    end if
    call MPI_File_set_view(fh, 0_MPI_OFFSET_KIND, MPI_INTEGER, MPI_INTEGER, 'native', &
                           MPI_INFO_NULL)
    call MPI_File_read_at_all(fh, 0_MPI_OFFSET_KIND, whole, n * nprocs, MPI_INTEGER, status)
    do r = 0, nprocs - 1
      do i = 1, n
        call expect(whole(r * n + i) == r * 1000 + i * 5 + len(rep) + add, &
                    'the file bytes of ' // rep)
      end do
    end do
    call MPI_Barrier(MPI_COMM_WORLD)
  end subroutine round

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a,i0,2a)', 'rank ', rank, ': FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
      stop 1
    end if
  end subroutine expect
end program datarep_f08

! USERBUF holds INTEGERs; the conversion starts at item POSITION of it. (The buffers' C_PTRs
! by reference here: the callers reach this through an implicit interface.)
subroutine convert(userbuf, datatype, count, filebuf, position, extra_state, add, write)
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  use mpi_f08
  implicit none
  integer :: nread, nwrite, nextent, bad
  common /datarep_calls/ nread, nwrite, nextent, bad
  integer, parameter :: n = 5
  type(c_ptr) :: userbuf, filebuf
  type(MPI_Datatype) :: datatype
  integer(kind=MPI_COUNT_KIND) :: count
  integer(kind=MPI_OFFSET_KIND) :: position
  integer(kind=MPI_ADDRESS_KIND) :: extra_state
  integer :: add
  logical :: write
  integer, pointer :: u(:), f(:)
  integer :: i, p
  if (datatype /= MPI_INTEGER .or. count < 1 .or. position < 0 .or. position + count > n &
      .or. extra_state /= 7) then
    bad = bad + 1
    return
  end if
  p = int(position)
  call c_f_pointer(userbuf, u, [n])
  call c_f_pointer(filebuf, f, [int(count)])
  do i = 1, int(count)
    if (write) then
      f(i) = u(p + i) + add
    else
      u(p + i) = f(i) - add
    end if
  end do
  if (write) then
    nwrite = nwrite + 1
  else
    nread = nread + 1
  end if
end subroutine convert

subroutine plus1_write(userbuf, datatype, count, filebuf, position, extra_state, ierror)
  use, intrinsic :: iso_c_binding, only: c_ptr
  use mpi_f08
  implicit none
  external :: convert
  type(c_ptr), value :: userbuf, filebuf
  type(MPI_Datatype) :: datatype
  integer :: count, ierror
  integer(kind=MPI_OFFSET_KIND) :: position
  integer(kind=MPI_ADDRESS_KIND) :: extra_state
  call convert(userbuf, datatype, int(count, MPI_COUNT_KIND), filebuf, position, &
               extra_state, 1, .true.)
  ierror = MPI_SUCCESS
end subroutine plus1_write

subroutine plus1_read(userbuf, datatype, count, filebuf, position, extra_state, ierror)
  use, intrinsic :: iso_c_binding, only: c_ptr
  use mpi_f08
  implicit none
  external :: convert
  type(c_ptr), value :: userbuf, filebuf
  type(MPI_Datatype) :: datatype
  integer :: count, ierror
  integer(kind=MPI_OFFSET_KIND) :: position
  integer(kind=MPI_ADDRESS_KIND) :: extra_state
  call convert(userbuf, datatype, int(count, MPI_COUNT_KIND), filebuf, position, &
               extra_state, 1, .false.)
  ierror = MPI_SUCCESS
end subroutine plus1_read

subroutine plus2_write_c(userbuf, datatype, count, filebuf, position, extra_state, ierror)
  use, intrinsic :: iso_c_binding, only: c_ptr
  use mpi_f08
  implicit none
  external :: convert
  type(c_ptr), value :: userbuf, filebuf
  type(MPI_Datatype) :: datatype
  integer(kind=MPI_COUNT_KIND) :: count
  integer :: ierror
  integer(kind=MPI_OFFSET_KIND) :: position
  integer(kind=MPI_ADDRESS_KIND) :: extra_state
  call convert(userbuf, datatype, count, filebuf, position, extra_state, 2, .true.)
  ierror = MPI_SUCCESS
end subroutine plus2_write_c

subroutine plus2_read_c(userbuf, datatype, count, filebuf, position, extra_state, ierror)
  use, intrinsic :: iso_c_binding, only: c_ptr
  use mpi_f08
  implicit none
  external :: convert
  type(c_ptr), value :: userbuf, filebuf
  type(MPI_Datatype) :: datatype
  integer(kind=MPI_COUNT_KIND) :: count
  integer :: ierror
  integer(kind=MPI_OFFSET_KIND) :: position
  integer(kind=MPI_ADDRESS_KIND) :: extra_state
  call convert(userbuf, datatype, count, filebuf, position, extra_state, 2, .false.)
  ierror = MPI_SUCCESS
end subroutine plus2_read_c

! The native layout: an item's extent is its size (MPI_Type_size from inside a callback).
subroutine native_extent(datatype, extent, extra_state, ierror)
  use mpi_f08
  implicit none
  integer :: nread, nwrite, nextent, bad
  common /datarep_calls/ nread, nwrite, nextent, bad
  type(MPI_Datatype) :: datatype
  integer(kind=MPI_ADDRESS_KIND) :: extent, extra_state
  integer :: ierror, size
  call MPI_Type_size(datatype, size, ierror)
  extent = size
  nextent = nextent + 1
end subroutine native_extent
