//! Property (`docs/forks.md` §8): a fork reads as its source's bytes up to
//! the fork offset followed by its own appends, whatever happens to the
//! source afterwards — appends, close, delete, retention, cold flush and
//! cold GC, TTL expiry — and `restore(snapshot())` (JSON and binary) is the
//! same machine with forks present. No sequence panics.
//!
//! The harness plays the engine's part on one machine (source and forks in
//! one group): it pins and creates forks, delivers the unpin outbox, runs a
//! cold flush and GC worker over an in-memory object map, and reads a
//! stream by following `fork_origin` down the chain with
//! `read_plan_through`. A model keeps each stream's expected bytes from
//! offset 0; reads must return the model's bytes from the stream's first
//! readable offset.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine, write_snapshot};
use strand_model::{BucketStreamId, ColdChunkRef, ColdGcTarget, MachineProfile, StreamReadSegment};
use strand_snapshot::SnapshotFormat;

const STREAMS: usize = 6;

const BUCKET: &str = "bkt1";

fn id(i: usize) -> BucketStreamId {
    BucketStreamId::new(BUCKET, format!("s{i}"))
}

#[derive(Debug, Clone)]
enum Act {
    Create {
        s: usize,
        ttl: bool,
        len: u8,
    },
    Append {
        s: usize,
        len: u8,
    },
    Close {
        s: usize,
    },
    Delete {
        s: usize,
    },
    Fork {
        s: usize,
        from: usize,
        at: Option<u8>,
        sub: u8,
        len: u8,
    },
    Retain {
        s: usize,
    },
    Flush {
        s: usize,
    },
    Gc,
    Deliver,
    Tick {
        ms: u16,
    },
    Restore,
}

fn act() -> impl Strategy<Value = Act> {
    let s = 0..STREAMS;
    prop_oneof![
        3 => (s.clone(), any::<bool>(), 0u8..24).prop_map(|(s, ttl, len)| Act::Create { s, ttl, len }),
        5 => (s.clone(), 1u8..24).prop_map(|(s, len)| Act::Append { s, len }),
        1 => s.clone().prop_map(|s| Act::Close { s }),
        2 => s.clone().prop_map(|s| Act::Delete { s }),
        4 => (s.clone(), s.clone(), proptest::option::of(0u8..=100), 0u8..4, 0u8..6)
            .prop_map(|(s, from, at, sub, len)| Act::Fork { s, from, at, sub, len }),
        1 => s.clone().prop_map(|s| Act::Retain { s }),
        2 => s.clone().prop_map(|s| Act::Flush { s }),
        1 => Just(Act::Gc),
        2 => Just(Act::Deliver),
        1 => (0u16..1500).prop_map(|ms| Act::Tick { ms }),
        1 => Just(Act::Restore),
    ]
}

/// Expected bytes of a stream from offset 0 (inherited bytes included).
#[derive(Debug, Clone, Default)]
struct Model {
    bytes: Vec<u8>,
}

struct World {
    m: StreamStateMachine,
    now: u64,
    store: BTreeMap<String, Vec<u8>>,
    /// The cold index of exclusive chunks the machine does not keep:
    /// stream → (start, end, path, incarnation).
    index: BTreeMap<usize, Vec<(u64, u64, String, u64)>>,
    model: BTreeMap<usize, Model>,
    /// Which creation of its id each live stream is.
    incarnations: BTreeMap<usize, u64>,
    serial: u64,
}

fn payload(tag: u64, len: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| b'a' + u8::try_from((tag + u64::from(i)) % 26).unwrap())
            .collect::<Vec<u8>>(),
    )
}

impl World {
    fn new() -> Self {
        let mut m = StreamStateMachine::with_profile(MachineProfile::Corrected);
        m.apply(StreamCommand::CreateBucket {
            bucket_id: BUCKET.into(),
        });
        Self {
            m,
            now: 1_000,
            store: BTreeMap::new(),
            index: BTreeMap::new(),
            model: BTreeMap::new(),
            incarnations: BTreeMap::new(),
            serial: 0,
        }
    }

    fn tag(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    fn tail(&self, s: usize) -> Option<u64> {
        self.m
            .snapshot_entries()
            .find(|e| e.metadata.stream_id == id(s))
            .map(|e| e.metadata.tail_offset)
    }

    fn step(&mut self, act: &Act) {
        match *act {
            Act::Create { s, ttl, len } => {
                let tag = self.tag();
                let bytes = payload(tag, len);
                let r = self.m.apply(StreamCommand::CreateStream {
                    stream_id: id(s),
                    content_type: "text/plain".into(),
                    initial_payload: bytes.clone(),
                    close_after: false,
                    stream_seq: None,
                    producer: None,
                    stream_ttl_seconds: ttl.then_some(1),
                    stream_expires_at_ms: None,
                    attrs: None,
                    now_ms: self.now,
                });
                if matches!(r, StreamResponse::Created { .. }) {
                    self.incarnations.insert(s, tag);
                    self.model.insert(
                        s,
                        Model {
                            bytes: bytes.to_vec(),
                        },
                    );
                }
            }
            Act::Append { s, len } => {
                let tag = self.tag();
                let bytes = payload(tag, len);
                let r = self.m.apply(StreamCommand::Append {
                    stream_id: id(s),
                    content_type: Some("text/plain".into()),
                    payload: bytes.clone(),
                    close_after: false,
                    stream_seq: None,
                    producer: None,
                    now_ms: self.now,
                    record_match: None,
                });
                if let StreamResponse::Appended { .. } = r {
                    self.model
                        .get_mut(&s)
                        .unwrap()
                        .bytes
                        .extend_from_slice(&bytes);
                }
            }
            Act::Close { s } => {
                self.m.apply(StreamCommand::Close {
                    stream_id: id(s),
                    stream_seq: None,
                    producer: None,
                    now_ms: self.now,
                });
            }
            Act::Delete { s } => {
                self.m
                    .apply(StreamCommand::DeleteStream { stream_id: id(s) });
            }
            Act::Fork {
                s,
                from,
                at,
                sub,
                len,
            } => self.fork(s, from, at, sub, len),
            Act::Retain { s } => {
                let Some(tail) = self.tail(s) else { return };
                let r = self.m.apply(StreamCommand::PublishSnapshot {
                    stream_id: id(s),
                    snapshot_offset: tail,
                    content_type: "text/plain".into(),
                    payload: Bytes::from_static(b"state"),
                    expected_digest: None,
                    now_ms: self.now,
                });
                if !r.is_error() {
                    self.m.apply(StreamCommand::AdvanceRetention {
                        stream_id: id(s),
                        retained_offset: tail,
                        now_ms: self.now,
                    });
                }
            }
            Act::Flush { s } => {
                let Ok(Some(c)) = self.m.plan_cold_flush(&id(s), 1, 16) else {
                    return;
                };
                let incarnation = self.incarnation(s);
                let path = format!(
                    "{BUCKET}/s{s}/{incarnation}/{}-{}-{}",
                    c.start_offset,
                    c.end_offset,
                    self.tag()
                );
                self.store.insert(path.clone(), c.payload.clone());
                self.index.entry(s).or_default().push((
                    c.start_offset,
                    c.end_offset,
                    path.clone(),
                    incarnation,
                ));
                let r = self.m.apply(StreamCommand::FlushCold {
                    stream_id: id(s),
                    chunk: ColdChunkRef {
                        start_offset: c.start_offset,
                        end_offset: c.end_offset,
                        s3_path: path,
                        object_size: u64::try_from(c.payload.len()).unwrap(),
                        object_offset: 0,
                        shared_object: false,
                        payload_digest: c.payload_digest,
                    },
                });
                assert!(!r.is_error(), "planned flush refused: {r:?}");
            }
            Act::Gc => {
                let batch = self.m.pending_cold_gc_batch(64);
                let mut up_to = None;
                for entry in batch {
                    if entry.not_before_ms > self.now {
                        break;
                    }
                    match &entry.target {
                        ColdGcTarget::Stream(sid) => {
                            // A worker deletes the removed incarnation's
                            // objects, never a live one's.
                            let s = (0..STREAMS).find(|s| id(*s) == *sid).unwrap();
                            let live = self.live_incarnation(s);
                            let entries = self.index.entry(s).or_default();
                            for (_, _, path, _) in entries.iter().filter(|e| Some(e.3) != live) {
                                self.store.remove(path);
                            }
                            entries.retain(|e| Some(e.3) == live);
                        }
                        ColdGcTarget::Paths(paths) => {
                            for p in paths {
                                self.store.remove(p);
                            }
                        }
                    }
                    up_to = Some(entry.seq);
                }
                if let Some(up_to_seq) = up_to {
                    self.m.apply(StreamCommand::AckColdGc { up_to_seq });
                }
            }
            Act::Deliver => self.deliver(),
            Act::Tick { ms } => {
                self.now += u64::from(ms);
                // A write-path sweep, as any write in the group would run.
                self.m.apply(StreamCommand::TouchStreamAccess {
                    stream_id: id(STREAMS),
                    now_ms: self.now,
                    renew_ttl: false,
                });
            }
            Act::Restore => {
                let snapshot = self.m.snapshot();
                let json = serde_json::to_vec(&snapshot).unwrap();
                let from_json =
                    StreamStateMachine::restore(serde_json::from_slice(&json).unwrap()).unwrap();
                assert_eq!(from_json.snapshot(), snapshot);
                let mut binary = Vec::new();
                write_snapshot(&self.m, SnapshotFormat::Binary, &mut binary).unwrap();
                // The writer refills one entry per stream: the same bytes
                // as encoding each stream's own entry.
                let mut one_by_one = Vec::new();
                strand_snapshot::encode_binary(&mut one_by_one, &snapshot, &snapshot.streams)
                    .unwrap();
                assert!(binary == one_by_one, "the reused entry leaked into another");
                let mut written_json = Vec::new();
                write_snapshot(&self.m, SnapshotFormat::Json, &mut written_json).unwrap();
                assert!(written_json == json, "the reused entry leaked into another");
                let from_binary = strand_machine::restore_from_slice(&binary).unwrap();
                assert_eq!(from_binary.snapshot(), snapshot);
                self.m = from_binary;
            }
        }
        // Streams the machine removed (deleted, expired, cascaded) leave
        // the model.
        let live: Vec<usize> = (0..STREAMS)
            .filter(|s| self.m.head(&id(*s)).is_some() || self.m.is_soft_deleted(&id(*s)))
            .collect();
        self.model.retain(|s, _| live.contains(s));
    }

    /// The stream's incarnation (which creation of its id it is).
    fn incarnation(&self, s: usize) -> u64 {
        self.live_incarnation(s).unwrap()
    }

    fn live_incarnation(&self, s: usize) -> Option<u64> {
        let live = self.m.head(&id(s)).is_some() || self.m.is_soft_deleted(&id(s));
        live.then(|| self.incarnations.get(&s).copied()).flatten()
    }

    /// The engine's fork creation, on one machine.
    fn fork(&mut self, s: usize, from: usize, at: Option<u8>, sub: u8, len: u8) {
        let start = self.m.read_start_offset(&id(from));
        let offset = match (at, self.tail(from)) {
            (Some(pct), Some(tail)) if tail >= start => {
                Some(start + (tail - start) * u64::from(pct) / 100)
            }
            _ => None,
        };
        let r = self.m.apply(StreamCommand::PinForkSource {
            stream_id: id(from),
            fork_stream_id: id(s),
            fork_offset: offset,
            now_ms: self.now,
        });
        let StreamResponse::ForkSourcePinned {
            fork_offset,
            pin,
            inherited_start,
            content_type,
            ..
        } = r
        else {
            return;
        };
        let source = self.model.get(&from).cloned().unwrap();
        let f = usize::try_from(fork_offset).unwrap();
        let end = (f + usize::from(sub)).min(source.bytes.len());
        let prefix = Bytes::copy_from_slice(&source.bytes[f..end]);
        let tag = self.tag();
        let body = payload(tag, len);
        let r = self.m.apply(StreamCommand::CreateFork {
            stream_id: id(s),
            source_stream_id: id(from),
            fork_offset,
            fork_offset_given: offset.is_some(),
            pin,
            sub_offset: u64::from(sub),
            inherited_start,
            first_record: None,
            content_type,
            prefix: prefix.clone(),
            initial_payload: body.clone(),
            close_after: false,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: self.now,
        });
        match r {
            StreamResponse::Created { .. } => {
                self.incarnations.insert(s, tag);
                let mut bytes = source.bytes[..f].to_vec();
                bytes.extend_from_slice(&prefix);
                bytes.extend_from_slice(&body);
                self.model.insert(s, Model { bytes });
            }
            _ => {
                self.m.apply(StreamCommand::UnpinForkSource {
                    stream_id: id(from),
                    fork_stream_id: id(s),
                    pin,
                });
            }
        }
    }

    /// The engine's unpin janitor.
    fn deliver(&mut self) {
        for _ in 0..STREAMS + 1 {
            let batch = self.m.pending_fork_unpins(64);
            if batch.is_empty() {
                return;
            }
            for u in &batch {
                self.m.apply(StreamCommand::UnpinForkSource {
                    stream_id: u.source_stream_id.clone(),
                    fork_stream_id: u.fork_stream_id.clone(),
                    pin: u.pin,
                });
            }
            self.m.apply(StreamCommand::AckForkUnpins { unpins: batch });
        }
    }

    /// Bytes `[from, min(tail, cap))` of a stream, through its fork chain.
    fn read(&self, sid: &BucketStreamId, from: u64, cap: u64, depth: usize) -> Vec<u8> {
        assert!(depth <= STREAMS, "fork chain deeper than the streams");
        let mut out = Vec::new();
        let mut at = from;
        if let Some((source, f)) = self.m.fork_origin(sid)
            && at < f
        {
            let end = f.min(cap);
            out.extend(self.read(&source, at, end, depth + 1));
            at = end;
            if at >= cap {
                return out;
            }
        }
        loop {
            let plan = self
                .m
                .read_plan_through(
                    sid,
                    at,
                    usize::try_from(cap.saturating_sub(at)).unwrap_or(usize::MAX),
                )
                .unwrap_or_else(|e| panic!("read of {sid} at {at}: {e:?}"));
            for segment in &plan.segments {
                match segment {
                    StreamReadSegment::Hot(bytes) => out.extend_from_slice(bytes),
                    StreamReadSegment::ColdIndex(c) => {
                        out.extend(self.cold(sid, c.read_start_offset, c.len));
                    }
                    StreamReadSegment::Object(o) => {
                        let object = self
                            .store
                            .get(&o.object.s3_path)
                            .unwrap_or_else(|| panic!("object {} is gone", o.object.s3_path));
                        let skip = usize::try_from(
                            o.object.object_offset + (o.read_start_offset - o.object.start_offset),
                        )
                        .unwrap();
                        out.extend_from_slice(&object[skip..skip + o.len]);
                    }
                }
            }
            if plan.next_offset == at || plan.up_to_date || plan.next_offset >= cap {
                break;
            }
            at = plan.next_offset;
        }
        out
    }

    fn cold(&self, sid: &BucketStreamId, start: u64, len: usize) -> Vec<u8> {
        let s = (0..STREAMS).find(|s| id(*s) == *sid).unwrap();
        let live = self.live_incarnation(s);
        let chunks = self.index.get(&s).cloned().unwrap_or_default();
        let mut out = Vec::new();
        let mut at = start;
        let end = start + u64::try_from(len).unwrap();
        while at < end {
            let (c_start, c_end, path, _) = chunks
                .iter()
                .find(|c| Some(c.3) == live && c.0 <= at && at < c.1)
                .unwrap_or_else(|| panic!("no cold chunk of {sid} holds offset {at}"));
            let object = self
                .store
                .get(path)
                .unwrap_or_else(|| panic!("cold object {path} is gone"));
            let to = end.min(*c_end);
            let from = usize::try_from(at - c_start).unwrap();
            out.extend_from_slice(&object[from..from + usize::try_from(to - at).unwrap()]);
            at = to;
        }
        out
    }

    /// Every stream still directly readable reads as its model, from its
    /// first readable offset.
    fn check(&self) {
        for (s, model) in &self.model {
            let sid = id(*s);
            if self.m.is_soft_deleted(&sid) {
                continue;
            }

            let start = self.m.read_start_offset(&sid);
            let got = self.read(&sid, start, u64::MAX, 0);
            let want = &model.bytes[usize::try_from(start).unwrap()..];
            assert_eq!(got, want, "stream s{s} from {start}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn forks_read_their_source_prefix_then_their_own_bytes(acts in proptest::collection::vec(act(), 1..60)) {
        let mut world = World::new();
        for a in &acts {
            world.step(a);
            world.check();
        }
        // Delivering every unpin and deleting every stream leaves nothing
        // behind: soft-deleted sources go with their last fork.
        world.deliver();
        for s in 0..STREAMS {
            world.step(&Act::Delete { s });
            world.deliver();
        }
        for s in 0..STREAMS {
            world.step(&Act::Delete { s });
            world.deliver();
        }
        prop_assert!(world.m.snapshot().streams.is_empty(), "{:?}", world.m.snapshot().streams.iter().map(|e| e.metadata.stream_id.clone()).collect::<Vec<_>>());
        prop_assert!(!world.m.has_pending_fork_unpins());
    }
}
