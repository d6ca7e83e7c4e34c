//! Arbitrary bytes into `restore_from` (JSON when they start with `{`):
//! never a panic. Whatever decodes as a snapshot is written back
//! byte-identically by the streaming JSON encoder, and restores through the
//! binary format exactly as `StreamStateMachine::restore` does.

use strand_machine::{RestoreError, StreamStateMachine};
use strand_snapshot::{StreamSnapshot, encode_binary, encode_json};

/// One fuzz input: never a panic, the encoders and restore paths agree.
pub(crate) fn check(data: &[u8]) {
    let _ = strand_machine::restore_from(data);
    let Ok(snapshot) = serde_json::from_slice::<StreamSnapshot>(data) else {
        return;
    };
    let mut json = Vec::new();
    encode_json(&mut json, &snapshot, &snapshot.streams).expect("encode json");
    assert_eq!(json, serde_json::to_vec(&snapshot).expect("serde_json"));
    let mut binary = Vec::new();
    encode_binary(&mut binary, &snapshot, &snapshot.streams).expect("encode binary");
    let direct = StreamStateMachine::restore(snapshot.clone());
    let from_binary = strand_machine::restore_from(binary.as_slice());
    match (direct, from_binary) {
        (Ok(a), Ok(b)) => assert_eq!(a.snapshot(), b.snapshot()),
        (Err(a), Err(RestoreError::Invalid(b))) => assert_eq!(a, b),
        (a, b) => panic!("restore {:?} vs binary {:?}", a.err(), b.err()),
    }
}
