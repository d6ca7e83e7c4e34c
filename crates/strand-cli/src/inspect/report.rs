//! The inspection report: what `strand snapshot inspect` prints, built
//! from a restored machine. Serialized as is for `--json`.

use std::collections::BTreeMap;

use serde::Serialize;
use strand::{
    BucketQuota, BucketStreamId, BucketUsage, StreamRecordRange, StreamSnapshotEntry,
    StreamStateMachine, StreamStatus,
};

use crate::sinks::Counts;

fn count(len: usize) -> u64 {
    u64::try_from(len).unwrap_or(u64::MAX)
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The file inspected.
    pub(crate) file: String,
    /// `json` or `binary`.
    pub(crate) format: String,
    /// Totals over the snapshot.
    pub(crate) totals: Counts,
    /// The group's machine profile (`reference` or `corrected`).
    pub(crate) profile: String,
    /// The corrected profile's producer receipt limit (`None` for the
    /// reference profile, which keeps every receipt).
    pub(crate) producer_receipt_limit: Option<u64>,
    /// The cold GC queue's next sequence number.
    pub(crate) next_cold_gc_seq: u64,
    /// Shared cold objects with owners.
    pub(crate) shared_cold_objects: u64,
    /// Erased (purged) bucket ids.
    pub(crate) erased_buckets: Vec<String>,
    /// One entry per active bucket, by id.
    pub(crate) buckets: Vec<BucketReport>,
}

/// One active bucket.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BucketReport {
    /// The bucket id.
    pub(crate) bucket_id: String,
    /// Usage counters and gauges as the restored machine reports them.
    pub(crate) usage: BucketUsage,
    /// The stored quota, `null` when the bucket has none.
    pub(crate) quota: Option<BucketQuota>,
    /// The bucket's streams, in snapshot order.
    pub(crate) streams: Vec<StreamReport>,
}

/// One stream.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StreamReport {
    /// The full id as `bucket/stream` or `bucket/affinity/stream`.
    pub(crate) stream: String,
    /// The id in its wire shape.
    pub(crate) stream_id: BucketStreamId,
    /// The content type.
    pub(crate) content_type: String,
    /// `Open` or `Closed`.
    pub(crate) status: StreamStatus,
    /// Offset of the next byte to be appended.
    pub(crate) tail_offset: u64,
    /// The destructive-retention floor.
    pub(crate) retained_offset: u64,
    /// Start of the hot tier.
    pub(crate) hot_start_offset: u64,
    /// The effective cold frontier.
    pub(crate) cold_frontier_offset: u64,
    /// `tail_offset - retained_offset`.
    pub(crate) retained_bytes: u64,
    /// Bytes in the hot tier.
    pub(crate) hot_bytes: u64,
    /// Hot chunks.
    pub(crate) hot_segments: u64,
    /// Stored cold chunks.
    pub(crate) cold_chunks: u64,
    /// Logical bytes covered by the cold chunks.
    pub(crate) cold_bytes: u64,
    /// Stored external segments.
    pub(crate) external_segments: u64,
    /// Message records tiling the retained range.
    pub(crate) message_records: u64,
    /// The JSON record range, for streams with a record index.
    pub(crate) record_range: Option<StreamRecordRange>,
    /// Offset of the visible (published) snapshot, if any.
    pub(crate) visible_snapshot_offset: Option<u64>,
    /// Sliding TTL.
    pub(crate) stream_ttl_seconds: Option<u64>,
    /// Absolute expiry.
    pub(crate) stream_expires_at_ms: Option<u64>,
    /// Creation time.
    pub(crate) created_at_ms: u64,
    /// The attributes' title.
    pub(crate) title: Option<String>,
    /// Idempotent producers, by id.
    pub(crate) producers: Vec<ProducerReport>,
}

/// One idempotent producer of a stream.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProducerReport {
    /// The producer id.
    pub(crate) producer_id: String,
    /// Its epoch.
    pub(crate) producer_epoch: u64,
    /// Its last accepted sequence number.
    pub(crate) producer_seq: u64,
    /// Where its last append started.
    pub(crate) last_start_offset: u64,
    /// Where its last append ended.
    pub(crate) last_next_offset: u64,
    /// Whether its last append closed the stream.
    pub(crate) last_closed: bool,
    /// Receipts kept for retries.
    pub(crate) receipts: u64,
}

impl StreamReport {
    fn new(machine: &StreamStateMachine, entry: &StreamSnapshotEntry) -> Self {
        let meta = &entry.metadata;
        let id = &meta.stream_id;
        let retained_offset = machine.retained_offset(id);
        Self {
            stream: id.to_string(),
            stream_id: id.clone(),
            content_type: meta.content_type.clone(),
            status: meta.status,
            tail_offset: meta.tail_offset,
            retained_offset,
            hot_start_offset: entry.hot_start_offset,
            cold_frontier_offset: entry.cold_frontier_offset,
            retained_bytes: meta.tail_offset.saturating_sub(retained_offset),
            hot_bytes: count(entry.payload.len()),
            hot_segments: count(entry.hot_segments.len()),
            cold_chunks: count(entry.cold_chunks.len()),
            cold_bytes: entry.cold_chunks.iter().fold(0u64, |sum, c| {
                sum.saturating_add(c.end_offset.saturating_sub(c.start_offset))
            }),
            external_segments: count(entry.external_segments.len()),
            message_records: count(entry.message_records.len()),
            record_range: machine.record_range(id).ok().flatten(),
            visible_snapshot_offset: entry.visible_snapshot.as_ref().map(|v| v.offset),
            stream_ttl_seconds: meta.stream_ttl_seconds,
            stream_expires_at_ms: meta.stream_expires_at_ms,
            created_at_ms: meta.created_at_ms,
            title: entry.attrs.as_ref().and_then(|a| a.title.clone()),
            producers: entry
                .producer_states
                .iter()
                .map(|p| ProducerReport {
                    producer_id: p.producer_id.clone(),
                    producer_epoch: p.producer_epoch,
                    producer_seq: p.producer_seq,
                    last_start_offset: p.last_start_offset,
                    last_next_offset: p.last_next_offset,
                    last_closed: p.last_closed,
                    receipts: count(p.receipts.len()),
                })
                .collect(),
        }
    }
}

impl Report {
    /// Builds the report of a restored machine.
    pub(crate) fn new(
        file: String,
        format: String,
        totals: Counts,
        machine: &StreamStateMachine,
    ) -> Self {
        let head = machine.snapshot_without_streams();
        let usage: BTreeMap<String, BucketUsage> = machine
            .bucket_usage_report()
            .into_iter()
            .map(|u| (u.bucket_id, u.usage))
            .collect();
        let quotas: BTreeMap<String, BucketQuota> = machine
            .bucket_quota_report()
            .into_iter()
            .map(|q| (q.bucket_id, q.quota))
            .collect();
        let mut buckets: BTreeMap<String, BucketReport> = head
            .buckets
            .iter()
            .map(|id| {
                let report = BucketReport {
                    bucket_id: id.clone(),
                    usage: usage.get(id).copied().unwrap_or_default(),
                    quota: quotas.get(id).copied(),
                    streams: Vec::new(),
                };
                (id.clone(), report)
            })
            .collect();
        for entry in machine.snapshot_entries() {
            let stream = StreamReport::new(machine, &entry);
            // Restore guarantees every stream's bucket is active.
            if let Some(bucket) = buckets.get_mut(&stream.stream_id.bucket_id) {
                bucket.streams.push(stream);
            }
        }
        Self {
            file,
            format,
            totals,
            profile: machine.profile().to_string(),
            producer_receipt_limit: head.machine_options.map(|o| o.producer_receipt_limit),
            next_cold_gc_seq: head.next_cold_gc_seq,
            shared_cold_objects: count(head.shared_cold_object_owners.len()),
            erased_buckets: head.erased_buckets,
            buckets: buckets.into_values().collect(),
        }
    }

    /// The stream whose full id displays as `id`.
    pub(crate) fn find_stream(&self, id: &str) -> Option<&StreamReport> {
        self.buckets
            .iter()
            .flat_map(|b| &b.streams)
            .find(|s| s.stream == id)
    }
}
