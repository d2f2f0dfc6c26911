#!/usr/bin/env python3
"""Helpers for tests/abi/check.sh: read preprocessed mpi.h files (gcc -E -P output) and
generate or compare what the check needs. Every subcommand prints to stdout; the comparing
ones exit non-zero with the differences.

  redecl MPICH.i             C declarations of MPICH's functions, typedefs and objects, to be
                             compiled after stormpi's mpi.h (a mismatch is a compile error)
  cxx-probe MPICH.i          C++ functions taking each MPI typedef, for comparing mangled names
  link-probe OURS.i          C program that takes the address of every symbol stormpi's mpi.h
                             declares
  stubs NAMES.rs             C definitions of every symbol core/src/capi/names.rs lists
  rust-printer VALUES.c ABI.rs
                             Rust program printing the items of abi_values.c from abi.rs
  coverage MPICH.i MPICH.macros OURS.i OURS.macros VALUES.c
                             same constant and type names in both headers, all of them printed
                             by abi_values.c
  functions MPICH.i OURS.i NAMES.rs
                             same functions in both headers, and names.rs lists exactly them
"""
import re
import sys

# Names in MPICH's header that stormpi deliberately does not define.
MPICH_ONLY = {
    "MPI_AINT_FMT_DEC_SPEC",  # printf formats, MPICH-specific (its header says so)
    "MPI_AINT_FMT_HEX_SPEC",
    "MPI_FILE_DEFINED",  # ROMIO include guards
    "MPI_INCLUDED",
    "MPI_PROTO_H_INCLUDED",
    "MPI_T_VERBOSITY_INVALID",  # MPICH extensions of the MPI_T enums
    "MPI_T_BIND_INVALID",
    "MPI_T_SCOPE_INVALID",
    "MPI_T_PVAR_CLASS_INVALID",
    # Macros for MPIR_Dup_fn in MPICH, functions in stormpi (abi_values.c checks them as C_FN)
    "MPI_DUP_FN",
    "MPI_COMM_DUP_FN",
    "MPI_TYPE_DUP_FN",
    "MPI_WIN_DUP_FN",
}

# Predefined callbacks stormpi declares as functions; MPICH's header maps them to MPIR_Dup_fn.
DUP_FUNCTIONS = {"MPI_DUP_FN", "MPI_COMM_DUP_FN", "MPI_TYPE_DUP_FN", "MPI_WIN_DUP_FN"}
MPICH_DUP_SYMBOL = "MPIR_Dup_fn"

VALUE_KINDS = r"(I|P|FN_NULL|SIZE|ALIGN|SIGNED|OFFSET|C_FN|C_I|C_TYPE)"


def is_mpi_name(name):
    return re.match(r"P?MPI_", name) is not None


def statements(path):
    """Top-level declarations of a preprocessed file, whitespace-normalized."""
    text = open(path).read()
    text = "\n".join(l for l in text.splitlines() if not l.startswith("#"))
    out, depth, cur = [], 0, []
    for ch in text:
        cur.append(ch)
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append(" ".join("".join(cur).split()))
            cur = []
    return out


def parse(path):
    """Functions, objects and typedefs declared by a preprocessed header, by name."""
    funcs, objects, typedefs, enumerators = {}, {}, {}, set()
    for s in statements(path):
        for tag, body in re.findall(r"\benum\b([^{;]*)\{([^}]*)\}", s):
            if "QMPI" in tag:
                continue  # MPICH's tool-stacking internals (MPI_SEND_T, ...)
            for item in body.split(","):
                m = re.match(r"\s*(\w+)", item)
                if m:
                    enumerators.add(m.group(1))
        if s.startswith("typedef"):
            m = re.search(r"\(\s*\*?\s*(\w+)\s*\)\s*\(", s)  # function type
            if m and "{" not in s:
                typedefs[m.group(1)] = (s, "function")
            else:
                m = re.search(r"(\w+)\s*;$", s)
                base = re.match(r"typedef\s+(\w+)\s+\w+\s*;$", s)
                if base and typedefs.get(base.group(1), ("", ""))[1] == "function":
                    typedefs[m.group(1)] = (s, "function")  # alias of a function type
                else:
                    typedefs[m.group(1)] = (s, "struct" if "{" in s else "plain")
        elif s.startswith("extern") and "(" not in s:
            m = re.search(r"(\w+)\s*(\[\s*\w*\s*\])?\s*;$", s)
            objects[m.group(1)] = s
        else:
            m = re.match(r"^(?:extern\s+)?[\w\s\*]+?\b(\w+)\s*\(", s)
            if m and not s.startswith("static"):
                funcs[m.group(1)] = s
    return funcs, objects, typedefs, enumerators


def mpich_api(path):
    """MPICH's MPI API: what a program may use, without QMPI/MPIX/MPIR internals."""
    funcs, objects, typedefs, enums = parse(path)
    funcs = {n: s for n, s in funcs.items() if is_mpi_name(n) or n == MPICH_DUP_SYMBOL}
    objects = {n: s for n, s in objects.items() if is_mpi_name(n)}
    typedefs = {n: t for n, t in typedefs.items() if is_mpi_name(n)}
    enums = {n for n in enums if is_mpi_name(n)}
    return funcs, objects, typedefs, enums


def macros(path):
    names = set()
    for line in open(path):
        m = re.match(r"#define (\w+)", line)
        if m and is_mpi_name(m.group(1)):
            names.add(m.group(1))
    return names


def value_items(values_c):
    """(kind, args) of every item line of abi_values.c."""
    items = []
    for line in open(values_c):
        m = re.match(r"\s*" + VALUE_KINDS + r"\((.*)\);\s*$", line)
        if m:
            items.append((m.group(1), m.group(2)))
    return items


def rust_list(names_rs, const):
    text = open(names_rs).read()
    m = re.search(r"pub const " + const + r": &\[&str\] = &\[(.*?)\];", text, re.S)
    if not m:
        sys.exit("names.rs: %s not found" % const)
    return re.findall(r'"([^"]*)"', m.group(1))


# ---- subcommands --------------------------------------------------------------------------


def cmd_redecl(mpich_i):
    funcs, objects, typedefs, _ = mpich_api(mpich_i)
    print("/* Generated by tests/abi/abi_tool.py from MPICH's mpi.h. */")
    print("#include <mpi.h>")
    print("/* typedefs (C11 allows repeating a typedef for the same type) */")
    for name, (s, kind) in sorted(typedefs.items()):
        if kind != "struct":
            print(s)
    print("/* objects */")
    for name, s in sorted(objects.items()):
        print(s)
    print("/* functions */")
    for name, s in sorted(funcs.items()):
        if name == MPICH_DUP_SYMBOL:
            s = s.replace(MPICH_DUP_SYMBOL, "MPI_DUP_FN", 1)
        print(s)


def cmd_cxx_probe(mpich_i):
    _, _, typedefs, _ = mpich_api(mpich_i)
    print("// Generated by tests/abi/abi_tool.py: one function per MPI type; the mangled names")
    print("// must not depend on the header.")
    print("#include <mpi.h>")
    for name, (_, kind) in sorted(typedefs.items()):
        param = name + " *" if kind == "function" else name
        print("void stormpi_probe_%s(%s) {}" % (name, param))


def cmd_link_probe(ours_i):
    funcs, objects, _, _ = parse(ours_i)
    names = sorted(n for n in list(funcs) + list(objects) if is_mpi_name(n))
    print("/* Generated by tests/abi/abi_tool.py: uses every symbol stormpi's mpi.h declares. */")
    print("#include <mpi.h>")
    print("typedef void (*any_fn)(void);")
    print("int main(void)\n{")
    print("    const void *volatile sink;")
    for n in names:
        if n in funcs:
            print("    sink = (const void *)(any_fn)%s;" % n)
        else:
            print("    sink = (const void *)&%s;" % n)
    print("    (void)sink;\n    return 0;\n}")


def cmd_stubs(names_rs):
    print("/* Generated by tests/abi/abi_tool.py: a definition of every symbol names.rs lists. */")
    for n in rust_list(names_rs, "MPI_FUNCTIONS"):
        print("void MPI_%s(void) {}\nvoid PMPI_%s(void) {}" % (n, n))
    for n in rust_list(names_rs, "CALLBACK_FUNCTIONS"):
        print("void %s(void) {}" % n)
    for n in rust_list(names_rs, "MPICH_COMPAT_FUNCTIONS"):
        print("void %s(void) {}" % n)
    for n in rust_list(names_rs, "LIBRARY_OBJECTS"):
        print("void *%s;" % n)


def cmd_rust_printer(values_c, abi_rs):
    print("// Generated by tests/abi/abi_tool.py from tests/abi/abi_values.c.")
    print("#![allow(unused_comparisons)]")
    print("#[path = %s]\nmod abi;\n" % ('"' + abi_rs + '"'))
    print("fn main() {")
    for kind, args in value_items(values_c):
        a = args.strip()
        if kind == "I":
            print('    println!("{} {}", %s, abi::%s as i64);' % ('"' + a + '"', a))
        elif kind == "P":
            print('    println!("{} {}", %s, abi::%s as isize as i64);' % ('"' + a + '"', a))
        elif kind == "FN_NULL":
            print(
                '    println!("{} {}", %s, if abi::%s.is_none() { "null" } else { "nonnull" });'
                % ('"' + a + '"', a)
            )
        elif kind == "SIZE":
            print('    println!("sizeof(%s) {}", core::mem::size_of::<abi::%s>());' % (a, a))
        elif kind == "ALIGN":
            print('    println!("alignof(%s) {}", core::mem::align_of::<abi::%s>());' % (a, a))
        elif kind == "SIGNED":
            print(
                '    { let z: abi::%s = 0; println!("signed(%s) {}", (z.wrapping_sub(1) < z) as i32); }'
                % (a, a)
            )
        elif kind == "OFFSET":
            t, f = [x.strip() for x in a.split(",")]
            print(
                '    println!("offsetof(%s,%s) {}", core::mem::offset_of!(abi::%s, %s));'
                % (t, f, t, f)
            )
        # C_* kinds have no Rust counterpart.
    print("}")


def cmd_coverage(mpich_i, mpich_macros, ours_i, ours_macros, values_c):
    problems = []
    _, _, m_types, m_enums = mpich_api(mpich_i)
    _, _, o_types_all, o_enums = parse(ours_i)
    o_types = {n: t for n, t in o_types_all.items() if is_mpi_name(n)}
    o_enums = {n for n in o_enums if is_mpi_name(n)}
    theirs = (macros(mpich_macros) | m_enums) - MPICH_ONLY
    ours = macros(ours_macros) | o_enums
    for n in sorted(theirs - ours):
        problems.append("missing in stormpi's mpi.h: %s" % n)
    for n in sorted(ours - theirs):
        problems.append("not in MPICH's mpi.h: %s" % n)
    for n in sorted(set(m_types) ^ set(o_types)):
        problems.append("typedef %s is in only one header" % n)

    items = value_items(values_c)
    mentioned = set()
    for _, args in items:
        mentioned |= set(re.findall(r"\w+", args))
    for n in sorted(theirs):
        if n not in mentioned:
            problems.append("abi_values.c does not print %s" % n)
    sized = {args.strip() for kind, args in items if kind == "SIZE"}
    for n, (_, kind) in sorted(m_types.items()):
        if kind != "function" and n not in sized:
            problems.append("abi_values.c does not print SIZE(%s)" % n)
    report(problems, "%d constants, %d typedefs" % (len(theirs), len(m_types)))


def cmd_functions(mpich_i, ours_i, names_rs):
    problems = []
    m_funcs, m_objects, _, _ = mpich_api(mpich_i)
    o_funcs, o_objects, _, _ = parse(ours_i)
    o_funcs = {n for n in o_funcs if is_mpi_name(n)}
    o_objects = {n for n in o_objects if is_mpi_name(n)}
    m_api = set(m_funcs) - {MPICH_DUP_SYMBOL}
    o_api = o_funcs - DUP_FUNCTIONS
    for n in sorted(m_api - o_api):
        problems.append("function missing in stormpi's mpi.h: %s" % n)
    for n in sorted(o_api - m_api):
        problems.append("function not in MPICH's mpi.h: %s" % n)
    if set(m_objects) != o_objects:
        problems.append("objects differ: %s" % sorted(set(m_objects) ^ o_objects))
    plain = {n[4:] for n in o_api if n.startswith("MPI_")}
    profiled = {n[5:] for n in o_api if n.startswith("PMPI_")}
    for n in sorted(plain ^ profiled):
        problems.append("MPI_/PMPI_ pair incomplete: %s" % n)

    expect = {
        "MPI_FUNCTIONS": sorted(plain),
        "CALLBACK_FUNCTIONS": sorted(o_funcs & DUP_FUNCTIONS),
        "LIBRARY_OBJECTS": sorted(o_objects),
        "MPICH_COMPAT_FUNCTIONS": sorted(set(m_funcs) - m_api),
    }
    for const, want in expect.items():
        have = rust_list(names_rs, const)
        if have != want:
            extra = sorted(set(have) - set(want))
            missing = sorted(set(want) - set(have))
            problems.append(
                "names.rs %s differs from mpi.h: extra %s, missing %s%s"
                % (const, extra, missing, "" if extra or missing else ", order")
            )
    report(problems, "%d functions, %d objects" % (len(o_api), len(o_objects)))


def report(problems, summary):
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(summary)


COMMANDS = {
    "redecl": (cmd_redecl, 1),
    "cxx-probe": (cmd_cxx_probe, 1),
    "link-probe": (cmd_link_probe, 1),
    "stubs": (cmd_stubs, 1),
    "rust-printer": (cmd_rust_printer, 2),
    "coverage": (cmd_coverage, 5),
    "functions": (cmd_functions, 3),
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    fn, nargs = COMMANDS[sys.argv[1]]
    if len(sys.argv) != 2 + nargs:
        sys.exit(__doc__)
    fn(*sys.argv[2:])
