//! The integration tests of strand-records, one module per file of `tests/`, in
//! one binary.

mod content_type;
mod coordinate_fixtures;
mod index_unit;
mod message_records;
mod prepare_commit;
mod proptests;
mod serde_shapes;
mod write_paths;
