//! Trace reader (in progress).
