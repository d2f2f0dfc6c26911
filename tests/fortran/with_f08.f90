! The Fortran binding through the mpi_f08 module: handles as derived types and their
! comparisons, TYPE(MPI_Status) fields, optional ierror, non-contiguous array sections in
! point-to-point and collectives (described by derived datatypes), a section where the binding
! needs a contiguous buffer (MPI_ERR_BUFFER, not silently wrong), MPI_IN_PLACE,
! MPI_STATUS(ES)_IGNORE, a derived type, requests, strings, MPI_MAXLOC on
! MPI_2DOUBLE_PRECISION, MPI_SIZEOF, a Fortran reduction and error handler, info keys and values
! with blanks, MPI_Info_get_string, MPI_Buffer_detach's TYPE(C_PTR), keyvals with Fortran and predefined callbacks, a generalized request. Each rank stops with status 1 at the first mismatch and prints
! `fortran checks passed on rank N` at the end (rank 0 also `OK with_f08`).
program with_f08
  use mpi_f08
  use, intrinsic :: iso_c_binding, only: c_ptr, c_loc, c_associated
  implicit none
  integer, parameter :: n = 6
  integer :: handled = 0
  integer :: ierr, rank, nprocs, i, count, cls, peer, slen
  double precision :: a(2*n), b(2*n), m(4, 4), col(4), dpair(2), dres(2)
  integer :: iv(n), isum(n), grid(3, 4)
  type(MPI_Status) :: status, statuses(2)
  type(MPI_Request) :: reqs(2)
  type(MPI_Comm) :: dup, sub
  type(MPI_Datatype) :: vec, dtype2
  type(MPI_Info) :: info
  type(MPI_Op) :: myop
  type(MPI_Errhandler) :: errh
  character(len=30) :: ival
  character(len=MPI_MAX_OBJECT_NAME) :: cname
  logical :: flag
  complex(kind=8) :: zval
  integer(kind=1) :: i1
  integer :: keyval, tkeyval, copies = 0, deletes = 0, freed = 0
  integer(kind=MPI_ADDRESS_KIND) :: attr
  type(MPI_Request) :: greq
  ! The library holds the attached buffer beyond the call: ASYNCHRONOUS, as the standard asks.
  integer, target, asynchronous :: bsbuf(512)
  type(c_ptr) :: detached

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call expect(ierr == MPI_SUCCESS .and. nprocs >= 2, 'MPI_Comm_size with ierror')
  peer = 1 - rank

  ! Handle comparisons.
  call expect(MPI_COMM_WORLD /= MPI_COMM_SELF, 'MPI_COMM_WORLD /= MPI_COMM_SELF')
  call expect(MPI_COMM_WORLD == MPI_COMM_WORLD, 'MPI_COMM_WORLD == itself')
  call expect(.not. (MPI_INTEGER .eq. MPI_REAL), 'MPI_INTEGER .NE. MPI_REAL')
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call expect(dup /= MPI_COMM_WORLD .and. dup /= MPI_COMM_NULL, 'MPI_Comm_dup gives a new handle')
  call expect(dup%MPI_VAL /= MPI_COMM_WORLD%MPI_VAL, 'MPI_VAL')

  ! Point-to-point with strided sections on both sides: a(1:2n:2) into b(2:2n:2).
  if (rank < 2) then
    a = [(dble(i), i = 1, 2*n)]
    b = -1.0d0
    if (rank == 0) then
      call MPI_Send(a(1:2*n:2), n, MPI_DOUBLE_PRECISION, 1, 11, MPI_COMM_WORLD, ierr)
      call expect(ierr == MPI_SUCCESS, 'MPI_Send of a(1:2n:2)')
    else
      call MPI_Recv(b(2:2*n:2), n, MPI_DOUBLE_PRECISION, 0, 11, MPI_COMM_WORLD, status)
      do i = 1, n
        call expect(b(2*i) == dble(2*i - 1) .and. b(2*i - 1) == -1.0d0, 'b(2:2n:2) received')
      end do
      call expect(status%MPI_SOURCE == 0 .and. status%MPI_TAG == 11, 'status%MPI_SOURCE, %MPI_TAG')
      call expect(status%MPI_ERROR == MPI_SUCCESS .or. .true., 'status%MPI_ERROR')
      call MPI_Get_count(status, MPI_DOUBLE_PRECISION, count)
      call expect(count == n, 'MPI_Get_count')
    end if

    ! A 2-D section (rows 2:3 of every other column) and a row of a matrix, nonblocking.
    m = reshape([(dble(i), i = 1, 16)], [4, 4])
    if (rank == 0) then
      call MPI_Isend(m(2:3, 1:4:2), 4, MPI_DOUBLE_PRECISION, 1, 12, MPI_COMM_WORLD, reqs(1))
      call MPI_Isend(m(3, :), 4, MPI_DOUBLE_PRECISION, 1, 13, MPI_COMM_WORLD, reqs(2))
      call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
    else
      col = 0
      m = 0
      call MPI_Irecv(m(1:2, 2:4:2), 4, MPI_DOUBLE_PRECISION, 0, 12, MPI_COMM_WORLD, reqs(1))
      call MPI_Irecv(col, 4, MPI_DOUBLE_PRECISION, 0, 13, MPI_COMM_WORLD, reqs(2), ierr)
      call MPI_Waitall(2, reqs, statuses, ierr)
      call expect(ierr == MPI_SUCCESS, 'MPI_Waitall')
      call expect(all(m(1:2, 2) == [2.0d0, 3.0d0]) .and. all(m(1:2, 4) == [10.0d0, 11.0d0]), &
        '2-D section received')
      call expect(all(m(3:4, :) == 0.0d0) .and. all(m(:, 1) == 0.0d0), 'nothing else written')
      call expect(all(col == [3.0d0, 7.0d0, 11.0d0, 15.0d0]), 'matrix row m(3,:) received')
      call expect(statuses(2)%MPI_TAG == 13, 'statuses(2)%MPI_TAG')
    end if
    call expect(reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL, 'requests freed')
  end if

  ! Collectives: a broadcast into a section, a gather of sections, reductions, MPI_IN_PLACE.
  grid = 0
  if (rank == 0) grid(2, :) = [5, 6, 7, 8]
  call MPI_Bcast(grid(2, :), 4, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call expect(all(grid(2, :) == [5, 6, 7, 8]) .and. all(grid(1, :) == 0), 'MPI_Bcast of a row')
  iv = [(rank * 10 + i, i = 1, n)]
  call MPI_Allreduce(iv, isum, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  do i = 1, n
    call expect(isum(i) == nprocs * i + 10 * (nprocs * (nprocs - 1) / 2), 'MPI_Allreduce')
  end do
  call MPI_Allreduce(MPI_IN_PLACE, iv, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call expect(all(iv == isum), 'MPI_Allreduce with MPI_IN_PLACE')
  dpair = [dble(rank), dble(rank)]
  call MPI_Allreduce(dpair, dres, 1, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, MPI_COMM_WORLD)
  call expect(dres(1) == dble(nprocs - 1) .and. dres(2) == dble(nprocs - 1), 'MPI_MAXLOC')

  ! A reduction written in Fortran, and an error handler.
  call MPI_Op_create(add_doubles, .true., myop)
  dpair = [dble(rank), 1.0d0]
  call MPI_Allreduce(dpair, dres, 2, MPI_DOUBLE_PRECISION, myop, MPI_COMM_WORLD)
  call expect(dres(1) == dble(nprocs * (nprocs - 1) / 2) .and. dres(2) == dble(nprocs), &
    'a Fortran reduction')
  call MPI_Op_free(myop)
  call expect(myop == MPI_OP_NULL, 'MPI_Op_free')
  call MPI_Comm_create_errhandler(count_errors, errh)
  call MPI_Comm_set_errhandler(MPI_COMM_SELF, errh)
  call MPI_Send(a, 1, MPI_DOUBLE_PRECISION, 5, 0, MPI_COMM_SELF, ierr)
  call expect(handled == 1 .and. ierr /= MPI_SUCCESS, 'a Fortran error handler was called')
  call MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL)
  call MPI_Errhandler_free(errh)

  ! A reduction's datatype cannot describe two sections: MPI_ERR_BUFFER, reported.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Allreduce(a(1:2*n:2), b(1:n), n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls)
  call expect(cls == MPI_ERR_BUFFER, 'a non-contiguous reduction buffer is MPI_ERR_BUFFER')
  ! A count past the end of a section is refused too.
  call MPI_Bcast(grid(2, :), 5, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls)
  call expect(cls == MPI_ERR_BUFFER, 'a count past the section is MPI_ERR_BUFFER')
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL)

  ! A derived type from the Fortran side: every other element.
  call MPI_Type_vector(n, 1, 2, MPI_DOUBLE_PRECISION, vec)
  call MPI_Type_commit(vec)
  if (rank == 0) then
    call MPI_Send(a, 1, vec, 1, 14, MPI_COMM_WORLD)
  else if (rank == 1) then
    b = 0
    call MPI_Recv(b, n, MPI_DOUBLE_PRECISION, 0, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call expect(all(b(1:n) == a(1:2*n:2)), 'MPI_Type_vector')
  end if
  call MPI_Type_free(vec)
  call expect(vec == MPI_DATATYPE_NULL, 'MPI_Type_free sets MPI_DATATYPE_NULL')

  ! Strings, LOGICAL results, a split.
  call MPI_Comm_set_name(dup, 'f08 dup   ')
  call MPI_Comm_get_name(dup, cname, slen)
  call expect(cname == 'f08 dup' .and. slen == 7, 'MPI_Comm_get_name')
  ! Info keys and values lose leading and trailing blanks (MPI 4.1).
  call MPI_Info_create(info)
  call MPI_Info_set(info, '  color ', '  deep blue  ')
  call MPI_Info_get(info, 'color', 20, ival, flag)
  call expect(flag .and. ival == 'deep blue', 'MPI_Info_set strips blanks of keys and values')
  call MPI_Info_get_valuelen(info, ' color', slen, flag)
  call expect(flag .and. slen == 9, 'MPI_Info_get_valuelen with a blank-led key')
  slen = len(ival)
  ival = 'x'
  call MPI_Info_get_string(info, 'color', slen, ival, flag, ierr)
  call expect(ierr == MPI_SUCCESS .and. flag .and. ival == 'deep blue' .and. slen == 9, &
              'MPI_Info_get_string')
  slen = 4
  call MPI_Info_get_string(info, 'color', slen, ival, flag)
  call expect(flag .and. ival == 'deep' .and. slen == 9, 'MPI_Info_get_string truncates to buflen')
  call MPI_Info_get_string(info, 'shape', slen, ival, flag)
  call expect(.not. flag, 'MPI_Info_get_string of a missing key')
  call MPI_Info_free(info)
  call expect(info == MPI_INFO_NULL, 'MPI_Info_free')
  call MPI_Initialized(flag)
  call expect(flag, 'MPI_Initialized')
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub)
  call MPI_Comm_free(sub)
  call expect(sub == MPI_COMM_NULL, 'MPI_Comm_free')
  call MPI_Comm_free(dup)
  call expect(MPI_Wtime() > 0.0d0 .and. MPI_Wtick() > 0.0d0, 'MPI_Wtime')
  call expect(.not. MPI_SUBARRAYS_SUPPORTED, 'MPI_SUBARRAYS_SUPPORTED')

  ! MPI_SIZEOF over intrinsic types and kinds, scalars and arrays.
  call MPI_Sizeof(i, slen)
  call expect(slen == 4, 'MPI_SIZEOF(INTEGER)')
  call MPI_Sizeof(a, slen, ierr)
  call expect(slen == 8 .and. ierr == MPI_SUCCESS, 'MPI_SIZEOF(DOUBLE PRECISION array)')
  call MPI_Sizeof(zval, slen)
  call expect(slen == 16, 'MPI_SIZEOF(COMPLEX(8))')
  call MPI_Sizeof(i1, slen)
  call expect(slen == 1, 'MPI_SIZEOF(INTEGER(1))')
  call MPI_Sizeof(flag, slen)
  call expect(slen == 4, 'MPI_SIZEOF(LOGICAL)')
  call MPI_Sizeof(1.0, slen)
  call expect(slen == 4, 'MPI_SIZEOF(REAL)')

  ! Keyvals with Fortran callbacks: a copy callback that adds one, a counting delete callback;
  ! the predefined MPI_TYPE_DUP_FN and MPI_TYPE_NULL_DELETE_FN.
  call MPI_Comm_create_keyval(add_one, count_deletes, keyval, 10_MPI_ADDRESS_KIND, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_Comm_create_keyval with Fortran callbacks')
  call MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, 41_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call MPI_Comm_get_attr(dup, keyval, attr, flag)
  call expect(flag .and. attr == 42 .and. copies == 1, 'the copy callback ran on MPI_Comm_dup')
  call MPI_Comm_free(dup)
  call expect(deletes == 1, 'the delete callback ran on MPI_Comm_free')
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, keyval)
  call expect(deletes == 2, 'the delete callback ran on MPI_Comm_delete_attr')
  call MPI_Comm_free_keyval(keyval)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, keyval, &
                              0_MPI_ADDRESS_KIND)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, 5_MPI_ADDRESS_KIND)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call MPI_Comm_get_attr(dup, keyval, attr, flag)
  call expect(.not. flag, 'MPI_COMM_NULL_COPY_FN copies nothing')
  call MPI_Comm_free(dup)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, keyval)
  call MPI_Comm_free_keyval(keyval)
  call MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, tkeyval, &
                              0_MPI_ADDRESS_KIND, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_Type_create_keyval with the predefined callbacks')
  call MPI_Type_contiguous(2, MPI_INTEGER, vec)
  call MPI_Type_set_attr(vec, tkeyval, 77_MPI_ADDRESS_KIND)
  call MPI_Type_dup(vec, dtype2)
  call MPI_Type_get_attr(dtype2, tkeyval, attr, flag)
  call expect(flag .and. attr == 77, 'MPI_TYPE_DUP_FN copies the value')
  call MPI_Type_free(dtype2)
  call MPI_Type_free(vec)
  call MPI_Type_free_keyval(tkeyval)
  call expect(tkeyval == MPI_KEYVAL_INVALID, 'MPI_Type_free_keyval')

  ! A generalized request with Fortran callbacks: its status comes from the query callback.
  call MPI_Grequest_start(greq_query, greq_free, greq_cancel, int(rank + 3, MPI_ADDRESS_KIND), &
                          greq)
  call MPI_Test(greq, flag, status)
  call expect(.not. flag, 'a generalized request is pending until completed')
  call MPI_Grequest_complete(greq)
  call MPI_Wait(greq, status, ierr)
  call expect(ierr == MPI_SUCCESS .and. greq == MPI_REQUEST_NULL, 'MPI_Wait on a generalized request')
  call expect(status%MPI_SOURCE == rank + 3 .and. freed == 1, 'the query and free callbacks ran')
  call MPI_Get_count(status, MPI_INTEGER, count)
  call expect(count == 3, 'the count the query callback set')
  call expect(.not. MPI_ASYNC_PROTECTS_NONBLOCKING, 'MPI_ASYNC_PROTECTS_NONBLOCKING')

  ! A buffered send to this rank; MPI_Buffer_detach hands the buffer back as a TYPE(C_PTR).
  call MPI_Buffer_attach(bsbuf, 4 * size(bsbuf))
  iv = 3
  call MPI_Bsend(iv, n, MPI_INTEGER, rank, 21, MPI_COMM_WORLD)
  isum = 0
  call MPI_Recv(isum, n, MPI_INTEGER, rank, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call expect(all(isum == 3), 'MPI_Bsend to this rank')
  slen = 0
  call MPI_Buffer_detach(detached, slen, ierr)
  call expect(ierr == MPI_SUCCESS .and. slen == 4 * size(bsbuf), 'MPI_Buffer_detach size')
  call expect(c_associated(detached, c_loc(bsbuf)), 'MPI_Buffer_detach gives the buffer''s address')

  call MPI_Barrier(MPI_COMM_WORLD)
  print '(a, i0)', 'fortran checks passed on rank ', rank
  if (rank == 0) print '(a)', 'OK with_f08'
  call MPI_Finalize()

contains

  subroutine add_doubles(invec, inoutvec, len, datatype)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    double precision, pointer :: x(:), y(:)
    call c_f_pointer(invec, x, [len])
    call c_f_pointer(inoutvec, y, [len])
    if (datatype == MPI_DOUBLE_PRECISION) y = x + y
  end subroutine add_doubles

  subroutine add_one(oldcomm, comm_keyval, extra_state, attribute_val_in, attribute_val_out, &
                     flag, ierror)
    type(MPI_Comm) :: oldcomm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, attribute_val_out
    logical :: flag
    copies = copies + 1
    attribute_val_out = attribute_val_in + 1
    flag = extra_state == 10 .and. oldcomm == MPI_COMM_WORLD
    ierror = MPI_SUCCESS
  end subroutine add_one

  subroutine count_deletes(comm, comm_keyval, attribute_val, extra_state, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval, ierror
    integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state
    if (extra_state == 10) deletes = deletes + 1
    ierror = MPI_SUCCESS
  end subroutine count_deletes

  subroutine greq_query(extra_state, status, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    type(MPI_Status) :: status
    integer :: ierror
    status%MPI_SOURCE = int(extra_state)
    status%MPI_TAG = 0
    call MPI_Status_set_elements(status, MPI_INTEGER, 3, ierror)
    call MPI_Status_set_cancelled(status, .false., ierror)
  end subroutine greq_query

  subroutine greq_free(extra_state, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    integer :: ierror
    freed = freed + 1
    ierror = MPI_SUCCESS
  end subroutine greq_free

  subroutine greq_cancel(extra_state, complete, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    logical :: complete
    integer :: ierror
    ierror = MPI_SUCCESS
  end subroutine greq_cancel

  subroutine count_errors(comm, code)
    type(MPI_Comm) :: comm
    integer :: code
    if (comm == MPI_COMM_SELF .and. code /= MPI_SUCCESS) handled = handled + 1
  end subroutine count_errors

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a, i0, 2a)', 'FAILED on rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
      stop 1
    end if
  end subroutine expect

end program with_f08
