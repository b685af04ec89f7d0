//! Example programs and end-to-end tests of parprof live in `examples/` and `tests/`.
