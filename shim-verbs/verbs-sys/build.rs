//! Chooses the verbs library: rdma-core's `libibverbs` with the `vendor` feature or when
//! `STORMPI_VERBS_LIB` is set, else nothing here (the `shmem` feature links the software device as
//! an ordinary Rust dependency).
//!
//! `STORMPI_VERBS_LIB` is a library name (`ibverbs`, `static=ibverbs`) or a path to the library
//! file (`/opt/ofed/lib64/libibverbs.so`); `STORMPI_VERBS_LIB_DIR` adds a search directory.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(verbs_vendor)");
    println!("cargo::rerun-if-env-changed=STORMPI_VERBS_LIB");
    println!("cargo::rerun-if-env-changed=STORMPI_VERBS_LIB_DIR");
    let lib = env::var("STORMPI_VERBS_LIB").ok().filter(|s| !s.is_empty());
    let vendor = env::var_os("CARGO_FEATURE_VENDOR").is_some() || lib.is_some();
    if !vendor {
        return;
    }
    println!("cargo::rustc-cfg=verbs_vendor");
    if let Ok(dir) = env::var("STORMPI_VERBS_LIB_DIR") {
        println!("cargo::rustc-link-search=native={dir}");
    }
    let lib = lib.unwrap_or_else(|| "ibverbs".to_string());
    if lib.contains('/') {
        let path = Path::new(&lib);
        if let Some(dir) = path.parent() {
            println!("cargo::rustc-link-search=native={}", dir.display());
        }
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("libibverbs.so");
        let stem = file.strip_prefix("lib").unwrap_or(file);
        let (name, kind) = if let Some(n) = stem.strip_suffix(".a") {
            (n, "static")
        } else {
            (stem.split(".so").next().unwrap_or(stem), "dylib")
        };
        println!("cargo::rustc-link-lib={kind}={name}");
    } else {
        println!("cargo::rustc-link-lib={lib}");
    }
}
