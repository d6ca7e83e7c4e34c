//! The integration tests of strand-model, one module per file of `tests/`, in
//! one binary.

mod wire_decode;
mod wire_shapes;
