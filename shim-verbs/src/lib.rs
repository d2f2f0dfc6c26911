//! InfiniBand verbs BTL (not yet built).
