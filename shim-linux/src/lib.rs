//! Linux shim (not yet built).
