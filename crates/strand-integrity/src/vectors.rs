//! Reference vectors of spec 02 §7.7 (integrity) and §7.8 / spec 07 §10
//! cases 31–33 (integrity restore). Every expected value is copied from the
//! spec, not from this crate's output.

#![allow(clippy::unwrap_used)]

use setsum::Setsum;

use crate::hex::{encode_setsum_hex, parse_setsum_hex};
use crate::item::{ItemKind, item_setsum, with_item_pieces};
use crate::{
    EMPTY_SETSUM_HEX, IntegrityDomain, IntegrityRestoreError, SetsumField, StreamIntegrity,
    StreamIntegritySnapshot,
};

const BENCH_S: IntegrityDomain<'static> = IntegrityDomain::new("bench", None, "s");
const BENCH_J: IntegrityDomain<'static> = IntegrityDomain::new("bench", None, "j");
const J_CREATE: &[u8] = b"{\"a\":1}\n{\"b\":2}\n";
const J_TOTAL: &str = "4b0c8e76d2b7efbe6a458e9adb1699c9e6a8c8e9633b460f5e345b96fba1f0d5";
const ABC_ITEM: &str = "daa92f5af4135f2c54bd39f22423ce87cf6a057bd5fc42a67e610c1c9e6ff935";
const DE_ITEM: &str = "0e45e8ecc30fb49a19bbdf568ca17e19c1e21277f00963b56ca9987b32986dde";
const ABC_DE_TOTAL: &str = "edee1747b72313c7ae781949b0c44ca1904d18f24c07a65bea0aa59789086714";

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn item_hex(domain: IntegrityDomain<'_>, start: u64, end: u64, kind: ItemKind<'_>) -> String {
    with_item_pieces(domain, start, end, kind, |pieces| to_hex(&pieces.concat()))
}

fn abc_de() -> StreamIntegrity {
    let mut integrity = StreamIntegrity::new();
    integrity.append_inline(BENCH_S, 0, 3, b"abc");
    integrity.append_inline(BENCH_S, 3, 5, b"de");
    integrity
}

/// 7.7-5: `bench/j` created with two JSON lines, as the entry would report it.
fn j_snapshot() -> StreamIntegritySnapshot {
    let mut integrity = StreamIntegrity::new();
    integrity.append_inline(BENCH_J, 0, 16, J_CREATE);
    integrity.snapshot(0, 16)
}

fn zeros(n: usize) -> String {
    "0".repeat(n)
}

// ---- §7.7 ----

#[test]
fn v1_empty_stream() {
    let snap = StreamIntegrity::new().snapshot(0, 0);
    let zero = "0000000000000000000000000000000000000000000000000000000000000000";
    assert_eq!(
        snap,
        StreamIntegritySnapshot {
            live_setsum: zero.into(),
            evicted_setsum: zero.into(),
            total_setsum: zero.into(),
            live_start_offset: 0,
            tail_offset: 0,
            live_records: 0,
            evicted_records: 0,
            total_records: 0,
        }
    );
    assert_eq!(EMPTY_SETSUM_HEX, zero);
}

#[test]
fn v2_item_layout_no_affinity() {
    let expected = concat!(
        "757273756c612d73747265616d2d7265636f72642d7631",
        "62656e6368",
        "00",
        "73",
        "00",
        "0000000000000000",
        "0300000000000000",
        "696e6c696e65",
        "616263",
    );
    let got = item_hex(BENCH_S, 0, 3, ItemKind::Inline(b"abc"));
    assert_eq!(got, expected);
    assert_eq!(got.len(), 56 * 2);
}

#[test]
fn v2_single_item_hexdigests() {
    let abc = item_setsum(BENCH_S, 0, 3, ItemKind::Inline(b"abc"));
    assert_eq!(encode_setsum_hex(&abc), ABC_ITEM);
    let de = item_setsum(BENCH_S, 3, 5, ItemKind::Inline(b"de"));
    assert_eq!(encode_setsum_hex(&de), DE_ITEM);
}

#[test]
fn v2_two_appends_total() {
    let snap = abc_de().snapshot(0, 5);
    assert_eq!(snap.live_setsum, ABC_DE_TOTAL);
    assert_eq!(snap.total_setsum, ABC_DE_TOTAL);
    assert_eq!(snap.evicted_setsum, EMPTY_SETSUM_HEX);
    assert_eq!(
        (snap.live_records, snap.evicted_records, snap.total_records),
        (2, 0, 2)
    );
    assert_eq!(snap.tail_offset, 5);
}

#[test]
fn v2_column_zero_wraps_once() {
    let word0 = |hex: &str| {
        let digest = parse_setsum_hex(hex).unwrap().digest();
        u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
    };
    assert_eq!(word0(ABC_ITEM), 1_513_073_114);
    assert_eq!(word0(DE_ITEM), 3_974_645_006);
    assert_eq!(word0(ABC_DE_TOTAL), 1_192_750_829);
    assert_eq!(1_192_750_829_u32, 0x4717_EEED);
    assert!(ABC_DE_TOTAL.starts_with("edee1747"));
}

#[test]
fn v3_item_layout_with_affinity() {
    let domain = IntegrityDomain::new("bench", Some("run-1"), "q");
    assert_eq!(
        item_hex(domain, 0, 5, ItemKind::Inline(b"hello")),
        "757273756c612d73747265616d2d7265636f72642d763262656e63680072756e2d3100710000000000000000000500000000000000696e6c696e6568656c6c6f"
    );
    let mut integrity = StreamIntegrity::new();
    integrity.append_inline(domain, 0, 5, b"hello");
    assert_eq!(
        integrity.snapshot(0, 5).total_setsum,
        "9be26d3c0ad4c279f0a75d06ebea60aa1881353652e2f28718459873eaead217"
    );
}

#[test]
fn v4_external_create() {
    let domain = IntegrityDomain::new("bench", None, "ext");
    let kind = ItemKind::External {
        s3_path: "obj/1",
        object_size: 10,
    };
    assert_eq!(
        item_hex(domain, 0, 4, kind),
        "757273756c612d73747265616d2d7265636f72642d763162656e636800657874000000000000000000040000000000000065787465726e616c6f626a2f310a00000000000000"
    );
    let mut integrity = StreamIntegrity::new();
    integrity.append_external(domain, 0, 4, "obj/1", 10);
    let snap = integrity.snapshot(0, 4);
    assert_eq!(
        snap.total_setsum,
        "4a99f36b1746c3c669ad57abfa72eff262b779b801e4adc033cd31ea5c391912"
    );
    assert_eq!(snap.total_records, 1);
}

#[test]
fn v5_json_create_is_one_item() {
    let snap = j_snapshot();
    assert_eq!(snap.total_setsum, J_TOTAL);
    assert_eq!(snap.live_setsum, J_TOTAL);
    assert_eq!(snap.total_records, 1);
}

#[test]
fn v6_setsum_crate_self_test() {
    let mut setsum = Setsum::default();
    for ordinal in [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh",
    ] {
        setsum.insert_vectored(&[format!("this is the {ordinal} value").as_bytes()]);
    }
    assert_eq!(
        encode_setsum_hex(&setsum),
        "c5b3fd4d01f2b8040f54ab7412ca53bbfc990e272a40add1c4ceba6b2fe472d5"
    );
    let mut empty_item = Setsum::default();
    empty_item.insert_vectored(&[]);
    assert_eq!(
        encode_setsum_hex(&empty_item),
        "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"
    );
}

#[test]
fn v7_retention_does_not_change_integrity() {
    let mut integrity = abc_de();
    let before = integrity;
    integrity.evict_before(3);
    assert_eq!(integrity, before);
    let snap = integrity.snapshot(3, 5);
    let expected = StreamIntegritySnapshot {
        live_setsum: ABC_DE_TOTAL.into(),
        evicted_setsum: EMPTY_SETSUM_HEX.into(),
        total_setsum: ABC_DE_TOTAL.into(),
        live_start_offset: 3,
        tail_offset: 5,
        live_records: 2,
        evicted_records: 0,
        total_records: 2,
    };
    assert_eq!(snap, expected);
    let restored = StreamIntegrity::restore(&snap).unwrap();
    assert_eq!(restored, integrity);
    assert_eq!(restored.snapshot(3, 5), expected);
}

#[test]
fn v8_json_stream_after_retention() {
    // The 3-line / 2-line contents are those of spec 02 §7.9 (27 and 18 bytes).
    let mut integrity = StreamIntegrity::new();
    integrity.append_inline(BENCH_J, 0, 27, b"{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n");
    integrity.append_inline(BENCH_J, 27, 45, b"{\"id\":3}\n{\"id\":4}\n");
    integrity.evict_before(18);
    let snap = integrity.snapshot(18, 45);
    let total = "290d6693e800b3811ea6a9067772930c2f6b564bdbb60e9e3200af3ee3ee2889";
    assert_eq!(snap.live_setsum, total);
    assert_eq!(snap.total_setsum, total);
    assert_eq!(snap.evicted_setsum, EMPTY_SETSUM_HEX);
    assert_eq!((snap.live_start_offset, snap.tail_offset), (18, 45));
    assert_eq!(
        (snap.live_records, snap.evicted_records, snap.total_records),
        (2, 0, 2)
    );
}

// ---- §7.8 and spec 07 §10 cases 31–33 ----

#[test]
fn r_evicted_with_live_equal_total_minus_evicted_restores() {
    let base = j_snapshot();
    let x = parse_setsum_hex(ABC_ITEM).unwrap();
    let total = parse_setsum_hex(J_TOTAL).unwrap();
    let mut input = base.clone();
    input.evicted_setsum = ABC_ITEM.into();
    input.live_setsum = encode_setsum_hex(&(total - x));
    assert_ne!(input.live_setsum, J_TOTAL);
    let restored = StreamIntegrity::restore(&input).unwrap();
    let again = restored.snapshot(0, 16);
    assert_eq!(again.live_setsum, J_TOTAL);
    assert_eq!(again.total_setsum, J_TOTAL);
    assert_eq!(again.evicted_setsum, EMPTY_SETSUM_HEX);
    assert_eq!(again, base);
}

#[test]
fn r_evicted_with_live_unchanged_is_mismatch() {
    let mut input = j_snapshot();
    input.evicted_setsum = ABC_ITEM.into();
    assert_eq!(
        StreamIntegrity::restore(&input),
        Err(IntegrityRestoreError::SumMismatch)
    );
}

#[test]
fn r_live_zz_is_mismatch() {
    let mut input = j_snapshot();
    input.live_setsum = "zz".into();
    assert_eq!(
        StreamIntegrity::restore(&input),
        Err(IntegrityRestoreError::InvalidSetsum {
            field: SetsumField::Live
        })
    );
}

#[test]
fn r_uppercase_is_written_back_lowercase() {
    let base = j_snapshot();
    let mut input = base.clone();
    input.live_setsum = J_TOTAL.to_ascii_uppercase();
    input.total_setsum = J_TOTAL.to_ascii_uppercase();
    assert_ne!(input.total_setsum, J_TOTAL);
    let restored = StreamIntegrity::restore(&input).unwrap();
    assert_eq!(restored.snapshot(0, 16), base);
}

#[test]
fn r_counts_and_offsets_are_ignored_except_total_records() {
    let mut input = j_snapshot();
    input.live_records = 99;
    input.evicted_records = 7;
    input.total_records = 42;
    input.live_start_offset = 5;
    input.tail_offset = 77;
    let restored = StreamIntegrity::restore(&input).unwrap();
    let snap = restored.snapshot(0, 16);
    assert_eq!(
        (
            snap.live_records,
            snap.evicted_records,
            snap.total_records,
            snap.live_start_offset,
            snap.tail_offset
        ),
        (42, 0, 42, 0, 16)
    );
    assert_eq!(snap.total_setsum, J_TOTAL);
}

#[test]
fn r_unreduced_live_word_reduces_to_total() {
    let mut input = j_snapshot();
    input.live_setsum = format!("ffffffff{}", zeros(56));
    input.total_setsum = format!("04000000{}", zeros(56));
    input.evicted_setsum = EMPTY_SETSUM_HEX.into();
    let snap = StreamIntegrity::restore(&input).unwrap().snapshot(0, 16);
    assert_eq!(snap.live_setsum, format!("04000000{}", zeros(56)));
    assert_eq!(snap.total_setsum, format!("04000000{}", zeros(56)));
}

#[test]
fn r_unreduced_live_equal_total_is_mismatch() {
    let mut input = j_snapshot();
    input.live_setsum = format!("ffffffff{}", zeros(56));
    input.total_setsum = format!("ffffffff{}", zeros(56));
    input.evicted_setsum = EMPTY_SETSUM_HEX.into();
    assert_eq!(
        StreamIntegrity::restore(&input),
        Err(IntegrityRestoreError::SumMismatch)
    );
}

#[test]
fn r_area07_case32_live_one_is_mismatch() {
    let mut input = j_snapshot();
    input.live_setsum = format!("01{}", zeros(62));
    input.evicted_setsum = zeros(64);
    input.total_setsum = zeros(64);
    assert_eq!(
        StreamIntegrity::restore(&input),
        Err(IntegrityRestoreError::SumMismatch)
    );
}

#[test]
fn r_area07_case33_all_evicted_restores_as_live() {
    let one = format!("01{}", zeros(62));
    let mut input = j_snapshot();
    input.live_setsum = zeros(64);
    input.evicted_setsum = one.clone();
    input.total_setsum = one.clone();
    let snap = StreamIntegrity::restore(&input).unwrap().snapshot(0, 16);
    assert_eq!(snap.live_setsum, one);
    assert_eq!(snap.total_setsum, one);
    assert_eq!(snap.evicted_setsum, EMPTY_SETSUM_HEX);
}

#[test]
fn r_plus_digit_groups_are_accepted() {
    let mut input = j_snapshot();
    input.live_setsum = format!("+f{}", zeros(62));
    input.total_setsum = format!("+f{}", zeros(62));
    input.evicted_setsum = EMPTY_SETSUM_HEX.into();
    let snap = StreamIntegrity::restore(&input).unwrap().snapshot(0, 16);
    assert_eq!(snap.total_setsum, format!("0f{}", zeros(62)));
}

#[test]
fn r_each_field_is_parsed() {
    for (field, which) in [
        (SetsumField::Live, 0),
        (SetsumField::Evicted, 1),
        (SetsumField::Total, 2),
    ] {
        let mut input = j_snapshot();
        let bad = format!("0é{}", zeros(61));
        assert_eq!(bad.len(), 64);
        match which {
            0 => input.live_setsum = bad,
            1 => input.evicted_setsum = bad,
            _ => input.total_setsum = bad,
        }
        assert_eq!(
            StreamIntegrity::restore(&input),
            Err(IntegrityRestoreError::InvalidSetsum { field })
        );
    }
}

#[test]
fn r_zero_setsums_restore_regardless_of_payload() {
    // Spec 07 §5.9 step 5: setsums are not compared with the payload.
    let mut input = j_snapshot();
    input.live_setsum = zeros(64);
    input.total_setsum = zeros(64);
    let restored = StreamIntegrity::restore(&input).unwrap();
    assert_eq!(restored.total_setsum_hex(), zeros(64));
    assert_eq!(restored.total_records(), 1);
}
