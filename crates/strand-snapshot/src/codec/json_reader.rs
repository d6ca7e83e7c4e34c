//! A single-pass reader for the snapshot's JSON: it walks the snapshot and
//! entry objects itself, parses byte vectors straight from the text, and
//! hands every other value to serde_json. It either returns exactly what
//! `serde_json::from_slice::<StreamSnapshot>` would, or gives up (`None`)
//! and lets the caller run serde_json: escaped keys, duplicate keys,
//! missing required fields, unusual number forms and every error take that
//! path, so the reader never has to reproduce serde's messages.

use serde::de::{DeserializeOwned, IgnoredAny};
use strand_model::{
    ProducerAppendRecord, ProducerReceipt, ProducerSnapshot, StreamVisibleSnapshot,
};

use super::byte_array::parse_byte_array_at;
use crate::wire::{StreamSnapshot, StreamSnapshotEntry};

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
}

/// Stores a field's value; a second occurrence gives up (serde rejects
/// duplicate fields).
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.text.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.pos += 1)
    }

    /// One value of type `T`, parsed by serde_json in place.
    fn value<T: DeserializeOwned>(&mut self) -> Option<T> {
        self.ws();
        let rest = self.text.get(self.pos..)?;
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        let value = values.next()?.ok()?;
        self.pos += values.byte_offset();
        Some(value)
    }

    /// A plain non-negative integer that fits `u64` (serde_json's `u64`
    /// rules: no sign, fraction, exponent or leading zero).
    fn u64(&mut self) -> Option<u64> {
        self.ws();
        let rest = self.text.get(self.pos..)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        if matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let mut value: u64 = 0;
        for &d in &rest[..digits] {
            value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        self.pos += digits;
        Some(value)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        let rest = self.text.get(self.pos..)?;
        if !rest.starts_with(word) || rest.get(word.len()).is_some_and(u8::is_ascii_alphanumeric) {
            return None;
        }
        self.pos += word.len();
        Some(())
    }

    fn bool(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => None,
        }
    }

    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|()| None);
        }
        self.u64().map(Some)
    }

    /// A string without escapes.
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let rest = self.text.get(self.pos..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        let s = std::str::from_utf8(&rest[..len]).ok()?.to_owned();
        self.pos += len + 1;
        Some(s)
    }

    /// A JSON array, each element read by `item`.
    fn array<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.eat(b'[')?;
        let mut out = Vec::new();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(out);
        }
        loop {
            out.push(item(self)?);
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Some(out);
                }
                _ => return None,
            }
        }
    }

    fn append_record(&mut self) -> Option<ProducerAppendRecord> {
        let (mut start_offset, mut next_offset, mut closed) = (None, None, None);
        let (mut record_start, mut record_next) = (None, None);
        self.object(|r, key| match key {
            b"start_offset" => set(&mut start_offset, r.u64()?),
            b"next_offset" => set(&mut next_offset, r.u64()?),
            b"closed" => set(&mut closed, r.bool()?),
            b"record_start" => set(&mut record_start, r.opt_u64()?),
            b"record_next" => set(&mut record_next, r.opt_u64()?),
            _ => r.skip(),
        })?;
        Some(ProducerAppendRecord {
            start_offset: start_offset?,
            next_offset: next_offset?,
            closed: closed?,
            record_start: record_start.flatten(),
            record_next: record_next.flatten(),
        })
    }

    fn receipt(&mut self) -> Option<ProducerReceipt> {
        let (mut producer_seq, mut start_offset, mut next_offset) = (None, None, None);
        let (mut closed, mut items) = (None, None);
        self.object(|r, key| match key {
            b"producer_seq" => set(&mut producer_seq, r.u64()?),
            b"start_offset" => set(&mut start_offset, r.u64()?),
            b"next_offset" => set(&mut next_offset, r.u64()?),
            b"closed" => set(&mut closed, r.bool()?),
            b"items" => set(&mut items, r.array(Self::append_record)?),
            _ => r.skip(),
        })?;
        Some(ProducerReceipt {
            producer_seq: producer_seq?,
            start_offset: start_offset?,
            next_offset: next_offset?,
            closed: closed?,
            items: items?,
        })
    }

    fn producer(&mut self) -> Option<ProducerSnapshot> {
        let (mut producer_id, mut producer_epoch, mut producer_seq) = (None, None, None);
        let (mut last_start_offset, mut last_next_offset, mut last_closed) = (None, None, None);
        let (mut last_items, mut receipts) = (None, None);
        self.object(|r, key| match key {
            b"producer_id" => set(&mut producer_id, r.string()?),
            b"producer_epoch" => set(&mut producer_epoch, r.u64()?),
            b"producer_seq" => set(&mut producer_seq, r.u64()?),
            b"last_start_offset" => set(&mut last_start_offset, r.u64()?),
            b"last_next_offset" => set(&mut last_next_offset, r.u64()?),
            b"last_closed" => set(&mut last_closed, r.bool()?),
            b"last_items" => set(&mut last_items, r.array(Self::append_record)?),
            b"receipts" => set(&mut receipts, r.array(Self::receipt)?),
            _ => r.skip(),
        })?;
        Some(ProducerSnapshot {
            producer_id: producer_id?,
            producer_epoch: producer_epoch?,
            producer_seq: producer_seq?,
            last_start_offset: last_start_offset?,
            last_next_offset: last_next_offset?,
            last_closed: last_closed?,
            last_items: last_items?,
            receipts: receipts.unwrap_or_default(),
        })
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        self.ws();
        let (bytes, end) = parse_byte_array_at(self.text, self.pos)?;
        self.pos = end;
        Some(bytes)
    }

    /// A key without escapes, and its colon.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = self.text.get(self.pos..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        let key = &rest[..len];
        self.pos += len + 1;
        self.eat(b':')?;
        Some(key)
    }

    /// Walks an object, handing each key to `field`.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            let key = self.key()?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn skip(&mut self) -> Option<()> {
        self.value::<IgnoredAny>().map(drop)
    }

    fn visible_snapshot(&mut self) -> Option<Option<StreamVisibleSnapshot>> {
        if self.peek()? == b'n' {
            return self.value::<Option<StreamVisibleSnapshot>>();
        }
        let (mut offset, mut content_type, mut payload, mut digest) = (None, None, None, None);
        self.object(|r, key| match key {
            b"offset" => set(&mut offset, r.value()?),
            b"content_type" => set(&mut content_type, r.value()?),
            b"payload" => set(&mut payload, r.bytes()?),
            b"digest" => set(&mut digest, r.value()?),
            _ => r.skip(),
        })?;
        Some(Some(StreamVisibleSnapshot {
            offset: offset?,
            content_type: content_type?,
            payload: payload?,
            digest: digest.unwrap_or_default(),
        }))
    }

    fn entry(&mut self) -> Option<StreamSnapshotEntry> {
        let (mut metadata, mut attrs, mut hot_start_offset, mut payload) = (None, None, None, None);
        let (mut hot_segments, mut cold_frontier_offset, mut cold_index_generation) =
            (None, None, None);
        let (mut cold_chunks, mut external_segments, mut message_records) = (None, None, None);
        let (mut record_index, mut integrity, mut retained_offset) = (None, None, None);
        let (mut visible_snapshot, mut producer_states, mut raw_frontier) = (None, None, None);
        let mut fork = None;
        self.object(|r, key| match key {
            b"metadata" => set(&mut metadata, r.value()?),
            b"attrs" => set(&mut attrs, r.value()?),
            b"hot_start_offset" => set(&mut hot_start_offset, r.value()?),
            b"payload" => set(&mut payload, r.bytes()?),
            b"hot_segments" => set(&mut hot_segments, r.value()?),
            b"cold_frontier_offset" => set(&mut cold_frontier_offset, r.value()?),
            b"cold_index_generation" => set(&mut cold_index_generation, r.value()?),
            b"cold_chunks" => set(&mut cold_chunks, r.value()?),
            b"external_segments" => set(&mut external_segments, r.value()?),
            b"message_records" => set(&mut message_records, r.value()?),
            b"record_index" => set(&mut record_index, r.value()?),
            b"integrity" => set(&mut integrity, r.value()?),
            b"retained_offset" => set(&mut retained_offset, r.value()?),
            b"visible_snapshot" => set(&mut visible_snapshot, r.visible_snapshot()?),
            b"producer_states" => set(&mut producer_states, r.array(Self::producer)?),
            b"cold_raw_frontier_offset" => set(&mut raw_frontier, r.value()?),
            b"fork" => set(&mut fork, r.value()?),
            _ => r.skip(),
        })?;
        Some(StreamSnapshotEntry {
            metadata: metadata?,
            attrs: attrs.flatten(),
            hot_start_offset: hot_start_offset?,
            payload: payload?,
            hot_segments: hot_segments?,
            cold_frontier_offset: cold_frontier_offset.unwrap_or_default(),
            cold_index_generation: cold_index_generation.unwrap_or_default(),
            cold_chunks: cold_chunks?,
            external_segments: external_segments?,
            message_records: message_records?,
            record_index: record_index.flatten(),
            integrity: integrity?,
            retained_offset: retained_offset.flatten(),
            visible_snapshot: visible_snapshot.flatten(),
            producer_states: producer_states?,
            cold_raw_frontier_offset: raw_frontier.flatten(),
            fork: fork.flatten(),
        })
    }
}

/// Reads a whole snapshot, or `None` when serde_json must decide.
pub(crate) fn read_snapshot(text: &[u8]) -> Option<StreamSnapshot> {
    let mut r = Reader { text, pos: 0 };
    let (mut buckets, mut erased_buckets, mut streams) = (None, None, None);
    let (mut pending_cold_gc, mut next_cold_gc_seq, mut owners) = (None, None, None);
    let (mut bucket_usage, mut bucket_quotas, mut machine_options) = (None, None, None);
    let (mut fork_unpins, mut next_fork_pin) = (None, None);
    r.object(|r, key| match key {
        b"buckets" => set(&mut buckets, r.value()?),
        b"erased_buckets" => set(&mut erased_buckets, r.value()?),
        b"streams" => set(&mut streams, r.array(Reader::entry)?),
        b"pending_cold_gc" => set(&mut pending_cold_gc, r.value()?),
        b"next_cold_gc_seq" => set(&mut next_cold_gc_seq, r.value()?),
        b"shared_cold_object_owners" => set(&mut owners, r.value()?),
        b"bucket_usage" => set(&mut bucket_usage, r.value()?),
        b"bucket_quotas" => set(&mut bucket_quotas, r.value()?),
        b"machine_options" => set(&mut machine_options, r.value()?),
        b"fork_unpins" => set(&mut fork_unpins, r.value()?),
        b"next_fork_pin" => set(&mut next_fork_pin, r.value()?),
        _ => r.skip(),
    })?;
    r.ws();
    if r.pos != text.len() {
        return None;
    }
    Some(StreamSnapshot {
        buckets: buckets?,
        erased_buckets: erased_buckets.unwrap_or_default(),
        streams: streams?,
        pending_cold_gc: pending_cold_gc.unwrap_or_default(),
        next_cold_gc_seq: next_cold_gc_seq.unwrap_or_default(),
        shared_cold_object_owners: owners.unwrap_or_default(),
        bucket_usage: bucket_usage.unwrap_or_default(),
        bucket_quotas: bucket_quotas.unwrap_or_default(),
        machine_options: machine_options.flatten(),
        fork_unpins: fork_unpins.unwrap_or_default(),
        next_fork_pin: next_fork_pin.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::read_snapshot;
    use crate::wire::StreamSnapshot;

    fn same_as_serde(text: &str) {
        let serde: Result<StreamSnapshot, _> = serde_json::from_str(text);
        // `None` means serde_json decides.
        if let Some(fast) = read_snapshot(text.as_bytes()) {
            assert_eq!(Some(fast), serde.ok(), "{text}");
        }
    }

    #[test]
    fn empty_and_default_forms() {
        same_as_serde(r#"{"buckets":[],"streams":[]}"#);
        same_as_serde(r#" { "buckets" : [ "a" ] , "streams" : [ ] , "x" : {"y":[1,{}]} } "#);
        assert!(read_snapshot(br#"{"buckets":[],"streams":[]}"#).is_some());
    }

    #[test]
    fn takes_the_fast_path_on_full_snapshots() {
        // A complete modern snapshot (every entry field, producers with
        // receipts, record bounds, visible snapshot), pretty and compact.
        let pretty = include_str!("../../../../tests/fixtures/legacy/modern-complete.json");
        let serde: StreamSnapshot = serde_json::from_str(pretty).unwrap_or_default();
        assert!(!serde.streams.is_empty());
        assert_eq!(read_snapshot(pretty.as_bytes()), Some(serde.clone()));
        let compact = serde_json::to_vec(&serde).unwrap_or_default();
        assert_eq!(read_snapshot(&compact), Some(serde));
    }

    #[test]
    fn gives_up_where_serde_must_decide() {
        for text in [
            r#"{"buckets":[],"streams":[],"buckets":[]}"#,
            r#"{"streams":[]}"#,
            r#"{"buck\u0065ts":[],"streams":[]}"#,
            r#"{"buckets":[],"streams":[]} x"#,
            r#"{"buckets":[],"streams":[{}]}"#,
        ] {
            assert!(read_snapshot(text.as_bytes()).is_none(), "{text}");
        }
    }
}
