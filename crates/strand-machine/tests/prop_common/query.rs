//! Queries as values, evaluated to a comparable text (their `Debug` form).

use strand_machine::StreamStateMachine;
use strand_model::{BucketStreamId, ProducerRequest};

use super::Pools;

/// One call of a public query method with its arguments.
#[derive(Debug, Clone)]
pub(crate) enum Query {
    Head(BucketStreamId),
    HeadAt(BucketStreamId, u64),
    Attrs(BucketStreamId),
    HotStart(BucketStreamId),
    Retained(BucketStreamId),
    ColdChunks(BucketStreamId),
    ExternalSegments(BucketStreamId),
    HotSegments(BucketStreamId),
    HotLen(BucketStreamId),
    TotalHot,
    BucketExists(String),
    Usage,
    Quotas,
    GcBatch(usize),
    GcLen,
    GcLenForBucket(String),
    Integrity(BucketStreamId),
    RecordRange(BucketStreamId),
    OffsetForRecord(BucketStreamId, u64),
    RecordRangeForAppend(BucketStreamId, u64, u64, Option<ProducerRequest>),
    LatestSnapshot(BucketStreamId),
    ReadSnapshot(BucketStreamId, u64),
    DeleteSnapshot(BucketStreamId, u64),
    Bootstrap(BucketStreamId),
    AccessRequiresWrite(BucketStreamId, u64, bool),
    Read(BucketStreamId, u64, usize),
    ReadPlan(BucketStreamId, u64, usize),
    ReadPlanAt(BucketStreamId, u64, usize, u64),
    PlanFlush(BucketStreamId, usize, usize),
    PlanBatch(usize, usize, usize, usize),
    PlanLargest(usize, usize, usize, usize),
}

/// Largest range a read may plan: 1024 cold-index pages of 64 MiB.
const MAX_READ_SPAN: u64 = 1 << 36;

/// Limits `max_len` so that a read from `offset` spans at most
/// [`MAX_READ_SPAN`] bytes of the stream.
///
/// A read plan emits one `ColdIndex` segment per 64 MiB page of cold range
/// (spec 06 §5.4, no cap on `max_len`), so planning a read over an external
/// payload of, say, 2^60 bytes (accepted by `AppendExternal`) allocates
/// billions of segments and exhausts memory. That is the specified
/// behaviour, not a panic, so the tests keep read spans bounded.
fn clamp(m: &StreamStateMachine, id: &BucketStreamId, offset: u64, max_len: usize) -> usize {
    let tail = m.head(id).map_or(0, |h| h.tail_offset);
    if tail.saturating_sub(offset) > MAX_READ_SPAN {
        max_len.min(MAX_READ_SPAN as usize)
    } else {
        max_len
    }
}

/// Runs `q` on `m` and returns the result's `Debug` text.
pub(crate) fn eval(m: &mut StreamStateMachine, q: &Query) -> String {
    match q {
        Query::Head(id) => format!("{:?}", m.head(id)),
        Query::HeadAt(id, now) => format!("{:?}", m.head_at(id, *now)),
        Query::Attrs(id) => format!("{:?}", m.stream_attrs(id)),
        Query::HotStart(id) => format!("{:?}", m.hot_start_offset(id)),
        Query::Retained(id) => format!("{:?}", m.retained_offset(id)),
        Query::ColdChunks(id) => format!("{:?}", m.cold_chunks(id)),
        Query::ExternalSegments(id) => format!("{:?}", m.external_segments(id)),
        Query::HotSegments(id) => format!("{:?}", m.hot_segments(id)),
        Query::HotLen(id) => format!("{:?}", m.hot_payload_len(id)),
        Query::TotalHot => format!("{:?}", m.total_hot_payload_bytes()),
        Query::BucketExists(b) => format!("{:?}", m.bucket_exists(b)),
        Query::Usage => format!("{:?}", m.bucket_usage_report()),
        Query::Quotas => format!("{:?}", m.bucket_quota_report()),
        Query::GcBatch(n) => format!("{:?}", m.pending_cold_gc_batch(*n)),
        Query::GcLen => format!("{:?}", m.pending_cold_gc_len()),
        Query::GcLenForBucket(b) => format!("{:?}", m.pending_cold_gc_len_for_bucket(b)),
        Query::Integrity(id) => format!("{:?}", m.integrity_snapshot(id)),
        Query::RecordRange(id) => format!("{:?}", m.record_range(id)),
        Query::OffsetForRecord(id, r) => format!("{:?}", m.offset_for_record(id, *r)),
        Query::RecordRangeForAppend(id, s, e, p) => {
            format!("{:?}", m.record_range_for_append(id, *s, *e, p.as_ref()))
        }
        Query::LatestSnapshot(id) => format!("{:?}", m.latest_snapshot(id)),
        Query::ReadSnapshot(id, o) => format!("{:?}", m.read_snapshot(id, *o)),
        Query::DeleteSnapshot(id, o) => format!("{:?}", m.delete_snapshot(id, *o)),
        Query::Bootstrap(id) => format!("{:?}", m.bootstrap_plan(id)),
        Query::AccessRequiresWrite(id, now, renew) => {
            format!("{:?}", m.access_requires_write(id, *now, *renew))
        }
        Query::Read(id, o, n) => format!("{:?}", m.read(id, *o, clamp(m, id, *o, *n))),
        Query::ReadPlan(id, o, n) => {
            format!("{:?}", m.read_plan(id, *o, clamp(m, id, *o, *n)))
        }
        Query::ReadPlanAt(id, o, n, now) => {
            format!("{:?}", m.read_plan_at(id, *o, clamp(m, id, *o, *n), *now))
        }
        Query::PlanFlush(id, min, max) => format!("{:?}", m.plan_cold_flush(id, *min, *max)),
        Query::PlanBatch(a, b, c, d) => {
            format!("{:?}", m.plan_next_cold_flush_batch(*a, *b, *c, *d))
        }
        Query::PlanLargest(a, b, c, d) => {
            format!("{:?}", m.plan_largest_cold_flush_batch(*a, *b, *c, *d))
        }
    }
}

/// Every read-only query over every pool stream and bucket, with a few
/// fixed argument sets, as texts. Mutates nothing (no `head_at`).
pub(crate) fn sweep(m: &mut StreamStateMachine, pools: &Pools, now: u64) -> Vec<String> {
    let mut qs = vec![
        Query::TotalHot,
        Query::Usage,
        Query::Quotas,
        Query::GcBatch(usize::MAX),
        Query::GcLen,
        Query::PlanBatch(0, usize::MAX, usize::MAX, usize::MAX),
        Query::PlanBatch(1, 3, 7, 2),
        Query::PlanBatch(usize::MAX, 1, 1, 1),
        Query::PlanLargest(0, usize::MAX, usize::MAX, usize::MAX),
        Query::PlanLargest(2, 3, 7, 2),
        Query::PlanLargest(usize::MAX, 1, 1, 1),
    ];
    for b in pools.all_buckets() {
        qs.push(Query::BucketExists(b.clone()));
        qs.push(Query::GcLenForBucket(b.clone()));
    }
    for (id, _) in pools.all_streams() {
        let tail = m.head(id).map_or(0, |h| h.tail_offset);
        let retained = m.retained_offset(id);
        for q in [
            Query::Head(id.clone()),
            Query::Attrs(id.clone()),
            Query::HotStart(id.clone()),
            Query::Retained(id.clone()),
            Query::ColdChunks(id.clone()),
            Query::ExternalSegments(id.clone()),
            Query::HotSegments(id.clone()),
            Query::HotLen(id.clone()),
            Query::Integrity(id.clone()),
            Query::RecordRange(id.clone()),
            Query::OffsetForRecord(id.clone(), 0),
            Query::OffsetForRecord(id.clone(), 1),
            Query::RecordRangeForAppend(id.clone(), retained, tail, None),
            Query::LatestSnapshot(id.clone()),
            Query::ReadSnapshot(id.clone(), tail),
            Query::DeleteSnapshot(id.clone(), tail),
            Query::Bootstrap(id.clone()),
            Query::AccessRequiresWrite(id.clone(), now, true),
            Query::Read(id.clone(), retained, usize::MAX),
            Query::ReadPlan(id.clone(), retained, usize::MAX),
            Query::ReadPlanAt(id.clone(), retained, 5, now),
            Query::ReadPlanAt(id.clone(), tail, 0, now),
            Query::PlanFlush(id.clone(), 0, usize::MAX),
            Query::PlanFlush(id.clone(), 1, 3),
        ] {
            qs.push(q);
        }
    }
    qs.iter()
        .map(|q| format!("{q:?} => {}", eval(m, q)))
        .collect()
}
