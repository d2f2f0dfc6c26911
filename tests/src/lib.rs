//! Multi-process and cross-crate tests live in `tests/`; this library holds their shared helpers.
