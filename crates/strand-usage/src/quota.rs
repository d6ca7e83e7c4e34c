//! `BucketQuota`, its snapshot record and the quota-violation error
//! (spec 01 §12, 03 §9).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Limits for one bucket in one state machine. `None` means no limit.
///
/// Both fields may be absent on input, so `{}` decodes to the unlimited quota.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketQuota {
    /// Maximum number of live streams; a create fails once `stream_count >= max`.
    pub max_streams: Option<u64>,
    /// Maximum retained bytes; a write fails if it would push
    /// `retained_bytes` above this value.
    pub max_retained_bytes: Option<u64>,
}

impl BucketQuota {
    /// True exactly when neither limit is set.
    #[must_use]
    pub fn is_unlimited(&self) -> bool {
        self.max_streams.is_none() && self.max_retained_bytes.is_none()
    }
}

/// One entry of the quota report and of a group snapshot's `bucket_quotas`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketQuotaSnapshot {
    /// The bucket id.
    pub bucket_id: String,
    /// That bucket's quota.
    pub quota: BucketQuota,
}

/// Which quota limit an admission check found exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaLimit {
    /// `max_streams` (create only); carries the limit.
    MaxStreams(u64),
    /// `max_retained_bytes` (create and append); carries the limit.
    MaxRetainedBytes(u64),
}

/// An admission check failed. The state machine answers it with
/// `StreamErrorCode::QuotaExceeded`, `next_offset: None` and an empty
/// context, using this value's `Display` text as the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaExceeded {
    /// The bucket whose quota was exceeded.
    pub bucket_id: String,
    /// The limit that was exceeded.
    pub limit: QuotaLimit,
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.limit {
            QuotaLimit::MaxStreams(max) => write!(
                f,
                "bucket '{}' stream-count quota exceeded in this group ({max} max)",
                self.bucket_id
            ),
            QuotaLimit::MaxRetainedBytes(max) => write!(
                f,
                "bucket '{}' retained-bytes quota exceeded in this group ({max} max)",
                self.bucket_id
            ),
        }
    }
}

impl std::error::Error for QuotaExceeded {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_unlimited_exactly_when_both_none() {
        assert!(BucketQuota::default().is_unlimited());
        assert!(
            !BucketQuota {
                max_streams: Some(0),
                max_retained_bytes: None
            }
            .is_unlimited()
        );
        assert!(
            !BucketQuota {
                max_streams: None,
                max_retained_bytes: Some(0)
            }
            .is_unlimited()
        );
        assert!(
            !BucketQuota {
                max_streams: Some(1),
                max_retained_bytes: Some(2)
            }
            .is_unlimited()
        );
    }

    #[test]
    fn messages_name_bucket_and_limit() {
        let streams = QuotaExceeded {
            bucket_id: "benchcmp".to_owned(),
            limit: QuotaLimit::MaxStreams(2),
        };
        assert_eq!(
            streams.to_string(),
            "bucket 'benchcmp' stream-count quota exceeded in this group (2 max)"
        );
        let bytes = QuotaExceeded {
            bucket_id: "benchcmp".to_owned(),
            limit: QuotaLimit::MaxRetainedBytes(4),
        };
        assert_eq!(
            bytes.to_string(),
            "bucket 'benchcmp' retained-bytes quota exceeded in this group (4 max)"
        );
    }
}
