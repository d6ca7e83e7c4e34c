//! Damaged binary snapshots and mutated JSON snapshots: always an error
//! (of the specific kind where the damage determines it), never a panic.

#![allow(clippy::unwrap_used)]

use crate::codec_common;

use std::sync::LazyLock;

use codec_common::{heavy_machine, small_machine};
use proptest::prelude::*;
use serde_json::Value;
use strand_machine::{RestoreError, restore_from, restore_from_with_limits, write_snapshot};
use strand_snapshot::{
    CollectSink, DecodeError, DecodeLimits, FILE_HEADER_LEN, FRAME_HEADER_LEN, SnapshotFormat,
    StreamSnapshot, decode_binary, encode_binary,
};

fn encode(format: SnapshotFormat, medium: bool) -> Vec<u8> {
    let machine = if medium {
        heavy_machine(3, 600)
    } else {
        small_machine()
    };
    let mut out = Vec::new();
    write_snapshot(&machine, format, &mut out).unwrap();
    out
}

static SMALL: LazyLock<Vec<u8>> = LazyLock::new(|| encode(SnapshotFormat::Binary, false));
static MEDIUM: LazyLock<Vec<u8>> = LazyLock::new(|| encode(SnapshotFormat::Binary, true));
static JSON: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_slice(&encode(SnapshotFormat::Json, false)).unwrap());

fn input(medium: bool) -> &'static [u8] {
    if medium { &MEDIUM } else { &SMALL }
}

fn decode(bytes: &[u8]) -> Result<StreamSnapshot, DecodeError> {
    let mut sink = CollectSink::new();
    decode_binary(bytes, &mut sink, &DecodeLimits::default())?;
    Ok(sink.into_snapshot())
}

/// `(offset, body length)` of every frame, per the documented layout.
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at + 9..at + 17].try_into().unwrap());
        let len = usize::try_from(len).unwrap();
        out.push((at, len));
        at += FRAME_HEADER_LEN + len;
    }
    out
}

#[test]
fn undamaged_inputs_decode() {
    assert!(decode(&SMALL).is_ok());
    assert!(decode(&MEDIUM).is_ok());
    assert_eq!(frames(&SMALL).len(), 8);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_flipped_bit_is_a_specific_error(medium: bool, pos in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = input(medium).to_vec();
        let at = pos.index(bytes.len());
        bytes[at] ^= 1 << bit;
        let err = decode(&bytes).unwrap_err();
        let expected = if at < 8 {
            matches!(err, DecodeError::BadMagic)
        } else if at < 10 {
            matches!(err, DecodeError::UnsupportedVersion(_))
        } else if at < 12 {
            matches!(err, DecodeError::UnsupportedFlags(_))
        } else {
            // Frame header or body: the CRC catches it, unless the length
            // field now exceeds the limit or the input.
            matches!(
                err,
                DecodeError::ChecksumMismatch { .. }
                    | DecodeError::FrameTooLarge { .. }
                    | DecodeError::Truncated { .. }
            )
        };
        prop_assert!(expected, "flip at byte {at}: {err}");
        prop_assert!(restore_from(bytes.as_slice()).is_err());
    }

    #[test]
    fn a_flipped_body_bit_names_its_frame(medium: bool, pick in any::<prop::sample::Index>(), pos in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = input(medium).to_vec();
        let all = frames(&bytes);
        let index = pick.index(all.len());
        let (start, len) = all[index];
        prop_assume!(len > 0);
        bytes[start + FRAME_HEADER_LEN + pos.index(len)] ^= 1 << bit;
        match decode(&bytes) {
            Err(DecodeError::ChecksumMismatch { frame, .. }) => {
                prop_assert_eq!(frame.index, index as u64);
                prop_assert_eq!(frame.offset, start as u64);
                prop_assert_eq!(frame.kind, bytes[start]);
            }
            other => prop_assert!(false, "expected a checksum mismatch, got {:?}", other),
        }
    }

    #[test]
    fn truncation_is_reported_as_truncation(medium: bool, cut in any::<prop::sample::Index>()) {
        let full = input(medium);
        let len = cut.index(full.len());
        let err = decode(&full[..len]).unwrap_err();
        prop_assert!(
            matches!(err, DecodeError::TruncatedHeader { .. } | DecodeError::Truncated { .. }),
            "cut at {len}: {err}"
        );
        prop_assert!(restore_from(&full[..len]).is_err());
    }

    #[test]
    fn trailing_garbage_is_reported(medium: bool, junk in prop::collection::vec(any::<u8>(), 1..64)) {
        let full = input(medium);
        let bytes = [full, junk.as_slice()].concat();
        match decode(&bytes) {
            Err(DecodeError::TrailingData { offset }) => prop_assert_eq!(offset, full.len() as u64),
            other => prop_assert!(false, "expected TrailingData, got {:?}", other),
        }
        prop_assert!(restore_from(bytes.as_slice()).is_err());
    }

    #[test]
    fn swapped_frames_are_out_of_sequence(medium: bool, a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>()) {
        let full = input(medium);
        let all = frames(full);
        let (i, j) = (a.index(all.len()), b.index(all.len()));
        prop_assume!(i != j);
        let (i, j) = (i.min(j), i.max(j));
        let span = |k: usize| all[k].0..all[k].0 + FRAME_HEADER_LEN + all[k].1;
        let mut bytes = full[..all[i].0].to_vec();
        bytes.extend_from_slice(&full[span(j)]);
        bytes.extend_from_slice(&full[span(i).end..span(j).start]);
        bytes.extend_from_slice(&full[span(i)]);
        bytes.extend_from_slice(&full[span(j).end..]);
        prop_assert_eq!(bytes.len(), full.len());
        match decode(&bytes) {
            Err(DecodeError::OutOfSequence { frame, found }) => {
                prop_assert_eq!(frame.index, i as u64);
                prop_assert_eq!(found, j as u64);
            }
            other => prop_assert!(false, "expected OutOfSequence, got {:?}", other),
        }
    }

    #[test]
    fn an_oversized_length_field_is_rejected(medium: bool, pick in any::<prop::sample::Index>(), over in (256u64 << 20) + 1..=u64::MAX) {
        let mut bytes = input(medium).to_vec();
        let all = frames(&bytes);
        let index = pick.index(all.len());
        let at = all[index].0 + 9;
        bytes[at..at + 8].copy_from_slice(&over.to_le_bytes());
        match decode(&bytes) {
            Err(DecodeError::FrameTooLarge { frame, len, limit }) => {
                prop_assert_eq!(frame.index, index as u64);
                prop_assert_eq!(len, over);
                prop_assert_eq!(limit, 256 << 20);
            }
            other => prop_assert!(false, "expected FrameTooLarge, got {:?}", other),
        }
    }

    #[test]
    fn mutated_json_never_panics(mutations in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6)) {
        let mut value = JSON.clone();
        for (pick, op) in mutations {
            mutate(&mut value, pick, op);
        }
        let text = serde_json::to_vec(&value).unwrap();
        let from_json = restore_from(text.as_slice());
        // Whatever decodes also goes through the binary path, with the
        // same verdict.
        if let Ok(snap) = serde_json::from_slice::<StreamSnapshot>(&text) {
            let mut bin = Vec::new();
            encode_binary(&mut bin, &snap, &snap.streams).unwrap();
            let from_binary = restore_from(bin.as_slice());
            match (&from_json, &from_binary) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a.snapshot(), b.snapshot()),
                (Err(RestoreError::Invalid(a)), Err(RestoreError::Invalid(b))) => prop_assert_eq!(a, b),
                _ => prop_assert!(false, "json {:?} vs binary {:?}", from_json.err(), from_binary.err()),
            }
        } else {
            prop_assert!(matches!(from_json, Err(RestoreError::Decode(DecodeError::Json(_)))));
        }
    }
}

/// Every JSON pointer in `v`, in document order.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                pointers(item, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

const EXTREMES: [i128; 6] = [0, 1, -1, i64::MIN as i128, u64::MAX as i128, 1 << 53];

fn mutate(root: &mut Value, pick: prop::sample::Index, op: u8) {
    let mut all = Vec::new();
    pointers(root, String::new(), &mut all);
    let at = &all[pick.index(all.len())];
    let Some(node) = root.pointer_mut(at) else {
        return;
    };
    match node {
        Value::Number(_) | Value::Null | Value::Bool(_) => {
            let x = EXTREMES[usize::from(op) % EXTREMES.len()];
            *node = match (u64::try_from(x), i64::try_from(x)) {
                (Ok(u), _) => Value::from(u),
                (_, Ok(i)) => Value::from(i),
                _ => Value::Null,
            };
        }
        Value::Array(items) => match op % 3 {
            0 => items.truncate(items.len() / 2),
            1 => {
                let copy = items.clone();
                items.extend(copy);
            }
            _ => items.clear(),
        },
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            if !keys.is_empty() {
                map.remove(&keys[usize::from(op) % keys.len()]);
            }
        }
        Value::String(s) => {
            if op.is_multiple_of(2) {
                s.clear();
            } else {
                s.push('x');
            }
        }
    }
}

#[test]
fn a_huge_length_within_a_raised_limit_does_not_allocate_it() {
    // Limit lifted entirely: the declared 2^60-byte body is read in bounded
    // pieces, so a short input is a truncation, not an allocation failure.
    let mut bytes = SMALL.clone();
    let at = FILE_HEADER_LEN + 9;
    bytes[at..at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let limits = DecodeLimits::default().with_max_frame_len(u64::MAX);
    assert!(matches!(
        restore_from_with_limits(bytes.as_slice(), &limits),
        Err(RestoreError::Decode(DecodeError::Truncated {
            index: 0,
            ..
        }))
    ));
}

#[test]
fn dropped_and_duplicated_frames_are_out_of_sequence() {
    let all = frames(&SMALL);
    let span = |k: usize| all[k].0..all[k].0 + FRAME_HEADER_LEN + all[k].1;
    let dropped = [&SMALL[..span(1).start], &SMALL[span(1).end..]].concat();
    assert!(matches!(
        decode(&dropped),
        Err(DecodeError::OutOfSequence { found: 2, .. })
    ));
    let duplicated = [
        &SMALL[..span(2).end],
        &SMALL[span(2)],
        &SMALL[span(2).end..],
    ]
    .concat();
    assert!(matches!(
        decode(&duplicated),
        Err(DecodeError::OutOfSequence { found: 2, .. })
    ));
}
