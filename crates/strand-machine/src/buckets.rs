//! Bucket commands: create, delete, purge, quota (spec 03 §3).

use strand_usage::BucketQuota;

use crate::machine::StreamStateMachine;
use crate::response::{StreamErrorCode, StreamResponse};
use crate::scope::check_bucket_id;

impl StreamStateMachine {
    pub(crate) fn create_bucket(&mut self, bucket_id: String) -> StreamResponse {
        if let Err(e) = check_bucket_id(&bucket_id) {
            return e;
        }
        if self.erased.contains(&bucket_id) {
            return StreamResponse::error(
                StreamErrorCode::BucketErased,
                format!("bucket '{bucket_id}' was permanently erased"),
            );
        }
        if self.buckets.contains(&bucket_id) {
            return StreamResponse::BucketAlreadyExists { bucket_id };
        }
        self.buckets.insert(bucket_id.clone());
        StreamResponse::BucketCreated { bucket_id }
    }

    pub(crate) fn delete_bucket(&mut self, bucket_id: String) -> StreamResponse {
        if let Err(e) = check_bucket_id(&bucket_id) {
            return e;
        }
        if !self.buckets.contains(&bucket_id) {
            return StreamResponse::error(
                StreamErrorCode::BucketNotFound,
                format!("bucket '{bucket_id}' does not exist"),
            );
        }
        if self.registry.bucket_has_streams(&bucket_id) {
            return StreamResponse::error(
                StreamErrorCode::BucketNotEmpty,
                format!("bucket '{bucket_id}' still has streams"),
            );
        }
        self.buckets.remove(&bucket_id);
        self.usage.remove_quota(&bucket_id);
        StreamResponse::BucketDeleted { bucket_id }
    }

    pub(crate) fn purge_bucket(&mut self, bucket_id: String) -> StreamResponse {
        if let Err(e) = check_bucket_id(&bucket_id) {
            return e;
        }
        if self.corrected()
            && !self.buckets.contains(&bucket_id)
            && !self.erased.contains(&bucket_id)
            && !self.registry.bucket_has_streams(&bucket_id)
        {
            // Corrected profile: purging a bucket that never existed is an
            // error, not a permanent fence.
            return StreamResponse::error(
                StreamErrorCode::BucketNotFound,
                format!("bucket '{bucket_id}' does not exist"),
            );
        }
        // Deterministic removal order: (bucket, stream, affinity None first).
        let ids = self.registry.ids_in_bucket(&bucket_id);
        let mut removed_streams = 0u64;
        for id in &ids {
            if self.remove_stream_state(id) {
                removed_streams += 1;
            }
        }
        self.drop_unpins_of_bucket(&bucket_id);
        self.buckets.remove(&bucket_id);
        self.usage.remove_quota(&bucket_id);
        self.erased.insert(bucket_id.clone());
        let pending = self.gc.len_for_bucket(&bucket_id);
        StreamResponse::BucketPurged {
            bucket_id,
            removed_streams,
            pending_cold_gc_entries: u64::try_from(pending).unwrap_or(u64::MAX),
        }
    }

    pub(crate) fn set_bucket_quota(
        &mut self,
        bucket_id: String,
        max_streams: Option<u64>,
        max_retained_bytes: Option<u64>,
    ) -> StreamResponse {
        if let Err(e) = check_bucket_id(&bucket_id) {
            return e;
        }
        if self.erased.contains(&bucket_id) {
            return StreamResponse::error(
                StreamErrorCode::BucketErased,
                format!("bucket '{bucket_id}' was permanently erased"),
            );
        }
        let quota = BucketQuota {
            max_streams,
            max_retained_bytes,
        };
        if quota.is_unlimited() {
            self.usage.remove_quota(&bucket_id);
        } else {
            self.usage.set_quota(&bucket_id, quota);
        }
        StreamResponse::BucketQuotaSet { bucket_id }
    }
}
