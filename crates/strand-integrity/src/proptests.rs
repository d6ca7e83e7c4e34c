//! Property tests: snapshot/restore roundtrip, order independence, and a
//! panic-free, model-checked hex parser.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use setsum::Setsum;

use crate::hex::{encode_setsum_hex, parse_setsum_hex};
use crate::{IntegrityDomain, StreamIntegrity, StreamIntegritySnapshot};

#[derive(Debug, Clone)]
enum Op {
    Inline(Vec<u8>),
    External { path: String, len: u64, size: u64 },
    Batch(Vec<Vec<u8>>),
    Evict(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::Inline),
        ("[a-z/0-9]{0,12}", 0_u64..32, any::<u64>()).prop_map(|(path, len, size)| Op::External {
            path,
            len,
            size
        }),
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..16), 0..4)
            .prop_map(Op::Batch),
        any::<u64>().prop_map(Op::Evict),
    ]
}

/// Applies `ops` as a state machine would, returning the state and the tail.
fn run(domain: IntegrityDomain<'_>, ops: &[Op]) -> (StreamIntegrity, u64) {
    let mut integrity = StreamIntegrity::new();
    let mut tail = 0_u64;
    for op in ops {
        match op {
            Op::Inline(bytes) => {
                let next = tail + bytes.len() as u64;
                integrity.append_inline(domain, tail, next, bytes);
                tail = next;
            }
            Op::External { path, len, size } => {
                integrity.append_external(domain, tail, tail + len, path, *size);
                tail += len;
            }
            Op::Batch(payloads) => tail = integrity.append_inline_batch(domain, tail, payloads),
            Op::Evict(at) => integrity.evict_before(*at % (tail + 1)),
        }
    }
    (integrity, tail)
}

/// Independent model of `setsum` 0.8 `from_hexdigest` on ASCII input: 64
/// bytes, each group two hex digits or `+` and one hex digit.
fn model_accepts(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 64
        && bytes.chunks(2).all(|group| {
            let (a, b) = (group[0], group[1]);
            b.is_ascii_hexdigit() && (a.is_ascii_hexdigit() || a == b'+')
        })
}

fn hexish_64() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            8 => proptest::sample::select(b"0123456789abcdefABCDEF".to_vec()).prop_map(char::from),
            1 => proptest::sample::select(vec!['+', '-', ' ', 'g', 'G', 'z', '\0', 'é', '€', '😀']),
        ],
        1..=64,
    )
    .prop_map(|chars| {
        // Trim to at most 64 bytes so multi-byte characters land on both
        // aligned and straddling positions of exactly-64-byte strings.
        let mut out = String::new();
        for c in chars {
            if out.len() + c.len_utf8() > 64 {
                break;
            }
            out.push(c);
        }
        out
    })
}

proptest! {
    #[test]
    fn snapshot_restore_roundtrip(
        ops in proptest::collection::vec(op(), 0..24),
        affinity in proptest::option::of("[a-z-]{0,6}"),
        retained_seed in any::<u64>(),
    ) {
        let domain = IntegrityDomain::new("bench", affinity.as_deref(), "s");
        let (integrity, tail) = run(domain, &ops);
        let retained = retained_seed % (tail + 1);
        let snap = integrity.snapshot(retained, tail);
        prop_assert_eq!(&snap.live_setsum, &snap.total_setsum);
        prop_assert_eq!(snap.live_records, snap.total_records);
        prop_assert_eq!(snap.evicted_records, 0);
        let restored = StreamIntegrity::restore(&snap).unwrap();
        prop_assert_eq!(restored, integrity);
        prop_assert_eq!(restored.snapshot(retained, tail), snap);
        // The snapshot also survives JSON.
        let json = serde_json::to_string(&restored.snapshot(retained, tail)).unwrap();
        let decoded: StreamIntegritySnapshot = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(StreamIntegrity::restore(&decoded).unwrap(), integrity);
    }

    #[test]
    fn total_is_independent_of_append_order(
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..32), 1..8),
        seed in any::<u64>(),
    ) {
        let domain = IntegrityDomain::new("b", Some("k"), "s");
        let mut spans = Vec::new();
        let mut tail = 0_u64;
        for bytes in &items {
            let next = tail + bytes.len() as u64;
            spans.push((tail, next, bytes.as_slice()));
            tail = next;
        }
        let mut forward = StreamIntegrity::new();
        for (start, end, bytes) in &spans {
            forward.append_inline(domain, *start, *end, bytes);
        }
        let shift = usize::try_from(seed % spans.len() as u64).unwrap();
        spans.rotate_left(shift);
        spans.reverse();
        let mut shuffled = StreamIntegrity::new();
        for (start, end, bytes) in &spans {
            shuffled.append_inline(domain, *start, *end, bytes);
        }
        prop_assert_eq!(forward, shuffled);
    }

    #[test]
    fn parser_never_panics_on_any_string(text in any::<String>()) {
        let _ = parse_setsum_hex(&text);
    }

    #[test]
    fn parser_matches_model_on_hexish_strings(text in hexish_64()) {
        let parsed = parse_setsum_hex(&text);
        let expected = text.is_ascii() && model_accepts(&text);
        prop_assert_eq!(parsed.is_some(), expected, "{:?}", text);
        if let Some(setsum) = parsed {
            // Lowercase re-encoding of canonical groups equals the input folded.
            if !text.contains('+') {
                prop_assert_eq!(encode_setsum_hex(&setsum), text.to_ascii_lowercase());
            }
        }
    }

    #[test]
    fn restore_never_panics(
        live in prop_oneof![hexish_64(), any::<String>()],
        evicted in prop_oneof![hexish_64(), any::<String>()],
        total in prop_oneof![hexish_64(), any::<String>()],
        records in any::<u64>(),
    ) {
        let snap = StreamIntegritySnapshot {
            live_setsum: live,
            evicted_setsum: evicted,
            total_setsum: total,
            live_start_offset: 0,
            tail_offset: 0,
            live_records: 0,
            evicted_records: 0,
            total_records: records,
        };
        if let Ok(restored) = StreamIntegrity::restore(&snap) {
            prop_assert_eq!(restored.total_records(), records);
        }
    }

    #[test]
    fn encoding_matches_crate_hexdigest(digest in proptest::array::uniform32(any::<u8>())) {
        let setsum = Setsum::from_digest(digest);
        prop_assert_eq!(encode_setsum_hex(&setsum), setsum.hexdigest());
        prop_assert_eq!(parse_setsum_hex(&setsum.hexdigest()), Some(setsum));
    }
}
