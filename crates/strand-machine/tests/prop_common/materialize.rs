//! Turns ops into concrete actions, looking at the machine's state.

use bytes::Bytes;
use strand_machine::{StreamCommand, StreamStateMachine};
use strand_model::{BucketStreamId, ProducerRequest};
use strand_snapshot::{StreamSnapshot, StreamSnapshotEntry};

use super::query::Query;
use super::run::Action;
use super::{Ent, JSON, Kind, Mode, OCTET, Op, Pools, TEXT};

mod operands;

/// Content types commands may name besides a stream's own.
const CONTENT_TYPES: [&str; 5] = [OCTET, JSON, TEXT, "", "application/json; charset=utf-8"];

/// Builds actions from ops; keeps the generated clock and stream-seq
/// counter.
#[derive(Debug, Clone)]
pub(crate) struct Materializer {
    /// How much nonsense to produce.
    pub(crate) mode: Mode,
    /// The id pools.
    pub(crate) pools: Pools,
    /// Avoid the restore exception of spec 07 P2: never advance retention
    /// above 0 on a stream whose raw cold frontier is 0.
    pub(crate) avoid_p2: bool,
    /// Never generate external payloads long enough to saturate the
    /// `retained_bytes` usage gauge (see `prop_restore_equivalence.rs`).
    pub(crate) small_sizes: bool,
    /// The current generated time.
    pub(crate) now: u64,
    seq_counter: u64,
    /// Whether the current op may contain nonsense (always in wild mode;
    /// for one op in four in valid mode).
    allow_odd: bool,
}

/// Lazily computed snapshot of the machine (many choices need it).
struct View<'m> {
    m: &'m StreamStateMachine,
    snap: Option<StreamSnapshot>,
}

impl<'m> View<'m> {
    fn entry(&mut self, id: &BucketStreamId) -> Option<StreamSnapshotEntry> {
        let m = self.m;
        self.snap
            .get_or_insert_with(|| m.snapshot())
            .streams
            .iter()
            .find(|e| e.metadata.stream_id == *id)
            .cloned()
    }

    fn tail(&self, id: &BucketStreamId) -> u64 {
        self.m.head(id).map_or(0, |h| h.tail_offset)
    }
}

impl Materializer {
    /// A materializer for `mode`, starting at time 1000.
    pub(crate) fn new(mode: Mode) -> Self {
        Self {
            mode,
            pools: Pools::new(mode),
            avoid_p2: false,
            small_sizes: false,
            now: 1_000,
            seq_counter: 0,
            allow_odd: true,
        }
    }

    /// True when this choice should be nonsense: `valid_pct` percent of the
    /// time in valid mode, `wild_pct` in wild mode.
    fn odd(&self, e: &mut Ent<'_>, valid_pct: u64, wild_pct: u64) -> bool {
        self.allow_odd
            && e.chance(match self.mode {
                Mode::Valid => valid_pct,
                Mode::Wild => wild_pct,
            })
    }

    fn bucket(&self, e: &mut Ent<'_>) -> String {
        if self.odd(e, 0, 35) {
            e.pick(&self.pools.odd_buckets)
        } else {
            e.pick(&self.pools.buckets)
        }
    }

    fn stream(&self, e: &mut Ent<'_>) -> (BucketStreamId, &'static str) {
        if self.odd(e, 0, 35) {
            e.pick(&self.pools.odd_streams)
        } else {
            e.pick(&self.pools.streams)
        }
    }

    /// Actions that create every valid bucket and stream (with a one-record
    /// payload), run before the generated ops.
    pub(crate) fn setup(&self) -> Vec<Action> {
        let mut out: Vec<Action> = self
            .pools
            .buckets
            .iter()
            .map(|b| {
                Action::Cmd(StreamCommand::CreateBucket {
                    bucket_id: b.clone(),
                })
            })
            .collect();
        for (id, ct) in &self.pools.streams {
            out.push(Action::Cmd(StreamCommand::CreateStream {
                stream_id: id.clone(),
                content_type: ct.to_string(),
                initial_payload: Bytes::from_static(b"{\"i\":0}\n"),
                close_after: false,
                stream_seq: None,
                producer: None,
                stream_ttl_seconds: None,
                stream_expires_at_ms: None,
                attrs: None,
                now_ms: self.now,
            }));
        }
        out
    }

    fn now_ms(&mut self, e: &mut Ent<'_>) -> u64 {
        match e.below(12) {
            0..=6 => self.now,
            7..=10 => {
                let step = e.pick(&[1, 10, 400, 1_500, 6_000]);
                self.now = self.now.saturating_add(step);
                self.now
            }
            _ if self.mode == Mode::Wild => e.pick(&[0, u64::MAX, self.now.saturating_sub(700)]),
            _ => self.now,
        }
    }

    /// Steers an op towards existing state: a stream op on a missing bucket
    /// creates the bucket first, one on a missing stream creates the stream
    /// (most of the time in valid mode, half the time in wild mode). In
    /// valid mode most purges become stream deletes, because a purged bucket
    /// is fenced forever. Retention on a stream without a checkpoint usually
    /// publishes one instead, and (with `avoid_p2`) retention on a stream
    /// that has no cold data usually flushes instead.
    fn repair(&self, e: &mut Ent<'_>, v: &mut View<'_>, kind: Kind, id: &BucketStreamId) -> Kind {
        let m = v.m;
        let bucket_level = matches!(
            kind,
            Kind::CreateBucket
                | Kind::DeleteBucket
                | Kind::PurgeBucket
                | Kind::SetQuota
                | Kind::AckGc
                | Kind::Import
        );
        let steer = !self.odd(e, 10, 50);
        if bucket_level || !steer {
            if kind == Kind::PurgeBucket && self.mode == Mode::Valid && !e.chance(25) {
                return Kind::DeleteStream;
            }
            return kind;
        }
        if !m.bucket_exists(&id.bucket_id) {
            return Kind::CreateBucket;
        }
        if m.head(id).is_none() && !matches!(kind, Kind::CreateStream | Kind::CreateExternal) {
            return if e.chance(20) {
                Kind::CreateExternal
            } else {
                Kind::CreateStream
            };
        }
        let appends = matches!(
            kind,
            Kind::Append
                | Kind::AppendExternal
                | Kind::AppendBatch
                | Kind::DirectAppend
                | Kind::DirectBatch
                | Kind::Transaction
        );
        let closed = m
            .head(id)
            .is_some_and(|h| h.status == strand_model::StreamStatus::Closed);
        if appends && closed && e.chance(50) {
            return Kind::DeleteStream;
        }
        if kind == Kind::Retention && e.chance(70) {
            if matches!(m.latest_snapshot(id), Ok(None)) {
                return Kind::Publish;
            }
            if self.avoid_p2 && v.entry(id).is_some_and(|x| x.cold_frontier_offset == 0) {
                return Kind::Flush;
            }
        }
        kind
    }

    /// The action for `op` against machine `m`.
    pub(crate) fn materialize(&mut self, m: &StreamStateMachine, op: &Op) -> Action {
        let e = &mut Ent::new(&op.ent);
        let v = &mut View { m, snap: None };
        self.allow_odd = self.mode == Mode::Wild || e.chance(25);
        let (mut id, mut own) = self.stream(e);
        if op.kind == Kind::Retention && e.chance(75) {
            // Prefer a stream retention can act on: one with a checkpoint
            // (and, with `avoid_p2`, with cold data).
            let ready: Vec<(BucketStreamId, &'static str)> = self
                .pools
                .streams
                .iter()
                .filter(|(s, _)| {
                    v.entry(s).is_some_and(|x| {
                        x.visible_snapshot.is_some()
                            && (!self.avoid_p2 || x.cold_frontier_offset > 0)
                    })
                })
                .cloned()
                .collect();
            if !ready.is_empty() {
                (id, own) = e.pick(&ready);
            }
        }
        let kind = self.repair(e, v, op.kind, &id);
        let cmd = match kind {
            Kind::CreateBucket => StreamCommand::CreateBucket {
                bucket_id: self.bucket(e),
            },
            Kind::DeleteBucket => StreamCommand::DeleteBucket {
                bucket_id: self.bucket(e),
            },
            Kind::PurgeBucket => StreamCommand::PurgeBucket {
                bucket_id: self.bucket(e),
            },
            Kind::SetQuota => {
                let limited = self.odd(e, 20, 60);
                StreamCommand::SetBucketQuota {
                    bucket_id: self.bucket(e),
                    max_streams: (limited && e.chance(50)).then(|| e.pick(&[0, 1, 2, 5, u64::MAX])),
                    max_retained_bytes: (limited && e.chance(50))
                        .then(|| e.pick(&[0, 10, 100, 1_000, u64::MAX])),
                }
            }
            Kind::CreateStream => {
                let ct = self.content_type(e, own);
                let (stream_ttl_seconds, stream_expires_at_ms) = self.ttl(e);
                StreamCommand::CreateStream {
                    initial_payload: Bytes::from(self.payload(e, &ct)),
                    content_type: ct,
                    close_after: e.chance(2),
                    stream_seq: self.stream_seq(e),
                    producer: self.producer(e, v, &id),
                    stream_ttl_seconds,
                    stream_expires_at_ms,
                    attrs: self.attrs(e),
                    now_ms: self.now_ms(e),
                    stream_id: id,
                }
            }
            Kind::CreateExternal => {
                let ct = self.content_type(e, own);
                let initial_payload = self.external(e);
                let (stream_ttl_seconds, stream_expires_at_ms) = self.ttl(e);
                StreamCommand::CreateExternal {
                    record_ends: self.record_ends(e, &ct, initial_payload.payload_len),
                    content_type: ct,
                    initial_payload,
                    close_after: e.chance(2),
                    stream_seq: self.stream_seq(e),
                    producer: self.producer(e, v, &id),
                    stream_ttl_seconds,
                    stream_expires_at_ms,
                    attrs: self.attrs(e),
                    now_ms: self.now_ms(e),
                    stream_id: id,
                }
            }
            Kind::Append => self.append_cmd(e, v, id, own),
            Kind::AppendExternal => {
                let ct = self.content_type(e, own);
                let payload = self.external(e);
                StreamCommand::AppendExternal {
                    record_ends: self.record_ends(e, &ct, payload.payload_len),
                    content_type: (!self.odd(e, 2, 15)).then_some(ct),
                    payload,
                    close_after: e.chance(2),
                    stream_seq: self.stream_seq(e),
                    producer: self.producer(e, v, &id),
                    now_ms: self.now_ms(e),
                    record_match: self.record_match(e, m, &id),
                    stream_id: id,
                }
            }
            Kind::AppendBatch | Kind::DirectBatch => {
                let ct = self.content_type(e, own);
                let n = if self.odd(e, 1, 10) {
                    0
                } else {
                    1 + e.below(3)
                };
                let payloads: Vec<Vec<u8>> = (0..n).map(|_| self.payload(e, &ct)).collect();
                let content_type = (!self.odd(e, 2, 15)).then_some(ct);
                let producer = self.producer(e, v, &id);
                let now_ms = self.now_ms(e);
                if kind == Kind::DirectBatch {
                    return Action::Batch {
                        id,
                        content_type,
                        payloads,
                        producer,
                        now_ms,
                    };
                }
                StreamCommand::AppendBatch {
                    stream_id: id,
                    content_type,
                    payloads: payloads.into_iter().map(Bytes::from).collect(),
                    producer,
                    now_ms,
                }
            }
            Kind::DirectAppend => {
                let StreamCommand::Append {
                    stream_id,
                    content_type,
                    payload,
                    close_after,
                    stream_seq,
                    producer,
                    now_ms,
                    record_match,
                } = self.append_cmd(e, v, id, own)
                else {
                    unreachable!("append_cmd builds an Append");
                };
                return Action::Append {
                    id: stream_id,
                    content_type,
                    payload: payload.to_vec(),
                    close_after,
                    stream_seq,
                    producer,
                    now_ms,
                    record_match,
                };
            }
            Kind::Transaction => {
                // Streams sharing bucket and affinity key, plus odd ones.
                if id.affinity_key.is_none() && !self.odd(e, 10, 30) {
                    let with_key: Vec<BucketStreamId> = self
                        .pools
                        .streams
                        .iter()
                        .map(|(s, _)| s.clone())
                        .filter(|s| s.affinity_key.is_some())
                        .collect();
                    id = e.pick(&with_key);
                }
                let group: Vec<(BucketStreamId, &'static str)> = self
                    .pools
                    .streams
                    .iter()
                    .filter(|(s, _)| {
                        s.bucket_id == id.bucket_id && s.affinity_key == id.affinity_key
                    })
                    .cloned()
                    .collect();
                let group = if group.is_empty() {
                    vec![(id.clone(), own)]
                } else {
                    group
                };
                let mut cmds = Vec::new();
                for _ in 0..1 + e.below(3) {
                    let (sid, sct) = if self.odd(e, 3, 25) {
                        self.stream(e)
                    } else {
                        e.pick(&group)
                    };
                    cmds.push(self.append_cmd(e, v, sid, sct));
                }
                if self.odd(e, 2, 15) {
                    cmds.insert(
                        e.below(cmds.len() + 1),
                        StreamCommand::DeleteStream { stream_id: id },
                    );
                }
                return Action::Transaction(cmds);
            }
            Kind::Close => StreamCommand::Close {
                stream_seq: self.stream_seq(e),
                producer: self.producer(e, v, &id),
                now_ms: self.now_ms(e),
                stream_id: id,
            },
            Kind::DeleteStream => StreamCommand::DeleteStream { stream_id: id },
            Kind::Touch => StreamCommand::TouchStreamAccess {
                now_ms: self.now_ms(e),
                renew_ttl: e.chance(70),
                stream_id: id,
            },
            Kind::UpdateAttrs => StreamCommand::UpdateStreamAttrs {
                attrs: self.attrs(e),
                now_ms: self.now_ms(e),
                stream_id: id,
            },
            Kind::Publish => {
                let snapshot_offset = if e.chance(40) {
                    self.offset(e, v, &id)
                } else {
                    v.tail(&id)
                };
                let current = m.latest_snapshot(&id).ok().flatten();
                let expected_digest = match (e.below(8), current) {
                    (0..=5, _) => None,
                    (6, Some(c)) => Some(c.digest),
                    _ => Some(e.pick(&["", "zz"]).to_string()),
                };
                StreamCommand::PublishSnapshot {
                    snapshot_offset,
                    content_type: if self.odd(e, 2, 20) {
                        " ".into()
                    } else {
                        e.pick(&[JSON, OCTET]).into()
                    },
                    payload: Bytes::from(vec![e.below(3) as u8; e.below(4)]),
                    expected_digest,
                    now_ms: self.now_ms(e),
                    stream_id: id,
                }
            }
            Kind::Retention => StreamCommand::AdvanceRetention {
                retained_offset: self.retention_offset(e, v, &id),
                now_ms: self.now_ms(e),
                stream_id: id,
            },
            Kind::Flush => StreamCommand::FlushCold {
                chunk: self.flush_chunk(e, m, &id),
                stream_id: id,
            },
            Kind::Compact => {
                let (old_chunks, replacement) = self.compact(e, m, &id);
                StreamCommand::CompactCold {
                    stream_id: id,
                    old_chunks,
                    replacement,
                    gc_not_before_ms: e.pick(&[0, self.now, u64::MAX]),
                }
            }
            Kind::AckGc => {
                let pending = m.pending_cold_gc_batch(usize::MAX);
                let up_to_seq = match (e.below(4), pending.first(), pending.last()) {
                    (0, Some(f), _) => f.seq,
                    (1, _, Some(l)) => l.seq,
                    _ => e.extreme(),
                };
                StreamCommand::AckColdGc { up_to_seq }
            }
            Kind::Import => match e.below(3) {
                0 => StreamCommand::ImportSnapshot {
                    snapshot: Box::new(m.snapshot()),
                },
                1 if self.mode == Mode::Wild => {
                    return Action::ReplaceByImport(Box::new(m.snapshot()));
                }
                _ => StreamCommand::ImportSnapshot {
                    snapshot: Box::default(),
                },
            },
            Kind::Query => return Action::Query(self.query(e, v, id)),
        };
        Action::Cmd(cmd)
    }

    fn query(&mut self, e: &mut Ent<'_>, v: &mut View<'_>, id: BucketStreamId) -> Query {
        let o = self.offset(e, v, &id);
        let n = self.usize_arg(e);
        match e.below(30) {
            0 => Query::Head(id),
            1 => Query::HeadAt(id, self.now_ms(e)),
            2 => Query::Attrs(id),
            3 => Query::HotStart(id),
            4 => Query::Retained(id),
            5 => Query::ColdChunks(id),
            6 => Query::ExternalSegments(id),
            7 => Query::HotSegments(id),
            8 => Query::HotLen(id),
            9 => Query::TotalHot,
            10 => Query::BucketExists(self.bucket(e)),
            11 => Query::Usage,
            12 => Query::Quotas,
            13 => Query::GcBatch(n),
            14 => Query::GcLen,
            15 => Query::GcLenForBucket(self.bucket(e)),
            16 => Query::Integrity(id),
            17 => Query::RecordRange(id),
            18 => Query::OffsetForRecord(id, e.pick(&[0, 1, 2, 5, u64::MAX])),
            19 => {
                let producer_state = v
                    .entry(&id)
                    .and_then(|x| x.producer_states.first().cloned());
                match producer_state {
                    Some(p) if e.chance(60) => Query::RecordRangeForAppend(
                        id,
                        p.last_start_offset,
                        p.last_next_offset,
                        Some(ProducerRequest {
                            producer_id: p.producer_id,
                            producer_epoch: p.producer_epoch,
                            producer_seq: p.producer_seq,
                        }),
                    ),
                    _ => {
                        let end = self.offset(e, v, &id);
                        Query::RecordRangeForAppend(id, o, end, None)
                    }
                }
            }
            20 => Query::LatestSnapshot(id),
            21 => Query::ReadSnapshot(id, o),
            22 => Query::DeleteSnapshot(id, o),
            23 => Query::Bootstrap(id),
            24 => Query::AccessRequiresWrite(id, self.now_ms(e), e.chance(50)),
            25 => Query::Read(id, o, n),
            26 => Query::ReadPlan(id, o, n),
            27 => Query::ReadPlanAt(id, o, n, self.now_ms(e)),
            28 => Query::PlanFlush(id, self.usize_arg(e), n),
            _ => Query::PlanBatch(self.usize_arg(e), n, self.usize_arg(e), self.usize_arg(e)),
        }
    }
}
