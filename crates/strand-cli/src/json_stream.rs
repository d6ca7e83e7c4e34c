//! A streaming reader for JSON snapshots: walks the top-level object with
//! serde and hands each `streams` element to a [`SnapshotSink`] as soon as
//! it is parsed, so only one entry is held at a time.
//!
//! It accepts exactly what `decode_json` (serde's derived
//! `Deserialize for StreamSnapshot`) accepts: `buckets` and `streams`
//! required, every other known field defaulting, unknown fields ignored,
//! a repeated field rejected, nothing but whitespace after the object. A
//! decode error anywhere wins over a validation error, as when the whole
//! document is decoded before restore runs: after the sink rejects
//! something, the rest of the document is still parsed (entries are then
//! dropped unseen).
//!
//! Streaming needs `buckets` (and `erased_buckets`, if present) before
//! `streams`. Both writers put them first (strand and the reference write
//! fields in declaration order; a `serde_json::Value` sorts them, which
//! also puts them first). When `streams` comes before `buckets`, or a
//! non-empty `erased_buckets` comes after `streams`, the reader gives up
//! with [`Streamed::NeedsWholeDocument`] and the caller decodes the whole
//! document instead.

use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use strand::{
    BucketQuotaSnapshot, BucketUsageSnapshot, ColdGcEntry, DecodeError, ForkUnpinSnapshot,
    MachineOptions, SharedColdObjectOwnersSnapshot, SnapshotSink, SnapshotTail,
    StreamSnapshotEntry, StreamSnapshotError,
};

use crate::read::{Location, ReadError};

/// How a streaming read ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streamed {
    /// The whole snapshot went to the sink and `finish` was called.
    Done,
    /// The fields come in an order that cannot be streamed; the sink may
    /// have received part of the snapshot and must be discarded.
    NeedsWholeDocument,
}

/// What the walk keeps beside the sink.
struct Walk<'s, S: ?Sized> {
    sink: &'s mut S,
    /// The first validation error, if any (decoding goes on after it).
    rejected: Option<(Location, StreamSnapshotError)>,
    /// Set when the walk gave up because of the field order.
    reordered: bool,
    /// Entries parsed so far.
    entries: u64,
}

impl<S: SnapshotSink + ?Sized> Walk<'_, S> {
    fn reject(&mut self, at: Location, error: StreamSnapshotError) {
        if self.rejected.is_none() {
            self.rejected = Some((at, error));
        }
    }
}

/// Group-level fields gathered while walking the object.
#[derive(Default)]
struct Group {
    pending_cold_gc: Option<Vec<ColdGcEntry>>,
    next_cold_gc_seq: Option<u64>,
    shared_cold_object_owners: Option<Vec<SharedColdObjectOwnersSnapshot>>,
    bucket_usage: Option<Vec<BucketUsageSnapshot>>,
    bucket_quotas: Option<Vec<BucketQuotaSnapshot>>,
    machine_options: Option<Option<MachineOptions>>,
    fork_unpins: Option<Vec<ForkUnpinSnapshot>>,
    next_fork_pin: Option<u64>,
}

/// Reads a JSON snapshot from `r` into `sink`.
///
/// # Errors
///
/// [`ReadError`] with a decode error (`DecodeError::Json`, carrying
/// serde's line and column) or the sink's first validation error.
pub(crate) fn decode<R: Read, S: SnapshotSink + ?Sized>(
    r: R,
    sink: &mut S,
) -> Result<Streamed, ReadError> {
    let mut walk = Walk {
        sink,
        rejected: None,
        reordered: false,
        entries: 0,
    };
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(r));
    let walked = de::Deserializer::deserialize_map(&mut de, TopVisitor { walk: &mut walk })
        .and_then(|group| {
            de.end()?;
            Ok(group)
        });
    if walk.reordered {
        return Ok(Streamed::NeedsWholeDocument);
    }
    let group = walked.map_err(|e| ReadError::decode(DecodeError::Json(e)))?;
    if let Some((at, error)) = walk.rejected {
        return Err(ReadError::invalid(at, error));
    }
    walk.sink
        .finish(SnapshotTail {
            pending_cold_gc: group.pending_cold_gc.unwrap_or_default(),
            next_cold_gc_seq: group.next_cold_gc_seq.unwrap_or_default(),
            shared_cold_object_owners: group.shared_cold_object_owners.unwrap_or_default(),
            bucket_usage: group.bucket_usage.unwrap_or_default(),
            bucket_quotas: group.bucket_quotas.unwrap_or_default(),
            machine_options: group.machine_options.flatten(),
            fork_unpins: group.fork_unpins.unwrap_or_default(),
            next_fork_pin: group.next_fork_pin.unwrap_or_default(),
        })
        .map_err(|e| ReadError::invalid(Location::Group, e))?;
    Ok(Streamed::Done)
}

/// Stores a field's value, rejecting a repeated field like serde's derive.
fn set_once<'de, A: MapAccess<'de>, T: de::Deserialize<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(A::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

struct TopVisitor<'w, 's, S: ?Sized> {
    walk: &'w mut Walk<'s, S>,
}

/// The error that stops the walk when the field order cannot be streamed
/// (replaced by [`Streamed::NeedsWholeDocument`]).
fn give_up<E: de::Error>() -> E {
    E::custom("snapshot fields are not in a streamable order")
}

impl<'de, S: SnapshotSink + ?Sized> Visitor<'de> for TopVisitor<'_, '_, S> {
    type Value = Group;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct StreamSnapshot")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Group, A::Error> {
        let walk = self.walk;
        let mut buckets: Option<Vec<String>> = None;
        let mut erased: Option<Vec<String>> = None;
        let mut seen_buckets = false;
        let mut seen_streams = false;
        let mut group = Group::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "buckets" => {
                    if seen_buckets {
                        return Err(A::Error::duplicate_field("buckets"));
                    }
                    seen_buckets = true;
                    buckets = Some(map.next_value()?);
                }
                "erased_buckets" => {
                    set_once(&mut erased, &mut map, "erased_buckets")?;
                    if seen_streams && erased.as_ref().is_some_and(|e| !e.is_empty()) {
                        walk.reordered = true;
                        return Err(give_up());
                    }
                }
                "streams" => {
                    if seen_streams {
                        return Err(A::Error::duplicate_field("streams"));
                    }
                    seen_streams = true;
                    let Some(buckets) = buckets.take() else {
                        walk.reordered = true;
                        return Err(give_up());
                    };
                    let erased = erased.clone().unwrap_or_default();
                    if let Err(e) = walk.sink.begin(buckets, erased) {
                        walk.reject(Location::Buckets, e);
                    }
                    map.next_value_seed(EntriesSeed { walk: &mut *walk })?;
                }
                "pending_cold_gc" => {
                    set_once(&mut group.pending_cold_gc, &mut map, "pending_cold_gc")?;
                }
                "next_cold_gc_seq" => {
                    set_once(&mut group.next_cold_gc_seq, &mut map, "next_cold_gc_seq")?;
                }
                "shared_cold_object_owners" => set_once(
                    &mut group.shared_cold_object_owners,
                    &mut map,
                    "shared_cold_object_owners",
                )?,
                "bucket_usage" => set_once(&mut group.bucket_usage, &mut map, "bucket_usage")?,
                "bucket_quotas" => set_once(&mut group.bucket_quotas, &mut map, "bucket_quotas")?,
                "machine_options" => {
                    set_once(&mut group.machine_options, &mut map, "machine_options")?;
                }
                "fork_unpins" => set_once(&mut group.fork_unpins, &mut map, "fork_unpins")?,
                "next_fork_pin" => set_once(&mut group.next_fork_pin, &mut map, "next_fork_pin")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !seen_buckets {
            return Err(A::Error::missing_field("buckets"));
        }
        if !seen_streams {
            return Err(A::Error::missing_field("streams"));
        }
        Ok(group)
    }
}

/// Deserializes the `streams` array, feeding each element to the sink.
struct EntriesSeed<'w, 's, S: ?Sized> {
    walk: &'w mut Walk<'s, S>,
}

impl<'de, S: SnapshotSink + ?Sized> DeserializeSeed<'de> for EntriesSeed<'_, '_, S> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, S: SnapshotSink + ?Sized> Visitor<'de> for EntriesSeed<'_, '_, S> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let walk = self.walk;
        while let Some(entry) = seq.next_element::<StreamSnapshotEntry>()? {
            let index = walk.entries;
            walk.entries += 1;
            if walk.rejected.is_none()
                && let Err(e) = walk.sink.entry(entry)
            {
                walk.reject(Location::Entry(index), e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use strand::StreamSnapshot;
    use strand::{CollectSink, decode_json};

    use super::*;
    use crate::read::ReadErrorKind;

    fn streamed(text: &str) -> (Result<Streamed, ReadError>, StreamSnapshot) {
        let mut sink = CollectSink::new();
        let result = decode(text.as_bytes(), &mut sink);
        (result, sink.into_snapshot())
    }

    fn decode_message(result: Result<Streamed, ReadError>) -> String {
        match *result.unwrap_err().kind {
            ReadErrorKind::Decode(DecodeError::Json(e)) => e.to_string(),
            other => panic!("expected a JSON decode error, got {other:?}"),
        }
    }

    const ENTRY: &str = r#"{"metadata":{"stream_id":{"bucket_id":"a","stream_id":"s"},"content_type":"text/plain","status":"Open","tail_offset":2,"last_stream_seq":null,"stream_ttl_seconds":null,"stream_expires_at_ms":null,"created_at_ms":1,"last_ttl_touch_at_ms":1},"hot_start_offset":0,"payload":[104,105],"hot_segments":[],"cold_chunks":[],"external_segments":[],"message_records":[{"start_offset":0,"end_offset":2}],"integrity":{"live_setsum":"","evicted_setsum":"","total_setsum":"","live_start_offset":0,"tail_offset":2,"live_records":1,"evicted_records":0,"total_records":1},"visible_snapshot":null,"producer_states":[]}"#;

    #[test]
    fn matches_decode_json_on_canonical_and_sorted_orders() {
        for text in [
            format!(
                r#"{{"buckets":["a"],"erased_buckets":["z"],"streams":[{ENTRY}],"next_cold_gc_seq":7,"x":{{"y":[1]}}}}"#
            ),
            format!(
                r#" {{"bucket_quotas":[],"buckets":["a"],"next_cold_gc_seq":7,"streams":[{ENTRY},{ENTRY}]}} "#
            ),
            r#"{"buckets":[],"streams":[]}"#.to_owned(),
        ] {
            let whole: StreamSnapshot = decode_json(text.as_bytes()).unwrap();
            let (result, collected) = streamed(&text);
            assert_eq!(result.unwrap(), Streamed::Done, "{text}");
            assert_eq!(collected, whole, "{text}");
        }
    }

    #[test]
    fn unstreamable_orders_ask_for_the_whole_document() {
        for text in [
            format!(r#"{{"streams":[{ENTRY}],"buckets":["a"]}}"#),
            format!(r#"{{"buckets":["a"],"streams":[{ENTRY}],"erased_buckets":["z"]}}"#),
        ] {
            assert_eq!(
                streamed(&text).0.unwrap(),
                Streamed::NeedsWholeDocument,
                "{text}"
            );
        }
        // An empty erased list after the streams changes nothing.
        let text = format!(r#"{{"buckets":["a"],"streams":[{ENTRY}],"erased_buckets":[]}}"#);
        assert_eq!(streamed(&text).0.unwrap(), Streamed::Done);
    }

    #[test]
    fn decode_errors_name_the_field_like_serde_derive() {
        let cases = [
            (r#"{}"#, "missing field `buckets`"),
            (r#"{"buckets":[]}"#, "missing field `streams`"),
            (
                r#"{"buckets":[],"buckets":[],"streams":[]}"#,
                "duplicate field `buckets`",
            ),
            (
                r#"{"buckets":[],"streams":[],"streams":[]}"#,
                "duplicate field `streams`",
            ),
            (
                r#"{"buckets":[],"streams":[],"next_cold_gc_seq":1,"next_cold_gc_seq":2}"#,
                "duplicate field `next_cold_gc_seq`",
            ),
            (r#"{"buckets":[],"streams":[]} x"#, "trailing characters"),
        ];
        for (text, expected) in cases {
            let whole = decode_json(text.as_bytes()).unwrap_err().to_string();
            let message = decode_message(streamed(text).0);
            assert!(message.contains(expected), "{text}: {message}");
            assert!(whole.contains(expected), "{text}: {whole}");
        }
    }

    #[test]
    fn a_later_decode_error_wins_over_an_earlier_rejection() {
        // The entry's bucket is missing (a validation error), but the
        // document is also malformed further on: decoding fails first.
        let text = format!(r#"{{"buckets":[],"streams":[{ENTRY}],"bucket_usage":5}}"#);
        let mut sink = crate::sinks::ValidateSink::default();
        let result = decode(text.as_bytes(), &mut sink);
        assert!(decode_message(result).contains("invalid type: integer `5`"));

        let text = format!(r#"{{"buckets":[],"streams":[{ENTRY}]}}"#);
        let mut sink = crate::sinks::ValidateSink::default();
        match *decode(text.as_bytes(), &mut sink).unwrap_err().kind {
            ReadErrorKind::Invalid { at, source } => {
                assert_eq!(at, Location::Entry(0));
                assert_eq!(
                    source.to_string(),
                    "snapshot stream 'a/s' references a missing bucket"
                );
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
    }
}
