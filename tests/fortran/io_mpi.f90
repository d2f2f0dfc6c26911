! MPI-IO through the mpi module: each rank writes its blocks of an interleaved file through a
! view (a vector filetype, a displacement by rank), collectively; then the whole file is read
! back at an explicit offset without a view and checked value by value, the rank's own part
! through the view with the individual file pointer and nonblockingly; plus the handle, the
! strings and the errors of the Fortran binding (MPI_FILE_NULL, blank-padded datarep, IERROR,
! a file error handler written in Fortran).
! The file's path is the first argument; each rank prints `fortran checks passed on rank R`,
! rank 0 then `OK io_mpi`.
program io_mpi
  use mpi
  implicit none
  integer, parameter :: nb = 4, bl = 2, mine = nb * bl
  integer :: ierr, rank, nprocs, fh, ftype, etype, ftype2, amode, cls, count, i, p, owner, req
  integer :: group, cmp, fh2, eh, eh2, seen_file, seen_code
  integer :: status(MPI_STATUS_SIZE)
  integer :: buf(mine), got(mine)
  integer, allocatable :: whole(:)
  integer(kind=MPI_OFFSET_KIND) :: disp, disp2, size, pos
  character(len=512) :: fname
  character(len=MPI_MAX_DATAREP_STRING) :: datarep
  logical :: flag

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, fname)
  call expect(len_trim(fname) > 0, 'a file name argument')

  ! Opening a file that does not exist read-only fails through IERROR (files return errors).
  call MPI_FILE_OPEN(MPI_COMM_WORLD, trim(fname) // '.none', MPI_MODE_RDONLY, MPI_INFO_NULL, &
                     fh2, ierr)
  call MPI_ERROR_CLASS(ierr, cls, i)
  call expect(ierr /= MPI_SUCCESS .and. cls == MPI_ERR_NO_SUCH_FILE, 'MPI_ERR_NO_SUCH_FILE')

  call MPI_FILE_OPEN(MPI_COMM_WORLD, fname, MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, &
                     fh, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_FILE_OPEN')
  call expect(fh /= MPI_FILE_NULL, 'MPI_FILE_OPEN gives a handle')
  call MPI_FILE_GET_AMODE(fh, amode, ierr)
  call expect(amode == MPI_MODE_CREATE + MPI_MODE_RDWR, 'MPI_FILE_GET_AMODE')
  call MPI_FILE_GET_GROUP(fh, group, ierr)
  call MPI_GROUP_COMPARE(group, MPI_GROUP_EMPTY, cmp, ierr)
  call expect(cmp == MPI_UNEQUAL, 'MPI_FILE_GET_GROUP')
  call MPI_GROUP_SIZE(group, i, ierr)
  call expect(i == nprocs, 'the file group has every rank')
  call MPI_GROUP_FREE(group, ierr)
  call MPI_FILE_SET_SIZE(fh, 0_MPI_OFFSET_KIND, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_FILE_SET_SIZE')
  call MPI_FILE_SET_ATOMICITY(fh, .true., ierr)
  call MPI_FILE_GET_ATOMICITY(fh, flag, ierr)
  call expect(flag, 'MPI_FILE_GET_ATOMICITY after setting .TRUE.')
  call MPI_FILE_SET_ATOMICITY(fh, .false., ierr)
  call MPI_FILE_GET_ATOMICITY(fh, flag, ierr)
  call expect(.not. flag, 'MPI_FILE_GET_ATOMICITY after setting .FALSE.')

  ! A Fortran file error handler gets the INTEGER handle and the code.
  seen_file = MPI_FILE_NULL
  seen_code = MPI_SUCCESS
  call MPI_FILE_CREATE_ERRHANDLER(file_errors, eh, ierr)
  call MPI_FILE_SET_ERRHANDLER(fh, eh, ierr)
  call MPI_FILE_GET_ERRHANDLER(fh, eh2, ierr)
  call expect(ierr == MPI_SUCCESS .and. eh2 == eh, 'MPI_FILE_GET_ERRHANDLER')
  call MPI_ERRHANDLER_FREE(eh2, ierr)
  call MPI_FILE_CALL_ERRHANDLER(fh, MPI_ERR_ARG, ierr)
  call expect(seen_file == fh .and. seen_code == MPI_ERR_ARG, 'a Fortran file error handler')
  call MPI_FILE_SET_ERRHANDLER(fh, MPI_ERRORS_RETURN, ierr)
  call MPI_ERRHANDLER_FREE(eh, ierr)

  ! The view: blocks of bl integers every bl*nprocs, starting at this rank's block.
  call MPI_TYPE_VECTOR(nb, bl, bl * nprocs, MPI_INTEGER, ftype, ierr)
  call MPI_TYPE_COMMIT(ftype, ierr)
  disp = int(rank * bl * 4, MPI_OFFSET_KIND)
  call MPI_FILE_SET_VIEW(fh, disp, MPI_INTEGER, ftype, 'native', MPI_INFO_NULL, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_FILE_SET_VIEW')
  call MPI_FILE_GET_VIEW(fh, disp2, etype, ftype2, datarep, ierr)
  call expect(ierr == MPI_SUCCESS .and. disp2 == disp, 'MPI_FILE_GET_VIEW displacement')
  call expect(etype == MPI_INTEGER, 'MPI_FILE_GET_VIEW etype')
  call expect(datarep == 'native' .and. len_trim(datarep) == 6, 'MPI_FILE_GET_VIEW datarep')
  call expect(datarep(7:) == ' ', 'the datarep is blank-padded')
  call MPI_TYPE_FREE(ftype2, ierr)

  do i = 1, mine
    buf(i) = value_at(rank, i - 1)
  end do
  call MPI_FILE_WRITE_ALL(fh, buf, mine, MPI_INTEGER, status, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_FILE_WRITE_ALL')
  call MPI_GET_COUNT(status, MPI_INTEGER, count, ierr)
  call expect(count == mine, 'MPI_GET_COUNT of the write')
  call MPI_FILE_GET_POSITION(fh, pos, ierr)
  call expect(pos == mine, 'MPI_FILE_GET_POSITION after the write (in etypes)')
  call MPI_FILE_SYNC(fh, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FILE_SYNC(fh, ierr)
  call MPI_FILE_GET_SIZE(fh, size, ierr)
  call expect(size == int(mine * nprocs * 4, MPI_OFFSET_KIND), 'MPI_FILE_GET_SIZE')

  ! The whole file, without a view, at an explicit offset.
  allocate (whole(mine * nprocs))
  whole = -1
  call MPI_FILE_SET_VIEW(fh, 0_MPI_OFFSET_KIND, MPI_BYTE, MPI_BYTE, 'native', MPI_INFO_NULL, ierr)
  call MPI_FILE_READ_AT(fh, 0_MPI_OFFSET_KIND, whole, mine * nprocs, MPI_INTEGER, status, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_FILE_READ_AT')
  call MPI_GET_COUNT(status, MPI_INTEGER, count, ierr)
  call expect(count == mine * nprocs, 'MPI_GET_COUNT of the read')
  do p = 0, mine * nprocs - 1
    owner = mod(p / bl, nprocs)
    call expect(whole(p + 1) == value_at(owner, (p / (bl * nprocs)) * bl + mod(p, bl)), &
                'the file holds every rank''s blocks in place')
  end do

  ! This rank's part through the view again: the individual pointer, then nonblocking.
  call MPI_FILE_SET_VIEW(fh, disp, MPI_INTEGER, ftype, 'native', MPI_INFO_NULL, ierr)
  call MPI_FILE_SEEK(fh, 2_MPI_OFFSET_KIND, MPI_SEEK_SET, ierr)
  got = -1
  call MPI_FILE_READ(fh, got, mine - 2, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  call expect(ierr == MPI_SUCCESS .and. all(got(1:mine - 2) == buf(3:mine)), &
              'MPI_FILE_READ through the view from the 3rd etype')
  call MPI_FILE_GET_BYTE_OFFSET(fh, 2_MPI_OFFSET_KIND, disp2, ierr)
  call expect(disp2 == disp + int(bl * nprocs * 4, MPI_OFFSET_KIND), 'MPI_FILE_GET_BYTE_OFFSET')
  got = -1
  call MPI_FILE_IREAD_AT(fh, 0_MPI_OFFSET_KIND, got, mine, MPI_INTEGER, req, ierr)
  call MPI_WAIT(req, status, ierr)
  call expect(ierr == MPI_SUCCESS .and. all(got == buf), 'MPI_FILE_IREAD_AT and MPI_WAIT')
  call MPI_GET_COUNT(status, MPI_INTEGER, count, ierr)
  call expect(count == mine, 'the status of MPI_FILE_IREAD_AT')
  call MPI_TYPE_FREE(ftype, ierr)

  ! A read past the end returns what there is.
  call MPI_FILE_SET_VIEW(fh, 0_MPI_OFFSET_KIND, MPI_INTEGER, MPI_INTEGER, 'native', &
                         MPI_INFO_NULL, ierr)
  got = -1
  call MPI_FILE_READ_AT(fh, int(mine * nprocs - 1, MPI_OFFSET_KIND), got, 3, MPI_INTEGER, &
                        status, ierr)
  call MPI_GET_COUNT(status, MPI_INTEGER, count, ierr)
  call expect(ierr == MPI_SUCCESS .and. count == 1, 'a read at the end counts what it read')

  call MPI_FILE_CLOSE(fh, ierr)
  call expect(ierr == MPI_SUCCESS .and. fh == MPI_FILE_NULL, 'MPI_FILE_CLOSE sets MPI_FILE_NULL')
  call MPI_FILE_GET_SIZE(fh, size, ierr)
  call expect(ierr /= MPI_SUCCESS, 'MPI_FILE_NULL is not a file')
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call MPI_FILE_DELETE(fname, MPI_INFO_NULL, ierr)
    call expect(ierr == MPI_SUCCESS, 'MPI_FILE_DELETE')
  end if
  call MPI_FINALIZE(ierr)
  print '(a,i0,a,i0)', 'fortran checks passed on rank ', rank, ' of ', nprocs
  if (rank == 0) print '(a)', 'OK io_mpi'

contains

  subroutine file_errors(file, code)
    integer :: file, code
    seen_file = file
    seen_code = code
  end subroutine file_errors

  ! What rank r writes as its k-th integer (from 0).
  integer function value_at(r, k)
    integer, intent(in) :: r, k
    value_at = 1000 * (r + 1) + k
  end function value_at

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a,i0,2a)', 'rank ', rank, ': FAILED: ', what
      call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
      stop 1
    end if
  end subroutine expect
end program io_mpi
