//! The integration tests of strand-model, one module per former test file, in
//! one binary.

mod wire_decode;
mod wire_shapes;
