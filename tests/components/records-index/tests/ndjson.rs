//! `strand-records` alone on an NDJSON log written in three appends. The
//! expected offsets are computed here by splitting the text at newlines,
//! independently of the crate.

#![allow(clippy::unwrap_used)]

use component_records_index::NdjsonIndex;

const APPENDS: [&str; 3] = [
    "{\"event\":\"signup\",\"user\":1}\n{\"event\":\"login\",\"user\":1}\n",
    "{\"event\":\"purchase\",\"user\":1,\"items\":[\"a\",\"b\"]}\n",
    "{\"event\":\"logout\",\"user\":1}\n\n{\"note\":\"an empty line is a record too\"}\n",
];

/// Record start offsets by splitting the concatenated text after each `\n`.
fn expected_starts() -> Vec<u64> {
    let text: String = APPENDS.concat();
    let mut starts = Vec::new();
    let mut at = 0u64;
    for line in text.split_inclusive('\n') {
        starts.push(at);
        at += line.len() as u64;
    }
    starts
}

#[test]
fn records_map_to_offsets_and_back() {
    let mut index = NdjsonIndex::new();
    let mut ranges = Vec::new();
    for payload in APPENDS {
        ranges.push(index.append(payload.as_bytes()).unwrap());
    }
    assert_eq!(ranges, [(0, 2), (2, 3), (3, 6)]);
    let starts = expected_starts();
    assert_eq!(starts.len(), 6);
    assert_eq!(index.tail(), APPENDS.concat().len() as u64);
    for (record, &start) in starts.iter().enumerate() {
        let record = record as u64;
        assert_eq!(index.offset_of(record).unwrap(), start);
        assert_eq!(index.record_at(start).unwrap(), record);
    }
    assert_eq!(index.offset_of(6).unwrap(), index.tail());
    assert!(index.offset_of(7).is_err());
    assert!(index.record_at(starts[1] + 1).is_err());
}

#[test]
fn retention_drops_records_without_renumbering() {
    let mut index = NdjsonIndex::new();
    for payload in APPENDS {
        index.append(payload.as_bytes()).unwrap();
    }
    let starts = expected_starts();
    assert_eq!(index.retain_from(starts[3]).unwrap(), 3);
    assert!(index.offset_of(2).is_err());
    assert_eq!(index.offset_of(4).unwrap(), starts[4]);
}

#[test]
fn a_payload_without_its_final_newline_is_refused() {
    let mut index = NdjsonIndex::new();
    assert!(index.append(b"{\"a\":1}").is_err());
    assert_eq!(index.tail(), 0);
}
