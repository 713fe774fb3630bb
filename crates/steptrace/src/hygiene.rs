//! Label hygiene (in progress).
