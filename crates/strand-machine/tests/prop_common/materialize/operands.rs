//! Operand generators: content types, payloads, external refs, record
//! ends, stream-seq tokens, producers, TTLs, attrs, offsets, flush chunks,
//! compaction inputs and retention offsets.

use bytes::Bytes;
use serde_json::{Map, Value};
use strand_machine::{StreamCommand, StreamStateMachine};
use strand_model::{
    BucketStreamId, ColdChunkRef, ExternalPayloadRef, ProducerRequest, StreamAttrs,
};

use super::{CONTENT_TYPES, Materializer, View};
use crate::prop_common::{Ent, JSON, Mode};

impl Materializer {
    pub(super) fn content_type(&self, e: &mut Ent<'_>, own: &'static str) -> String {
        if self.odd(e, 3, 35) {
            e.pick(&CONTENT_TYPES).to_string()
        } else {
            own.to_string()
        }
    }

    /// A payload suited to content type `ct`: JSON lines for JSON, bytes
    /// otherwise; sometimes empty or malformed.
    pub(super) fn payload(&self, e: &mut Ent<'_>, ct: &str) -> Vec<u8> {
        if self.odd(e, 3, 15) {
            return Vec::new();
        }
        let json = ct.starts_with(JSON);
        let flip = self.odd(e, 2, 20);
        if json != flip {
            let mut out = Vec::new();
            for _ in 0..=e.below(3) {
                out.extend_from_slice(format!("{{\"i\":{}}}\n", e.below(1000)).as_bytes());
            }
            if self.odd(e, 2, 20) {
                out.pop();
            }
            out
        } else {
            let len = 1 + e.below(12);
            (0..len).map(|_| e.word() as u8).collect()
        }
    }

    pub(super) fn external(&self, e: &mut Ent<'_>) -> ExternalPayloadRef {
        let payload_len = 1 + e.below(20) as u64;
        let mut r = ExternalPayloadRef {
            s3_path: e.pick(&["ext/a", "ext/b"]).to_string(),
            payload_len,
            object_size: payload_len + e.below(3) as u64,
        };
        if self.odd(e, 2, 35) {
            match e.below(4) {
                0 => r.s3_path = e.pick(&["", "  "]).to_string(),
                1 if self.small_sizes => r.payload_len = 0,
                1 => r.payload_len = e.pick(&[0, u64::MAX]),
                2 => r.object_size = r.payload_len.saturating_sub(1),
                _ if self.small_sizes => r.object_size = e.extreme(),
                _ => (r.payload_len, r.object_size) = (e.extreme(), e.extreme()),
            }
        }
        r
    }

    /// Relative record ends for an external payload of `len` bytes.
    pub(super) fn record_ends(&self, e: &mut Ent<'_>, ct: &str, len: u64) -> Vec<u64> {
        if self.odd(e, 3, 30) {
            return (0..e.below(4))
                .map(|_| e.pick(&[0, 1, 2, len, len.saturating_add(1)]))
                .collect();
        }
        if !ct.starts_with(JSON) {
            return Vec::new();
        }
        if len >= 2 && e.chance(50) {
            vec![len / 2, len]
        } else {
            vec![len]
        }
    }

    pub(super) fn stream_seq(&mut self, e: &mut Ent<'_>) -> Option<String> {
        if self.odd(e, 2, 15) {
            return Some(e.pick(&["", "0", "zzz"]).to_string());
        }
        if e.chance(12) {
            self.seq_counter += 1;
            Some(format!("{:08}", self.seq_counter))
        } else {
            None
        }
    }

    pub(super) fn producer(
        &self,
        e: &mut Ent<'_>,
        v: &mut View<'_>,
        id: &BucketStreamId,
    ) -> Option<ProducerRequest> {
        if !e.chance(45) {
            return None;
        }
        let producer_id = if self.odd(e, 1, 15) {
            e.pick(&["  ", "", "p3"]).to_string()
        } else {
            e.pick(&["p1", "p1", "p1", "p2"]).to_string()
        };
        if self.odd(e, 2, 30) {
            return Some(ProducerRequest {
                producer_id,
                producer_epoch: e.extreme(),
                producer_seq: e.extreme(),
            });
        }
        let state = v.entry(id).and_then(|entry| {
            entry
                .producer_states
                .into_iter()
                .find(|p| p.producer_id == producer_id)
        });
        let (producer_epoch, producer_seq) = match state {
            None => (e.below(2) as u64, 0),
            Some(s) => match e.below(10) {
                0..=6 => (s.producer_epoch, s.producer_seq.saturating_add(1)),
                7 | 8 => (s.producer_epoch, s.producer_seq),
                _ => (s.producer_epoch.saturating_add(1), 0),
            },
        };
        Some(ProducerRequest {
            producer_id,
            producer_epoch,
            producer_seq,
        })
    }

    pub(super) fn ttl(&self, e: &mut Ent<'_>) -> (Option<u64>, Option<u64>) {
        if self.odd(e, 1, 20) {
            return (
                e.chance(50).then(|| e.extreme()),
                e.chance(50).then(|| e.extreme()),
            );
        }
        match e.below(10) {
            0..=7 => (None, None),
            8 => (Some(1 + e.below(5) as u64), None),
            _ => (
                None,
                Some(self.now.saturating_add(1_000 + e.below(9_000) as u64)),
            ),
        }
    }

    pub(super) fn attrs(&self, e: &mut Ent<'_>) -> Option<StreamAttrs> {
        match e.below(if self.mode == Mode::Wild { 6 } else { 5 }) {
            0 | 1 => None,
            2 => Some(StreamAttrs::default()),
            3 => Some(StreamAttrs {
                title: Some(format!("t{}", e.below(3))),
                metadata: Map::new(),
            }),
            4 => {
                let mut metadata = Map::new();
                metadata.insert("k".into(), Value::from(e.below(3)));
                Some(StreamAttrs {
                    title: None,
                    metadata,
                })
            }
            _ => Some(StreamAttrs {
                title: Some("x".repeat(17_000)),
                metadata: Map::new(),
            }),
        }
    }

    /// An offset of stream `id`: mostly a meaningful one (tail, hot start,
    /// retained, checkpoint, cold frontier, a message end), sometimes odd.
    pub(super) fn offset(&self, e: &mut Ent<'_>, v: &mut View<'_>, id: &BucketStreamId) -> u64 {
        let tail = v.tail(id);
        let entry = v.entry(id);
        match e.below(11) {
            0 | 1 => tail,
            2 => v.m.hot_start_offset(id),
            3 => v.m.retained_offset(id),
            4 => entry
                .and_then(|x| x.visible_snapshot.map(|s| s.offset))
                .unwrap_or(tail),
            5 => entry.map_or(0, |x| x.cold_frontier_offset),
            6 => {
                let ends: Vec<u64> = entry
                    .map(|x| x.message_records.iter().map(|r| r.end_offset).collect())
                    .unwrap_or_default();
                if ends.is_empty() { tail } else { e.pick(&ends) }
            }
            7 => tail.saturating_sub(1),
            8 => tail.saturating_add(1),
            9 => e.word() % tail.saturating_add(1),
            _ => e.extreme(),
        }
    }

    pub(super) fn usize_arg(&self, e: &mut Ent<'_>) -> usize {
        e.pick(&[0, 1, 2, 3, 7, 16, 1 << 20, usize::MAX])
    }

    pub(super) fn record_match(
        &self,
        e: &mut Ent<'_>,
        m: &StreamStateMachine,
        id: &BucketStreamId,
    ) -> Option<u64> {
        if !e.chance(15) {
            return None;
        }
        match m.record_range(id) {
            Ok(Some(r)) if !self.odd(e, 10, 40) => Some(r.next_record),
            _ if self.odd(e, 30, 60) => Some(e.extreme()),
            _ => None,
        }
    }

    pub(super) fn append_cmd(
        &mut self,
        e: &mut Ent<'_>,
        v: &mut View<'_>,
        id: BucketStreamId,
        own: &'static str,
    ) -> StreamCommand {
        let ct = self.content_type(e, own);
        let payload = self.payload(e, &ct);
        let content_type = if self.odd(e, 2, 15) { None } else { Some(ct) };
        StreamCommand::Append {
            close_after: e.chance(2),
            stream_seq: self.stream_seq(e),
            producer: self.producer(e, v, &id),
            now_ms: self.now_ms(e),
            record_match: self.record_match(e, v.m, &id),
            stream_id: id,
            content_type,
            payload: Bytes::from(payload),
        }
    }

    /// A chunk for `FlushCold`: usually the planned hot prefix.
    pub(super) fn flush_chunk(
        &self,
        e: &mut Ent<'_>,
        m: &StreamStateMachine,
        id: &BucketStreamId,
    ) -> ColdChunkRef {
        let max = e.pick(&[usize::MAX, 1, 4, 16]);
        let shared = e.chance(35);
        let path = e.pick(&["obj/a", "obj/b", "obj/c"]).to_string();
        let planned = m.plan_cold_flush(id, 0, max).ok().flatten();
        let mut c = match planned {
            Some(p) => {
                let len = p.end_offset - p.start_offset;
                let object_offset = if shared { e.below(4) as u64 } else { 0 };
                ColdChunkRef {
                    start_offset: p.start_offset,
                    end_offset: p.end_offset,
                    s3_path: path,
                    object_size: object_offset
                        .saturating_add(len)
                        .saturating_add(e.below(2) as u64),
                    object_offset,
                    shared_object: shared,
                    payload_digest: if e.chance(20) {
                        String::new()
                    } else {
                        p.payload_digest
                    },
                }
            }
            None => {
                let start = e.below(8) as u64;
                let end = start + 1 + e.below(8) as u64;
                ColdChunkRef {
                    start_offset: start,
                    end_offset: end,
                    s3_path: path,
                    object_size: end - start,
                    object_offset: 0,
                    shared_object: shared,
                    payload_digest: String::new(),
                }
            }
        };
        if self.odd(e, 3, 40) {
            match e.below(7) {
                0 => c.s3_path = e.pick(&["", " "]).to_string(),
                1 => c.object_size = 0,
                2 => c.end_offset = c.start_offset,
                3 => c.object_offset = e.extreme(),
                4 => c.end_offset = e.extreme(),
                5 => c.payload_digest = "00".repeat(32),
                _ => c.start_offset = c.start_offset.saturating_add(1),
            }
        }
        c
    }

    /// Arguments for `CompactCold`: a run of stored shared chunks, or a
    /// made-up run of raw chunks.
    pub(super) fn compact(
        &self,
        e: &mut Ent<'_>,
        m: &StreamStateMachine,
        id: &BucketStreamId,
    ) -> (Vec<ColdChunkRef>, ColdChunkRef) {
        let stored = m.cold_chunks(id);
        let mut old = Vec::new();
        if !stored.is_empty() && e.below(3) != 0 {
            let first = e.below(stored.len());
            old.push(stored[first].clone());
            for c in &stored[first + 1..] {
                if old.len() > e.below(3) || c.start_offset != old[old.len() - 1].end_offset {
                    break;
                }
                old.push(c.clone());
            }
        } else {
            let mut start = e.below(8) as u64;
            for i in 0..2 + e.below(2) {
                let len = 1 + e.below(5) as u64;
                old.push(ColdChunkRef {
                    start_offset: start,
                    end_offset: start + len,
                    s3_path: format!("raw/{}", i + e.below(2)),
                    object_size: len,
                    ..ColdChunkRef::default()
                });
                start += len;
            }
        }
        let start = old[0].start_offset;
        let end = old[old.len() - 1].end_offset;
        let mut replacement = ColdChunkRef {
            start_offset: start,
            end_offset: end,
            s3_path: e.pick(&["cmp/a", "cmp/b"]).to_string(),
            object_size: old.iter().map(|c| c.end_offset - c.start_offset).sum(),
            ..ColdChunkRef::default()
        };
        if self.odd(e, 3, 40) {
            match e.below(5) {
                0 => replacement.object_size = e.extreme(),
                1 => replacement.shared_object = true,
                2 => old.reverse(),
                3 => old.truncate(1),
                _ => old.clear(),
            }
        }
        (old, replacement)
    }

    pub(super) fn retention_offset(
        &self,
        e: &mut Ent<'_>,
        v: &mut View<'_>,
        id: &BucketStreamId,
    ) -> u64 {
        let entry = v.entry(id);
        let mut r = if e.below(3) == 0 || self.odd(e, 5, 40) {
            self.offset(e, v, id)
        } else {
            let vis = entry
                .as_ref()
                .and_then(|x| x.visible_snapshot.as_ref().map(|s| s.offset));
            let cold = entry.as_ref().map_or(0, |x| x.cold_frontier_offset);
            match (vis, e.below(2)) {
                (Some(s), 0) => s,
                (Some(s), _) => s.min(cold),
                (None, _) => cold,
            }
        };
        // Spec 07 P2: a stream with raw frontier 0 and retained offset > 0
        // behaves differently after restore. Keep "retained > 0 implies raw
        // frontier > 0": with that invariant, raw > 0 exactly when the
        // snapshot's cold_frontier_offset (= max(raw, retained)) is > 0.
        if self.avoid_p2 && entry.is_some_and(|x| x.cold_frontier_offset == 0) {
            r = 0;
        }
        r
    }
}
