//! End-to-end tests of Toolwire through real child processes; the tests are in `tests/`, the
//! scripted server binary in `src/bin`.
