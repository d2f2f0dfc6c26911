/*
 * Prints one "NAME VALUE" line for every ABI fact of an mpi.h: constants, predefined handles,
 * sentinel pointers, sizes and signedness of the types, the layout of MPI_Status.
 *
 * tests/abi/check.sh builds this file once against stormpi's core/include/mpi.h and once against
 * MPICH's (mpicc.mpich) and requires identical output. It also turns the item list below into a
 * Rust program over core/src/capi/abi.rs (see abi_tool.py), so the list is parsed: keep one item
 * per line, in the form KIND(ARGS);
 *
 * Kinds:   I(constant)         integer constant or handle
 *          P(constant)         pointer constant, printed as an integer
 *          FN_NULL(constant)   function pointer constant that must be null
 *          SIZE(type)          sizeof
 *          ALIGN(type)         alignment
 *          SIGNED(type)        1 if the integer type is signed
 *          OFFSET(type, field) offsetof
 * C only (no Rust counterpart; printed with a "c:" prefix):
 *          C_FN(constant)      function pointer constant that must be a real function
 *          C_I(expression)     integer expression using function-like macros
 *          C_TYPE(type)        the C type behind an integer typedef
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

typedef void (*any_fn)(void);

static void print_int(const char *name, long long value) { printf("%s %lld\n", name, value); }

static void print_fn(const char *prefix, const char *name, any_fn fn)
{
    any_fn volatile f = fn;
    printf("%s%s %s\n", prefix, name, f ? "nonnull" : "null");
}

#define I(x)         print_int(#x, (long long)(x))
#define P(x)         print_int(#x, (long long)(intptr_t)(x))
#define FN_NULL(x)   print_fn("", #x, (any_fn)(x))
#define SIZE(t)      printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define ALIGN(t)     printf("alignof(%s) %zu\n", #t, _Alignof(t))
#define SIGNED(t)    printf("signed(%s) %d\n", #t, (t)-1 < (t)0)
#define OFFSET(t, f) printf("offsetof(%s,%s) %zu\n", #t, #f, offsetof(t, f))
#define C_FN(x)      print_fn("c:", #x, (any_fn)(x))
#define C_I(x)       printf("c:%s %lld\n", #x, (long long)(x))
#define C_TYPE(t)    printf("c:type(%s) %s\n", #t, c_type_name((t)0))

#define c_type_name(v) _Generic((v),                                                    \
    signed char: "signed char", short: "short", int: "int", long: "long",             \
    long long: "long long", unsigned char: "unsigned char", unsigned short: "unsigned short", \
    unsigned int: "unsigned int", unsigned long: "unsigned long",                     \
    unsigned long long: "unsigned long long", default: "other")

int main(void)
{
    /* Version */
    I(MPI_VERSION);
    I(MPI_SUBVERSION);

    /* Types */
    SIZE(MPI_Aint);
    SIZE(MPI_Offset);
    SIZE(MPI_Count);
    SIZE(MPI_Fint);
    SIGNED(MPI_Aint);
    SIGNED(MPI_Offset);
    SIGNED(MPI_Count);
    SIGNED(MPI_Fint);
    ALIGN(MPI_Aint);
    ALIGN(MPI_Offset);
    ALIGN(MPI_Count);
    C_TYPE(MPI_Aint);
    C_TYPE(MPI_Offset);
    C_TYPE(MPI_Count);
    C_TYPE(MPI_Fint);
    C_TYPE(MPI_Comm);
    C_TYPE(MPI_Group);
    C_TYPE(MPI_Datatype);
    C_TYPE(MPI_Op);
    C_TYPE(MPI_Errhandler);
    C_TYPE(MPI_Info);
    C_TYPE(MPI_Request);
    C_TYPE(MPI_Message);
    C_TYPE(MPI_Win);
    C_TYPE(MPI_Session);
    SIZE(MPI_Comm);
    SIZE(MPI_Group);
    SIZE(MPI_Datatype);
    SIZE(MPI_Op);
    SIZE(MPI_Errhandler);
    SIZE(MPI_Info);
    SIZE(MPI_Request);
    SIZE(MPI_Message);
    SIZE(MPI_Win);
    SIZE(MPI_Session);
    SIZE(MPI_File);
    SIZE(MPI_T_enum);
    SIZE(MPI_T_cvar_handle);
    SIZE(MPI_T_pvar_handle);
    SIZE(MPI_T_pvar_session);
    SIZE(MPI_T_event_registration);
    SIZE(MPI_T_event_instance);
    SIZE(MPI_T_cb_safety);
    SIZE(MPI_T_source_order);
    SIGNED(MPI_Comm);
    SIGNED(MPI_Datatype);

    /* Status */
    SIZE(MPI_Status);
    ALIGN(MPI_Status);
    OFFSET(MPI_Status, count_lo);
    OFFSET(MPI_Status, count_hi_and_cancelled);
    OFFSET(MPI_Status, MPI_SOURCE);
    OFFSET(MPI_Status, MPI_TAG);
    OFFSET(MPI_Status, MPI_ERROR);
    SIZE(MPI_F08_status);
    OFFSET(MPI_F08_status, count_lo);
    OFFSET(MPI_F08_status, count_hi_and_cancelled);
    OFFSET(MPI_F08_status, MPI_SOURCE);
    OFFSET(MPI_F08_status, MPI_TAG);
    OFFSET(MPI_F08_status, MPI_ERROR);
    I(MPI_F_STATUS_SIZE);
    I(MPI_F_SOURCE);
    I(MPI_F_TAG);
    I(MPI_F_ERROR);

    /* Null handles */
    I(MPI_COMM_NULL);
    I(MPI_GROUP_NULL);
    I(MPI_DATATYPE_NULL);
    I(MPI_ERRHANDLER_NULL);
    I(MPI_OP_NULL);
    I(MPI_INFO_NULL);
    I(MPI_WIN_NULL);
    I(MPI_REQUEST_NULL);
    I(MPI_MESSAGE_NULL);
    I(MPI_SESSION_NULL);
    P(MPI_FILE_NULL);
    P(MPI_T_ENUM_NULL);
    P(MPI_T_CVAR_HANDLE_NULL);
    P(MPI_T_PVAR_HANDLE_NULL);
    P(MPI_T_PVAR_SESSION_NULL);

    /* Predefined objects */
    I(MPI_COMM_WORLD);
    I(MPI_COMM_SELF);
    I(MPI_GROUP_EMPTY);
    I(MPI_MESSAGE_NO_PROC);
    I(MPI_INFO_ENV);
    I(MPI_ERRORS_ARE_FATAL);
    I(MPI_ERRORS_RETURN);
    I(MPI_ERRORS_ABORT);
    I(MPI_MAX);
    I(MPI_MIN);
    I(MPI_SUM);
    I(MPI_PROD);
    I(MPI_LAND);
    I(MPI_BAND);
    I(MPI_LOR);
    I(MPI_BOR);
    I(MPI_LXOR);
    I(MPI_BXOR);
    I(MPI_MINLOC);
    I(MPI_MAXLOC);
    I(MPI_REPLACE);
    I(MPI_NO_OP);

    /* Datatypes */
    I(MPI_CHAR);
    I(MPI_SIGNED_CHAR);
    I(MPI_UNSIGNED_CHAR);
    I(MPI_BYTE);
    I(MPI_WCHAR);
    I(MPI_SHORT);
    I(MPI_UNSIGNED_SHORT);
    I(MPI_INT);
    I(MPI_UNSIGNED);
    I(MPI_LONG);
    I(MPI_UNSIGNED_LONG);
    I(MPI_LONG_LONG_INT);
    I(MPI_LONG_LONG);
    I(MPI_UNSIGNED_LONG_LONG);
    I(MPI_FLOAT);
    I(MPI_DOUBLE);
    I(MPI_LONG_DOUBLE);
    I(MPI_PACKED);
    I(MPI_LB);
    I(MPI_UB);
    I(MPI_FLOAT_INT);
    I(MPI_DOUBLE_INT);
    I(MPI_LONG_INT);
    I(MPI_SHORT_INT);
    I(MPI_2INT);
    I(MPI_LONG_DOUBLE_INT);
    I(MPI_INTEGER);
    I(MPI_REAL);
    I(MPI_LOGICAL);
    I(MPI_COMPLEX);
    I(MPI_DOUBLE_PRECISION);
    I(MPI_2INTEGER);
    I(MPI_2REAL);
    I(MPI_DOUBLE_COMPLEX);
    I(MPI_2DOUBLE_PRECISION);
    I(MPI_CHARACTER);
    I(MPI_REAL4);
    I(MPI_REAL8);
    I(MPI_REAL16);
    I(MPI_COMPLEX8);
    I(MPI_COMPLEX16);
    I(MPI_COMPLEX32);
    I(MPI_INTEGER1);
    I(MPI_INTEGER2);
    I(MPI_INTEGER4);
    I(MPI_INTEGER8);
    I(MPI_INTEGER16);
    I(MPI_INT8_T);
    I(MPI_INT16_T);
    I(MPI_INT32_T);
    I(MPI_INT64_T);
    I(MPI_UINT8_T);
    I(MPI_UINT16_T);
    I(MPI_UINT32_T);
    I(MPI_UINT64_T);
    I(MPI_C_BOOL);
    I(MPI_C_FLOAT_COMPLEX);
    I(MPI_C_COMPLEX);
    I(MPI_C_DOUBLE_COMPLEX);
    I(MPI_C_LONG_DOUBLE_COMPLEX);
    I(MPI_AINT);
    I(MPI_OFFSET);
    I(MPI_COUNT);
    I(MPI_CXX_BOOL);
    I(MPI_CXX_FLOAT_COMPLEX);
    I(MPI_CXX_DOUBLE_COMPLEX);
    I(MPI_CXX_LONG_DOUBLE_COMPLEX);
    I(MPI_TYPECLASS_REAL);
    I(MPI_TYPECLASS_INTEGER);
    I(MPI_TYPECLASS_COMPLEX);
    I(MPI_COMBINER_NAMED);
    I(MPI_COMBINER_DUP);
    I(MPI_COMBINER_CONTIGUOUS);
    I(MPI_COMBINER_VECTOR);
    I(MPI_COMBINER_HVECTOR_INTEGER);
    I(MPI_COMBINER_HVECTOR);
    I(MPI_COMBINER_INDEXED);
    I(MPI_COMBINER_HINDEXED_INTEGER);
    I(MPI_COMBINER_HINDEXED);
    I(MPI_COMBINER_INDEXED_BLOCK);
    I(MPI_COMBINER_STRUCT_INTEGER);
    I(MPI_COMBINER_STRUCT);
    I(MPI_COMBINER_SUBARRAY);
    I(MPI_COMBINER_DARRAY);
    I(MPI_COMBINER_F90_REAL);
    I(MPI_COMBINER_F90_COMPLEX);
    I(MPI_COMBINER_F90_INTEGER);
    I(MPI_COMBINER_RESIZED);
    I(MPI_COMBINER_HINDEXED_BLOCK);
    I(MPI_ORDER_C);
    I(MPI_ORDER_FORTRAN);
    I(MPI_DISTRIBUTE_BLOCK);
    I(MPI_DISTRIBUTE_CYCLIC);
    I(MPI_DISTRIBUTE_NONE);
    I(MPI_DISTRIBUTE_DFLT_DARG);

    /* Special values */
    I(MPI_PROC_NULL);
    I(MPI_ANY_SOURCE);
    I(MPI_ROOT);
    I(MPI_ANY_TAG);
    I(MPI_UNDEFINED);
    P(MPI_BOTTOM);
    P(MPI_IN_PLACE);
    P(MPI_STATUS_IGNORE);
    P(MPI_STATUSES_IGNORE);
    P(MPI_ERRCODES_IGNORE);
    P(MPI_ARGV_NULL);
    P(MPI_ARGVS_NULL);
    I(MPI_BSEND_OVERHEAD);
    I(MPI_MAX_PROCESSOR_NAME);
    I(MPI_MAX_LIBRARY_VERSION_STRING);
    I(MPI_MAX_ERROR_STRING);
    I(MPI_MAX_PORT_NAME);
    I(MPI_MAX_OBJECT_NAME);
    I(MPI_MAX_INFO_KEY);
    I(MPI_MAX_INFO_VAL);
    I(MPI_MAX_DATAREP_STRING);
    I(MPI_MAX_STRINGTAG_LEN);
    I(MPI_MAX_PSET_NAME_LEN);
    I(MPI_IDENT);
    I(MPI_CONGRUENT);
    I(MPI_SIMILAR);
    I(MPI_UNEQUAL);
    I(MPI_THREAD_SINGLE);
    I(MPI_THREAD_FUNNELED);
    I(MPI_THREAD_SERIALIZED);
    I(MPI_THREAD_MULTIPLE);
    I(MPI_GRAPH);
    I(MPI_CART);
    I(MPI_DIST_GRAPH);
    I(MPI_COMM_TYPE_SHARED);
    I(MPI_COMM_TYPE_HW_GUIDED);
    I(MPI_COMM_TYPE_HW_UNGUIDED);

    /* Attributes */
    I(MPI_KEYVAL_INVALID);
    I(MPI_TAG_UB);
    I(MPI_HOST);
    I(MPI_IO);
    I(MPI_WTIME_IS_GLOBAL);
    I(MPI_UNIVERSE_SIZE);
    I(MPI_LASTUSEDCODE);
    I(MPI_APPNUM);
    I(MPI_WIN_BASE);
    I(MPI_WIN_SIZE);
    I(MPI_WIN_DISP_UNIT);
    I(MPI_WIN_CREATE_FLAVOR);
    I(MPI_WIN_MODEL);

    /* One-sided communication */
    I(MPI_WIN_FLAVOR_CREATE);
    I(MPI_WIN_FLAVOR_ALLOCATE);
    I(MPI_WIN_FLAVOR_DYNAMIC);
    I(MPI_WIN_FLAVOR_SHARED);
    I(MPI_WIN_SEPARATE);
    I(MPI_WIN_UNIFIED);
    I(MPI_LOCK_EXCLUSIVE);
    I(MPI_LOCK_SHARED);
    I(MPI_MODE_NOCHECK);
    I(MPI_MODE_NOSTORE);
    I(MPI_MODE_NOPUT);
    I(MPI_MODE_NOPRECEDE);
    I(MPI_MODE_NOSUCCEED);

    /* File I/O */
    I(MPI_MODE_CREATE);
    I(MPI_MODE_RDONLY);
    I(MPI_MODE_WRONLY);
    I(MPI_MODE_RDWR);
    I(MPI_MODE_DELETE_ON_CLOSE);
    I(MPI_MODE_UNIQUE_OPEN);
    I(MPI_MODE_EXCL);
    I(MPI_MODE_APPEND);
    I(MPI_MODE_SEQUENTIAL);
    I(MPI_SEEK_SET);
    I(MPI_SEEK_CUR);
    I(MPI_SEEK_END);
    I(MPI_DISPLACEMENT_CURRENT);

    /* Error classes */
    I(MPI_SUCCESS);
    I(MPI_ERR_BUFFER);
    I(MPI_ERR_COUNT);
    I(MPI_ERR_TYPE);
    I(MPI_ERR_TAG);
    I(MPI_ERR_COMM);
    I(MPI_ERR_RANK);
    I(MPI_ERR_ROOT);
    I(MPI_ERR_GROUP);
    I(MPI_ERR_OP);
    I(MPI_ERR_TOPOLOGY);
    I(MPI_ERR_DIMS);
    I(MPI_ERR_ARG);
    I(MPI_ERR_UNKNOWN);
    I(MPI_ERR_TRUNCATE);
    I(MPI_ERR_OTHER);
    I(MPI_ERR_INTERN);
    I(MPI_ERR_IN_STATUS);
    I(MPI_ERR_PENDING);
    I(MPI_ERR_REQUEST);
    I(MPI_ERR_ACCESS);
    I(MPI_ERR_AMODE);
    I(MPI_ERR_BAD_FILE);
    I(MPI_ERR_CONVERSION);
    I(MPI_ERR_DUP_DATAREP);
    I(MPI_ERR_FILE_EXISTS);
    I(MPI_ERR_FILE_IN_USE);
    I(MPI_ERR_FILE);
    I(MPI_ERR_INFO);
    I(MPI_ERR_INFO_KEY);
    I(MPI_ERR_INFO_VALUE);
    I(MPI_ERR_INFO_NOKEY);
    I(MPI_ERR_IO);
    I(MPI_ERR_NAME);
    I(MPI_ERR_NO_MEM);
    I(MPI_ERR_NOT_SAME);
    I(MPI_ERR_NO_SPACE);
    I(MPI_ERR_NO_SUCH_FILE);
    I(MPI_ERR_PORT);
    I(MPI_ERR_QUOTA);
    I(MPI_ERR_READ_ONLY);
    I(MPI_ERR_SERVICE);
    I(MPI_ERR_SPAWN);
    I(MPI_ERR_UNSUPPORTED_DATAREP);
    I(MPI_ERR_UNSUPPORTED_OPERATION);
    I(MPI_ERR_WIN);
    I(MPI_ERR_BASE);
    I(MPI_ERR_LOCKTYPE);
    I(MPI_ERR_KEYVAL);
    I(MPI_ERR_RMA_CONFLICT);
    I(MPI_ERR_RMA_SYNC);
    I(MPI_ERR_SIZE);
    I(MPI_ERR_DISP);
    I(MPI_ERR_ASSERT);
    I(MPI_ERR_RMA_RANGE);
    I(MPI_ERR_RMA_ATTACH);
    I(MPI_ERR_RMA_SHARED);
    I(MPI_ERR_RMA_FLAVOR);
    I(MPI_T_ERR_MEMORY);
    I(MPI_T_ERR_NOT_INITIALIZED);
    I(MPI_T_ERR_CANNOT_INIT);
    I(MPI_T_ERR_INVALID_INDEX);
    I(MPI_T_ERR_INVALID_ITEM);
    I(MPI_T_ERR_INVALID_HANDLE);
    I(MPI_T_ERR_OUT_OF_HANDLES);
    I(MPI_T_ERR_OUT_OF_SESSIONS);
    I(MPI_T_ERR_INVALID_SESSION);
    I(MPI_T_ERR_CVAR_SET_NOT_NOW);
    I(MPI_T_ERR_CVAR_SET_NEVER);
    I(MPI_T_ERR_PVAR_NO_STARTSTOP);
    I(MPI_T_ERR_PVAR_NO_WRITE);
    I(MPI_T_ERR_PVAR_NO_ATOMIC);
    I(MPI_T_ERR_INVALID_NAME);
    I(MPI_T_ERR_INVALID);
    I(MPI_ERR_SESSION);
    I(MPI_ERR_PROC_ABORTED);
    I(MPI_ERR_VALUE_TOO_LARGE);
    I(MPI_T_ERR_NOT_SUPPORTED);
    I(MPI_ERR_LASTCODE);

    /* Tool information interface */
    I(MPI_T_VERBOSITY_USER_BASIC);
    I(MPI_T_VERBOSITY_USER_DETAIL);
    I(MPI_T_VERBOSITY_USER_ALL);
    I(MPI_T_VERBOSITY_TUNER_BASIC);
    I(MPI_T_VERBOSITY_TUNER_DETAIL);
    I(MPI_T_VERBOSITY_TUNER_ALL);
    I(MPI_T_VERBOSITY_MPIDEV_BASIC);
    I(MPI_T_VERBOSITY_MPIDEV_DETAIL);
    I(MPI_T_VERBOSITY_MPIDEV_ALL);
    I(MPI_T_BIND_NO_OBJECT);
    I(MPI_T_BIND_MPI_COMM);
    I(MPI_T_BIND_MPI_DATATYPE);
    I(MPI_T_BIND_MPI_ERRHANDLER);
    I(MPI_T_BIND_MPI_FILE);
    I(MPI_T_BIND_MPI_GROUP);
    I(MPI_T_BIND_MPI_OP);
    I(MPI_T_BIND_MPI_REQUEST);
    I(MPI_T_BIND_MPI_WIN);
    I(MPI_T_BIND_MPI_MESSAGE);
    I(MPI_T_BIND_MPI_INFO);
    I(MPI_T_SCOPE_CONSTANT);
    I(MPI_T_SCOPE_READONLY);
    I(MPI_T_SCOPE_LOCAL);
    I(MPI_T_SCOPE_GROUP);
    I(MPI_T_SCOPE_GROUP_EQ);
    I(MPI_T_SCOPE_ALL);
    I(MPI_T_SCOPE_ALL_EQ);
    I(MPI_T_PVAR_CLASS_STATE);
    I(MPI_T_PVAR_CLASS_LEVEL);
    I(MPI_T_PVAR_CLASS_SIZE);
    I(MPI_T_PVAR_CLASS_PERCENTAGE);
    I(MPI_T_PVAR_CLASS_HIGHWATERMARK);
    I(MPI_T_PVAR_CLASS_LOWWATERMARK);
    I(MPI_T_PVAR_CLASS_COUNTER);
    I(MPI_T_PVAR_CLASS_AGGREGATE);
    I(MPI_T_PVAR_CLASS_TIMER);
    I(MPI_T_PVAR_CLASS_GENERIC);
    I(MPI_T_CB_REQUIRE_NONE);
    I(MPI_T_CB_REQUIRE_MPI_RESTRICTED);
    I(MPI_T_CB_REQUIRE_THREAD_SAFE);
    I(MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE);
    I(MPI_T_SOURCE_ORDERED);
    I(MPI_T_SOURCE_UNORDERED);

    /* Predefined callbacks */
    FN_NULL(MPI_NULL_COPY_FN);
    FN_NULL(MPI_NULL_DELETE_FN);
    FN_NULL(MPI_COMM_NULL_COPY_FN);
    FN_NULL(MPI_COMM_NULL_DELETE_FN);
    FN_NULL(MPI_TYPE_NULL_COPY_FN);
    FN_NULL(MPI_TYPE_NULL_DELETE_FN);
    FN_NULL(MPI_WIN_NULL_COPY_FN);
    FN_NULL(MPI_WIN_NULL_DELETE_FN);
    FN_NULL(MPI_CONVERSION_FN_NULL);
    FN_NULL(MPI_CONVERSION_FN_NULL_C);
    C_FN(MPI_DUP_FN);
    C_FN(MPI_COMM_DUP_FN);
    C_FN(MPI_TYPE_DUP_FN);
    C_FN(MPI_WIN_DUP_FN);

    /* Handle conversion macros */
    C_I(MPI_Comm_c2f(MPI_COMM_WORLD));
    C_I(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_SELF)));
    C_I(MPI_Type_c2f(MPI_DOUBLE));
    C_I(MPI_Type_f2c(MPI_Type_c2f(MPI_INT)));
    C_I(MPI_Group_c2f(MPI_GROUP_EMPTY));
    C_I(MPI_Group_f2c(MPI_Group_c2f(MPI_GROUP_NULL)));
    C_I(MPI_Info_c2f(MPI_INFO_ENV));
    C_I(MPI_Info_f2c(MPI_Info_c2f(MPI_INFO_NULL)));
    C_I(MPI_Request_c2f(MPI_REQUEST_NULL));
    C_I(MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)));
    C_I(MPI_Op_c2f(MPI_SUM));
    C_I(MPI_Op_f2c(MPI_Op_c2f(MPI_MAX)));
    C_I(MPI_Errhandler_c2f(MPI_ERRORS_RETURN));
    C_I(MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_ARE_FATAL)));
    C_I(MPI_Win_c2f(MPI_WIN_NULL));
    C_I(MPI_Win_f2c(MPI_Win_c2f(MPI_WIN_NULL)));
    C_I(MPI_Message_c2f(MPI_MESSAGE_NO_PROC));
    C_I(MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NULL)));
    C_I(MPI_Session_c2f(MPI_SESSION_NULL));
    C_I(MPI_Session_f2c(MPI_Session_c2f(MPI_SESSION_NULL)));
    C_I(PMPI_Comm_c2f(MPI_COMM_WORLD));
    C_I(PMPI_Comm_f2c(PMPI_Comm_c2f(MPI_COMM_SELF)));
    C_I(PMPI_Type_c2f(MPI_DOUBLE));
    C_I(PMPI_Type_f2c(PMPI_Type_c2f(MPI_INT)));
    C_I(PMPI_Group_c2f(MPI_GROUP_EMPTY));
    C_I(PMPI_Group_f2c(PMPI_Group_c2f(MPI_GROUP_NULL)));
    C_I(PMPI_Info_c2f(MPI_INFO_ENV));
    C_I(PMPI_Info_f2c(PMPI_Info_c2f(MPI_INFO_NULL)));
    C_I(PMPI_Request_c2f(MPI_REQUEST_NULL));
    C_I(PMPI_Request_f2c(PMPI_Request_c2f(MPI_REQUEST_NULL)));
    C_I(PMPI_Op_c2f(MPI_SUM));
    C_I(PMPI_Op_f2c(PMPI_Op_c2f(MPI_MAX)));
    C_I(PMPI_Errhandler_c2f(MPI_ERRORS_RETURN));
    C_I(PMPI_Errhandler_f2c(PMPI_Errhandler_c2f(MPI_ERRORS_ARE_FATAL)));
    C_I(PMPI_Win_c2f(MPI_WIN_NULL));
    C_I(PMPI_Win_f2c(PMPI_Win_c2f(MPI_WIN_NULL)));
    C_I(PMPI_Message_c2f(MPI_MESSAGE_NO_PROC));
    C_I(PMPI_Message_f2c(PMPI_Message_c2f(MPI_MESSAGE_NULL)));
    C_I(PMPI_Session_c2f(MPI_SESSION_NULL));
    C_I(PMPI_Session_f2c(PMPI_Session_c2f(MPI_SESSION_NULL)));

    return 0;
}
