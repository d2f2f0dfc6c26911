//! Lightweight-kernel shim: Portals 4 transport and environment rank discovery (not yet built).
