//! Builds the C helper that does `long double` arithmetic (see `src/long_double.c`).
fn main() {
    println!("cargo:rerun-if-changed=src/long_double.c");
    cc::Build::new()
        .file("src/long_double.c")
        .flag_if_supported("-std=c99")
        .compile("stormpi_long_double");
}
