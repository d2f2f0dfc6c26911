/*
 * attrs_info.c - info objects, attribute caching with copy/delete callbacks, object names, user
 * error handlers and error codes, MPI_Alloc_mem.
 *
 * Info: set/get/get_valuelen/get_string (size query and truncation)/nkeys/nthkey/delete/dup/free;
 * MPI_ERR_INFO_KEY for a key longer than MPI_MAX_INFO_KEY, MPI_ERR_INFO_VALUE for a value longer
 * than MPI_MAX_INFO_VAL, MPI_ERR_INFO_NOKEY for deleting a missing key, MPI_ERR_INFO for
 * MPI_INFO_NULL; MPI_INFO_ENV readable (every key has a value), Info_create_env; Comm_set_info,
 * Comm_get_info, Comm_dup_with_info (the new communicator works).
 *
 * Attributes: a communicator keyval whose copy callback makes a new value (value + 1) and whose
 * delete callback counts: Comm_dup copies (once per attribute), set over an existing value and
 * delete_attr and Comm_free run the delete callback; MPI_COMM_NULL_COPY_FN does not copy,
 * MPI_COMM_DUP_FN copies the value; a freed keyval's attribute still gets its delete callback;
 * a copy callback that fails makes Comm_dup fail; a delete callback that fails makes
 * Comm_delete_attr fail and the attribute stays. Datatype keyvals across Type_dup/Type_free.
 * The deprecated Keyval_create/Attr_put/Attr_get/Attr_delete/Keyval_free. Predefined attributes
 * (MPI_TAG_UB) still readable, and cannot be set or deleted. Window keyvals create and free.
 * MPI_COMM_SELF's attributes are deleted at the start of MPI_Finalize, latest set first, while
 * MPI_Finalized still says false.
 *
 * Names: MPI_COMM_WORLD / MPI_COMM_SELF by default, set/get, a dup's name is empty;
 * Type_set_name/Type_get_name; predefined type names.
 *
 * Error handlers: a user handler on a communicator is called by MPI_Send to an invalid rank with
 * that communicator and an MPI_ERR_RANK code, which MPI_Send then returns; a dup inherits the
 * handler; the handler keeps working after its handle is freed; Comm_call_errhandler; the
 * deprecated Errhandler_create/set/get; Add_error_class/code/string with Error_class,
 * Error_string and MPI_LASTUSEDCODE.
 *
 * MPI_Alloc_mem / MPI_Free_mem: 1 MiB written and freed, size 0, with an info object.
 */
#include "stormtest.h"

static int failures;

#define EXPECT_CLASS(call, want)                                                            \
    do {                                                                                    \
        int rc_ = (call), cls_ = -1;                                                        \
        if (rc_ != MPI_SUCCESS)                                                             \
            MPI_Error_class(rc_, &cls_);                                                    \
        if (rc_ == MPI_SUCCESS || cls_ != (want)) {                                         \
            fprintf(stderr, "FAIL attrs_info: rank %d: %s returned %d (class %d), expected " \
                    "class %s (%d) (%s:%d)\n", stormtest_rank, #call, rc_, cls_, #want,     \
                    (want), __FILE__, __LINE__);                                            \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

/* Whether the library's version string starts with prefix (for documented reference quirks). */
static int lib_is(const char *prefix)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strncmp(v, prefix, strlen(prefix)) == 0;
}

/* ---- info ---------------------------------------------------------------------------------- */

static void test_info(int size)
{
    MPI_Info info, dup, env;
    char value[MPI_MAX_INFO_VAL + 1], key[MPI_MAX_INFO_KEY + 1];
    char longkey[MPI_MAX_INFO_KEY + 2], *longval;
    int flag, len, nkeys, i, buflen;

    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "alpha", "1"));
    CHECK_MPI(MPI_Info_set(info, "beta", "two"));
    CHECK_MPI(MPI_Info_set(info, "gamma", "three three"));
    CHECK_MPI(MPI_Info_set(info, "alpha", "one"));
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 3, "nkeys %d, expected 3", nkeys);
    {
        int seen = 0;
        for (i = 0; i < nkeys; i++) {
            CHECK_MPI(MPI_Info_get_nthkey(info, i, key));
            if (!strcmp(key, "alpha")) seen |= 1;
            if (!strcmp(key, "beta")) seen |= 2;
            if (!strcmp(key, "gamma")) seen |= 4;
        }
        CHECK(seen == 7, "nthkey did not give alpha, beta and gamma (seen %d)", seen);
    }
    CHECK_MPI(MPI_Info_get(info, "alpha", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && !strcmp(value, "one"), "alpha = '%s' (flag %d), expected 'one'", value, flag);
    if (lib_is("MPICH")) {
        /* MPICH 4.0 fails MPI_Info_get with "Value is too long" instead of truncating. */
        if (stormtest_rank == 0)
            printf("note: MPICH: MPI_Info_get truncation not checked\n");
    } else {
        CHECK_MPI(MPI_Info_get(info, "gamma", 5, value, &flag));
        CHECK(flag && !strcmp(value, "three"), "gamma cut to 5 = '%s'", value);
    }
    CHECK_MPI(MPI_Info_get(info, "delta", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(!flag, "a missing key was found");
    CHECK_MPI(MPI_Info_get_valuelen(info, "gamma", &len, &flag));
    CHECK(flag && len == 11, "valuelen of gamma %d (flag %d), expected 11", len, flag);
    CHECK_MPI(MPI_Info_get_valuelen(info, "delta", &len, &flag));
    CHECK(!flag, "valuelen of a missing key: flag set");
    buflen = 0;
    strcpy(value, "unchanged");
    CHECK_MPI(MPI_Info_get_string(info, "gamma", &buflen, value, &flag));
    CHECK(flag && buflen == 12 && !strcmp(value, "unchanged"),
          "get_string size query: buflen %d (flag %d), expected 12; value '%s'", buflen, flag,
          value);
    buflen = 6;
    CHECK_MPI(MPI_Info_get_string(info, "gamma", &buflen, value, &flag));
    CHECK(flag && buflen == 12 && !strcmp(value, "three"),
          "get_string into 6 bytes: '%s' buflen %d", value, buflen);

    CHECK_MPI(MPI_Info_dup(info, &dup));
    CHECK_MPI(MPI_Info_set(dup, "beta", "changed"));
    CHECK_MPI(MPI_Info_get(info, "beta", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && !strcmp(value, "two"), "setting the dup changed the original: '%s'", value);
    CHECK_MPI(MPI_Info_delete(info, "beta"));
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 2, "nkeys after delete %d", nkeys);
    CHECK_MPI(MPI_Info_get(dup, "beta", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && !strcmp(value, "changed"), "deleting in the original changed the dup");
    EXPECT_CLASS(MPI_Info_delete(info, "beta"), MPI_ERR_INFO_NOKEY);

    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = 0;
    EXPECT_CLASS(MPI_Info_set(info, longkey, "v"), MPI_ERR_INFO_KEY);
    longval = test_malloc(MPI_MAX_INFO_VAL + 2);
    memset(longval, 'v', MPI_MAX_INFO_VAL + 1);
    longval[MPI_MAX_INFO_VAL + 1] = 0;
    EXPECT_CLASS(MPI_Info_set(info, "k", longval), MPI_ERR_INFO_VALUE);
    free(longval);
    {
        /* The standard names no class for MPI_INFO_NULL: MPICH says MPI_ERR_ARG. */
        int rc = MPI_Info_get_nkeys(MPI_INFO_NULL, &nkeys), cls = -1;
        if (rc != MPI_SUCCESS)
            MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_INFO || cls == MPI_ERR_ARG,
              "Info_get_nkeys(MPI_INFO_NULL) returned %d of class %d", rc, cls);
    }

    CHECK_MPI(MPI_Info_free(&dup));
    CHECK(dup == MPI_INFO_NULL, "Info_free did not set MPI_INFO_NULL");
    CHECK_MPI(MPI_Info_free(&info));

    /* MPI_INFO_ENV: whatever keys it has, each has a value. */
    CHECK_MPI(MPI_Info_get_nkeys(MPI_INFO_ENV, &nkeys));
    for (i = 0; i < nkeys; i++) {
        CHECK_MPI(MPI_Info_get_nthkey(MPI_INFO_ENV, i, key));
        CHECK_MPI(MPI_Info_get(MPI_INFO_ENV, key, MPI_MAX_INFO_VAL, value, &flag));
        CHECK(flag, "MPI_INFO_ENV key '%s' has no value", key);
    }
    CHECK_MPI(MPI_Info_get(MPI_INFO_ENV, "maxprocs", MPI_MAX_INFO_VAL, value, &flag));
    if (flag)
        CHECK(atoi(value) == size, "MPI_INFO_ENV maxprocs '%s', size %d", value, size);
    CHECK_MPI(MPI_Info_create_env(0, NULL, &env));
    CHECK_MPI(MPI_Info_get_nkeys(env, &i));
    CHECK(i >= nkeys, "Info_create_env has %d keys, MPI_INFO_ENV %d", i, nkeys);
    CHECK_MPI(MPI_Info_free(&env));
}

static void test_comm_info(int rank, int size)
{
    MPI_Info info, used;
    MPI_Comm c;
    int nkeys, sum = 0;

    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == size * (size - 1) / 2, "Allreduce on the dup_with_info gave %d", sum);
    CHECK_MPI(MPI_Comm_get_info(c, &used));
    CHECK(used != MPI_INFO_NULL, "Comm_get_info gave MPI_INFO_NULL");
    CHECK_MPI(MPI_Info_get_nkeys(used, &nkeys));
    CHECK(nkeys >= 0, "nkeys %d", nkeys);
    CHECK_MPI(MPI_Info_free(&used));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_exact_length", "false"));
    CHECK_MPI(MPI_Comm_set_info(c, info));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Comm_get_info(c, &used));
    CHECK_MPI(MPI_Info_free(&used));
    CHECK_MPI(MPI_Comm_dup_with_info(c, MPI_INFO_NULL, &c));
    CHECK_MPI(MPI_Barrier(c));
    CHECK_MPI(MPI_Comm_free(&c));
}

/* ---- attributes ---------------------------------------------------------------------------- */

static int copies, deletes, deleted_value_sum, fail_copy, fail_delete;
static int self_order[4], self_deleted, finalized_in_delete;

static int copy_plus_one(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag)
{
    int *v;
    (void)old;
    (void)keyval;
    CHECK(extra == (void *)&copies, "copy callback: wrong extra_state");
    copies++;
    if (fail_copy) {
        *flag = 0;
        return MPI_ERR_OTHER;
    }
    v = test_malloc(sizeof *v);
    *v = *(int *)in + 1;
    *(void **)out = v;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_counted(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    CHECK(extra == (void *)&copies, "delete callback: wrong extra_state");
    if (fail_delete)
        return MPI_ERR_OTHER;
    deletes++;
    deleted_value_sum += *(int *)value;
    free(value);
    return MPI_SUCCESS;
}

static int *boxed(int v)
{
    int *p = test_malloc(sizeof *p);
    *p = v;
    return p;
}

static int plain_deletes;
static int delete_plain(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)value;
    (void)extra;
    plain_deletes++;
    return MPI_SUCCESS;
}

static int delete_self(MPI_Comm comm, int keyval, void *value, void *extra)
{
    int fin = 1;
    (void)keyval;
    (void)extra;
    if (comm != MPI_COMM_SELF)
        return MPI_ERR_OTHER;
    MPI_Finalized(&fin);
    if (fin)
        finalized_in_delete = 1;
    if (self_deleted < 4)
        self_order[self_deleted] = (int)(size_t)value;
    self_deleted++;
    return MPI_SUCCESS;
}

static void test_comm_attrs(void)
{
    int key, nullkey, dupkey, flag, tag_ub_ok, *v;
    void *got;
    MPI_Comm a, b, c;

    CHECK_MPI(MPI_Comm_create_keyval(copy_plus_one, delete_counted, &key, &copies));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_plain, &nullkey, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &dupkey, NULL));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK_MPI(MPI_Comm_get_attr(a, key, &got, &flag));
    CHECK(!flag, "an attribute nobody set was found");
    CHECK_MPI(MPI_Comm_set_attr(a, key, boxed(10)));
    CHECK_MPI(MPI_Comm_set_attr(a, nullkey, (void *)&nullkey));
    CHECK_MPI(MPI_Comm_set_attr(a, dupkey, (void *)&dupkey));
    CHECK_MPI(MPI_Comm_get_attr(a, key, &v, &flag));
    CHECK(flag && *v == 10, "get_attr after set: flag %d value %d", flag, flag ? *v : -1);

    /* Dup: the copy callback makes 11; the null-copy attribute is not copied; DUP_FN is. */
    CHECK_MPI(MPI_Comm_dup(a, &b));
    CHECK(copies == 1, "Comm_dup ran the copy callback %d times, expected 1", copies);
    CHECK_MPI(MPI_Comm_get_attr(b, key, &v, &flag));
    CHECK(flag && *v == 11, "dup's attribute: flag %d value %d, expected 11", flag,
          flag ? *v : -1);
    CHECK_MPI(MPI_Comm_get_attr(b, nullkey, &got, &flag));
    CHECK(!flag, "an attribute of a MPI_COMM_NULL_COPY_FN keyval was copied");
    CHECK_MPI(MPI_Comm_get_attr(b, dupkey, &got, &flag));
    CHECK(flag && got == (void *)&dupkey, "MPI_COMM_DUP_FN did not copy the value");

    /* Set over an existing value: the old one is deleted. */
    CHECK_MPI(MPI_Comm_set_attr(a, key, boxed(20)));
    CHECK(deletes == 1 && deleted_value_sum == 10, "replacing: %d deletes, sum %d", deletes,
          deleted_value_sum);
    /* Delete_attr runs the callback; a missing attribute afterwards. */
    CHECK_MPI(MPI_Comm_delete_attr(a, key));
    CHECK(deletes == 2 && deleted_value_sum == 30, "delete_attr: %d deletes, sum %d", deletes,
          deleted_value_sum);
    CHECK_MPI(MPI_Comm_get_attr(a, key, &got, &flag));
    CHECK(!flag, "a deleted attribute was found");

    /* A failing delete callback fails delete_attr; the attribute stays. */
    fail_delete = 1;
    CHECK(MPI_Comm_delete_attr(b, key) != MPI_SUCCESS, "a failing delete callback was ignored");
    fail_delete = 0;
    CHECK_MPI(MPI_Comm_get_attr(b, key, &v, &flag));
    CHECK(flag && *v == 11, "the attribute went although its delete callback failed");

    /* A failing copy callback fails the dup. */
    fail_copy = 1;
    EXPECT_CLASS(MPI_Comm_dup(b, &c), MPI_ERR_OTHER);
    fail_copy = 0;
    CHECK(copies == 2, "copies %d after the failed dup, expected 2", copies);

    /* A freed keyval's attributes stay until deleted; freeing the comm runs their callbacks. */
    CHECK_MPI(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "Comm_free_keyval did not set MPI_KEYVAL_INVALID");
    CHECK_MPI(MPI_Comm_dup(b, &c));
    CHECK(copies == 3, "a freed keyval's attribute was not copied (copies %d)", copies);
    CHECK_MPI(MPI_Comm_free(&b));
    CHECK(b == MPI_COMM_NULL, "Comm_free did not set MPI_COMM_NULL");
    CHECK(deletes == 3 && deleted_value_sum == 41, "Comm_free: %d deletes, sum %d", deletes,
          deleted_value_sum);
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK(deletes == 4 && deleted_value_sum == 53, "Comm_free of the copy: %d deletes, sum %d",
          deletes, deleted_value_sum);
    CHECK_MPI(MPI_Comm_free(&a));
    CHECK(plain_deletes == 1, "the null-copy keyval's delete ran %d times", plain_deletes);
    CHECK_MPI(MPI_Comm_free_keyval(&nullkey));
    CHECK_MPI(MPI_Comm_free_keyval(&dupkey));

    /* Predefined attributes. */
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    tag_ub_ok = flag && *v >= 32767;
    CHECK(tag_ub_ok, "MPI_TAG_UB: flag %d", flag);
    CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &flag) != MPI_SUCCESS,
          "MPI_TAG_UB could be set");
    CHECK(MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_TAG_UB) != MPI_SUCCESS,
          "MPI_TAG_UB could be deleted");
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v >= 32767, "MPI_TAG_UB changed");
}

static void test_deprecated_and_self(void)
{
    int key, flag, k1, k2, k3;
    void *got;
    MPI_Comm c;

    CHECK_MPI(MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &key, NULL));
    CHECK_MPI(MPI_Attr_put(MPI_COMM_WORLD, key, (void *)&key));
    CHECK_MPI(MPI_Attr_get(MPI_COMM_WORLD, key, &got, &flag));
    CHECK(flag && got == (void *)&key, "Attr_get after Attr_put");
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_MPI(MPI_Attr_get(c, key, &got, &flag));
    CHECK(flag && got == (void *)&key, "MPI_DUP_FN did not copy");
    CHECK_MPI(MPI_Attr_delete(MPI_COMM_WORLD, key));
    CHECK_MPI(MPI_Attr_get(MPI_COMM_WORLD, key, &got, &flag));
    CHECK(!flag, "Attr_delete left the attribute");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Keyval_free(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "Keyval_free did not set MPI_KEYVAL_INVALID");

    CHECK_MPI(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &key, NULL));
    CHECK_MPI(MPI_Attr_put(MPI_COMM_WORLD, key, (void *)&key));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_MPI(MPI_Attr_get(c, key, &got, &flag));
    CHECK(!flag, "MPI_NULL_COPY_FN copied");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Attr_delete(MPI_COMM_WORLD, key));
    CHECK_MPI(MPI_Keyval_free(&key));

    /* Three attributes on MPI_COMM_SELF, deleted in MPI_Finalize: 3, 2, 1 is the order. */
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_self, &k1, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_self, &k2, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_self, &k3, NULL));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, k2, (void *)1));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, k3, (void *)2));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, k1, (void *)3));
    CHECK_MPI(MPI_Comm_free_keyval(&k1));
}

static int type_copies, type_deletes;
static int type_copy(MPI_Datatype old, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)old;
    (void)keyval;
    (void)extra;
    type_copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int type_delete(MPI_Datatype t, int keyval, void *value, void *extra)
{
    (void)t;
    (void)keyval;
    (void)value;
    (void)extra;
    type_deletes++;
    return MPI_SUCCESS;
}

static void test_type_attrs_and_names(void)
{
    int key, flag, len, wkey;
    char base[4], name[MPI_MAX_OBJECT_NAME];
    void *got;
    MPI_Datatype t, d;

    CHECK_MPI(MPI_Type_create_keyval(type_copy, type_delete, &key, NULL));
    CHECK_MPI(MPI_Type_contiguous(4, MPI_INT, &t));
    CHECK_MPI(MPI_Type_set_attr(t, key, base));
    CHECK_MPI(MPI_Type_set_name(t, "four ints"));
    CHECK_MPI(MPI_Type_dup(t, &d));
    CHECK(type_copies == 1, "Type_dup ran the copy callback %d times", type_copies);
    CHECK_MPI(MPI_Type_get_attr(d, key, &got, &flag));
    CHECK(flag && got == base + 1, "the dup's type attribute is %p, expected %p", got,
          (void *)(base + 1));
    CHECK_MPI(MPI_Type_get_name(t, name, &len));
    CHECK(!strcmp(name, "four ints") && len == 9, "Type_get_name: '%s' (%d)", name, len);
    CHECK_MPI(MPI_Type_get_name(MPI_INT, name, &len));
    CHECK(!strcmp(name, "MPI_INT"), "MPI_INT's name is '%s'", name);
    CHECK_MPI(MPI_Type_free(&d));
    CHECK(type_deletes == 1, "Type_free ran the delete callback %d times", type_deletes);
    CHECK_MPI(MPI_Type_delete_attr(t, key));
    CHECK(type_deletes == 2, "Type_delete_attr: %d deletes", type_deletes);
    CHECK_MPI(MPI_Type_get_attr(t, key, &got, &flag));
    CHECK(!flag, "a deleted type attribute was found");
    CHECK_MPI(MPI_Type_free(&t));
    CHECK(type_deletes == 2, "Type_free of a type without attributes deleted something");
    CHECK_MPI(MPI_Type_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "Type_free_keyval did not set MPI_KEYVAL_INVALID");

    CHECK_MPI(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &wkey, NULL));
    CHECK_MPI(MPI_Win_free_keyval(&wkey));
    CHECK(wkey == MPI_KEYVAL_INVALID, "Win_free_keyval did not set MPI_KEYVAL_INVALID");
}

static void test_comm_names(void)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm a, b;

    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(!strcmp(name, "MPI_COMM_WORLD") && len == 14, "world's name '%s' (%d)", name, len);
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
    CHECK(!strcmp(name, "MPI_COMM_SELF"), "self's name '%s'", name);
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK_MPI(MPI_Comm_get_name(a, name, &len));
    CHECK(len == 0 && name[0] == 0, "a dup of world is named '%s'", name);
    CHECK_MPI(MPI_Comm_set_name(a, "rows"));
    CHECK_MPI(MPI_Comm_get_name(a, name, &len));
    CHECK(!strcmp(name, "rows") && len == 4, "set name 'rows', got '%s' (%d)", name, len);
    CHECK_MPI(MPI_Comm_dup(a, &b));
    CHECK_MPI(MPI_Comm_get_name(b, name, &len));
    CHECK(len == 0, "a dup of 'rows' is named '%s'", name);
    CHECK_MPI(MPI_Comm_free(&b));
    CHECK_MPI(MPI_Comm_free(&a));
    CHECK_MPI(MPI_Comm_set_name(MPI_COMM_WORLD, "everyone"));
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(!strcmp(name, "everyone"), "world renamed: '%s'", name);
    CHECK_MPI(MPI_Comm_set_name(MPI_COMM_WORLD, "MPI_COMM_WORLD"));
}

/* ---- error handlers ------------------------------------------------------------------------ */

static int handler_calls, handler_code;
static MPI_Comm handler_comm;

static void handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_comm = *comm;
    handler_code = *code;
}

static void test_errhandlers(int size)
{
    MPI_Errhandler eh, got, old;
    MPI_Comm a, b;
    int rc, cls, myclass, mycode, len, flag, *last;
    char msg[MPI_MAX_ERROR_STRING];

    CHECK_MPI(MPI_Comm_create_errhandler(handler, &eh));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK_MPI(MPI_Comm_set_errhandler(a, eh));
    CHECK_MPI(MPI_Comm_get_errhandler(a, &got));
    CHECK(got == eh, "Comm_get_errhandler gave another handle");
    CHECK_MPI(MPI_Errhandler_free(&got));
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free did not set MPI_ERRHANDLER_NULL");

    /* The handler stays installed although every handle to it is freed. */
    rc = MPI_Send(&rc, 1, MPI_INT, size, 0, a);
    CHECK(handler_calls == 1, "MPI_Send to rank %d called the handler %d times", size,
          handler_calls);
    CHECK(handler_comm == a, "the handler got another communicator");
    MPI_Error_class(handler_code, &cls);
    CHECK(cls == MPI_ERR_RANK, "the handler got code %d of class %d, expected MPI_ERR_RANK",
          handler_code, cls);
    CHECK(rc == handler_code, "MPI_Send returned %d, the handler got %d", rc, handler_code);

    /* A dup inherits the handler. */
    CHECK_MPI(MPI_Comm_dup(a, &b));
    rc = MPI_Send(&rc, 1, MPI_INT, -5, 0, b);
    CHECK(handler_calls == 2 && handler_comm == b, "on the dup: %d calls, right comm %d",
          handler_calls, handler_comm == b);
    CHECK(rc != MPI_SUCCESS, "MPI_Send to rank -5 succeeded");

    /* Comm_call_errhandler. */
    CHECK_MPI(MPI_Comm_call_errhandler(a, MPI_ERR_OTHER));
    CHECK(handler_calls == 3 && handler_code == MPI_ERR_OTHER && handler_comm == a,
          "Comm_call_errhandler: calls %d code %d", handler_calls, handler_code);

    /* Added error classes and codes. */
    CHECK_MPI(MPI_Add_error_class(&myclass));
    CHECK_MPI(MPI_Add_error_code(myclass, &mycode));
    CHECK_MPI(MPI_Add_error_string(mycode, "the widget is broken"));
    CHECK_MPI(MPI_Error_class(mycode, &cls));
    CHECK(cls == myclass, "Error_class of an added code: %d, expected %d", cls, myclass);
    CHECK_MPI(MPI_Error_string(mycode, msg, &len));
    CHECK(!strcmp(msg, "the widget is broken") && len == 20, "Error_string: '%s' (%d)", msg, len);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    /* (MPICH's added codes encode their class and lie above its MPI_LASTUSEDCODE.) */
    CHECK(flag && *last >= myclass && *last > MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE %d < class %d",
          flag ? *last : -1, myclass);
    CHECK_MPI(MPI_Comm_call_errhandler(b, mycode));
    CHECK(handler_calls == 4 && handler_code == mycode && handler_comm == b,
          "Comm_call_errhandler with an added code: calls %d code %d", handler_calls,
          handler_code);

    /* The deprecated forms. */
    CHECK_MPI(MPI_Errhandler_create(handler, &eh));
    CHECK_MPI(MPI_Errhandler_get(b, &old));
    CHECK_MPI(MPI_Errhandler_set(b, eh));
    CHECK_MPI(MPI_Errhandler_free(&eh));
    rc = MPI_Send(&rc, 1, MPI_INT, size + 3, 0, b);
    CHECK(handler_calls == 5 && rc != MPI_SUCCESS, "deprecated handler: calls %d",
          handler_calls);
    CHECK_MPI(MPI_Errhandler_set(b, old));
    CHECK_MPI(MPI_Errhandler_free(&old));
    CHECK_MPI(MPI_Comm_set_errhandler(b, MPI_ERRORS_RETURN));
    rc = MPI_Send(&rc, 1, MPI_INT, size, 0, b);
    CHECK(handler_calls == 5 && rc != MPI_SUCCESS, "MPI_ERRORS_RETURN called the user handler");
    CHECK_MPI(MPI_Comm_free(&b));
    CHECK_MPI(MPI_Comm_free(&a));
}

/* ---- MPI_Alloc_mem ------------------------------------------------------------------------- */

static void test_alloc_mem(void)
{
    MPI_Info info;
    char *p, *z;
    size_t n = 1 << 20, i;

    CHECK_MPI(MPI_Alloc_mem((MPI_Aint)n, MPI_INFO_NULL, &p));
    CHECK(p != NULL, "Alloc_mem gave NULL");
    for (i = 0; i < n; i++)
        p[i] = (char)i;
    for (i = 0; i < n; i += 4099)
        CHECK(p[i] == (char)i, "Alloc_mem memory does not keep what was written");
    CHECK_MPI(MPI_Free_mem(p));
    CHECK_MPI(MPI_Alloc_mem(0, MPI_INFO_NULL, &z));
    CHECK_MPI(MPI_Free_mem(z));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    CHECK_MPI(MPI_Alloc_mem(64, info, &p));
    memset(p, 1, 64);
    CHECK_MPI(MPI_Free_mem(p));
    CHECK_MPI(MPI_Info_free(&info));
}

int main(int argc, char **argv)
{
    int rank, size, total;

    MPI_Init(&argc, &argv);
    test_begin("attrs_info");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Errors not tied to a communicator go to MPI_COMM_WORLD (MPI-3) or MPI_COMM_SELF (MPI-4). */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    test_info(size);
    test_comm_info(rank, size);
    test_comm_attrs();
    test_deprecated_and_self();
    test_type_attrs_and_names();
    test_comm_names();
    test_errhandlers(size);
    test_alloc_mem();

    CHECK_MPI(MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(total == 0, "%d checks failed across the ranks", total);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    MPI_Finalize();
    if (self_deleted != 3 || self_order[0] != 3 || self_order[1] != 2 || self_order[2] != 1) {
        fprintf(stderr, "FAIL attrs_info: rank %d: MPI_Finalize deleted %d MPI_COMM_SELF "
                "attributes in the order %d %d %d, expected 3 in the order 3 2 1\n", rank,
                self_deleted, self_order[0], self_order[1], self_order[2]);
        return 1;
    }
    if (finalized_in_delete) {
        fprintf(stderr, "FAIL attrs_info: rank %d: MPI_Finalized was true in a delete callback "
                "of MPI_COMM_SELF\n", rank);
        return 1;
    }
    if (rank == 0) {
        printf("OK attrs_info\n");
        fflush(stdout);
    }
    return 0;
}
