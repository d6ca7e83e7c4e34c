//! Property tests: the monotonic counters never decrease, entries are never
//! removed, gauges match live state, and restore from the ledger's own
//! reports reproduces it (spec 01 §12.2, 03 §8, 07 P1).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use strand_usage::{BucketQuota, BucketUsage, UsageLedger, write_units};

const BUCKETS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Event {
    Create {
        bucket: usize,
        bytes: u64,
        records: u64,
    },
    Append {
        pick: usize,
        bytes: u64,
        records: u64,
    },
    Retain {
        pick: usize,
        amount: u64,
    },
    Remove {
        pick: usize,
    },
    SetQuota {
        bucket: usize,
        max_streams: Option<u64>,
        max_bytes: Option<u64>,
    },
    DeleteBucket {
        bucket: usize,
    },
    PurgeBucket {
        bucket: usize,
    },
    RestoreRoundTrip,
}

fn event(max_bytes: u64) -> impl Strategy<Value = Event> {
    prop_oneof![
        (0..BUCKETS.len(), 0..=max_bytes, 0..4u64).prop_map(|(bucket, bytes, records)| {
            Event::Create {
                bucket,
                bytes,
                records,
            }
        }),
        (any::<usize>(), 1..=max_bytes, 0..4u64).prop_map(|(pick, bytes, records)| Event::Append {
            pick,
            bytes,
            records
        }),
        (any::<usize>(), any::<u64>()).prop_map(|(pick, amount)| Event::Retain { pick, amount }),
        any::<usize>().prop_map(|pick| Event::Remove { pick }),
        (0..BUCKETS.len(), any::<Option<u64>>(), any::<Option<u64>>()).prop_map(
            |(bucket, max_streams, max_bytes)| Event::SetQuota {
                bucket,
                max_streams,
                max_bytes
            }
        ),
        (0..BUCKETS.len()).prop_map(|bucket| Event::DeleteBucket { bucket }),
        (0..BUCKETS.len()).prop_map(|bucket| Event::PurgeBucket { bucket }),
        Just(Event::RestoreRoundTrip),
    ]
}

/// Live streams as (bucket index, tail − retained).
type Streams = Vec<(usize, u64)>;

fn apply(ledger: &mut UsageLedger, streams: &mut Streams, event: &Event) {
    match *event {
        Event::Create {
            bucket,
            bytes,
            records,
        } => {
            ledger.record_stream_created(BUCKETS[bucket], bytes, records);
            streams.push((bucket, bytes));
        }
        Event::Append {
            pick,
            bytes,
            records,
        } => {
            if streams.is_empty() {
                return;
            }
            let i = pick % streams.len();
            ledger.record_append(BUCKETS[streams[i].0], bytes, records);
            streams[i].1 = streams[i].1.saturating_add(bytes);
        }
        Event::Retain { pick, amount } => {
            if streams.is_empty() {
                return;
            }
            let i = pick % streams.len();
            let delta = amount % (streams[i].1.saturating_add(1)).max(1);
            if delta > 0 {
                ledger.record_retention_advanced(BUCKETS[streams[i].0], delta);
                streams[i].1 -= delta;
            }
        }
        Event::Remove { pick } => {
            if streams.is_empty() {
                return;
            }
            let (bucket, retained) = streams.remove(pick % streams.len());
            ledger.record_stream_removed(BUCKETS[bucket], retained);
        }
        Event::SetQuota {
            bucket,
            max_streams,
            max_bytes,
        } => {
            let quota = BucketQuota {
                max_streams,
                max_retained_bytes: max_bytes,
            };
            ledger.set_quota(BUCKETS[bucket], quota);
            if quota.is_unlimited() {
                assert_eq!(ledger.quota(BUCKETS[bucket]), None);
            } else {
                assert_eq!(ledger.quota(BUCKETS[bucket]), Some(&quota));
            }
        }
        Event::DeleteBucket { bucket } => {
            // The machine only gets here for an empty bucket; the ledger does
            // not care, and keeps usage as is.
            let before = ledger.usage(BUCKETS[bucket]).copied();
            ledger.on_bucket_deleted(BUCKETS[bucket]);
            assert_eq!(ledger.usage(BUCKETS[bucket]).copied(), before);
            assert_eq!(ledger.quota(BUCKETS[bucket]), None);
        }
        Event::PurgeBucket { bucket } => {
            let mut kept = Vec::new();
            for (b, retained) in streams.drain(..) {
                if b == bucket {
                    ledger.record_stream_removed(BUCKETS[b], retained);
                } else {
                    kept.push((b, retained));
                }
            }
            *streams = kept;
            ledger.on_bucket_purged(BUCKETS[bucket]);
            assert_eq!(ledger.quota(BUCKETS[bucket]), None);
        }
        Event::RestoreRoundTrip => {
            let restored = UsageLedger::restore(
                streams.iter().map(|&(b, retained)| (BUCKETS[b], retained)),
                &ledger.usage_report(),
                &ledger.quota_report(),
            );
            assert_eq!(&restored, ledger);
            *ledger = restored;
        }
    }
}

fn counters(u: &BucketUsage) -> [u64; 3] {
    [
        u.committed_append_bytes,
        u.committed_records,
        u.committed_write_units,
    ]
}

fn snapshot_usage(ledger: &UsageLedger) -> BTreeMap<String, BucketUsage> {
    ledger
        .usage_report()
        .into_iter()
        .map(|r| (r.bucket_id, r.usage))
        .collect()
}

fn assert_monotonic(before: &BTreeMap<String, BucketUsage>, ledger: &UsageLedger) {
    for (bucket, old) in before {
        let new = ledger
            .usage(bucket)
            .expect("usage entries are never removed");
        let (o, n) = (counters(old), counters(new));
        for k in 0..3 {
            assert!(
                n[k] >= o[k],
                "counter {k} of {bucket} went down: {old:?} -> {new:?}"
            );
        }
    }
}

proptest! {
    #[test]
    fn counters_never_decrease_and_gauges_track_live_streams(
        events in prop::collection::vec(event(40_000), 1..80)
    ) {
        let mut ledger = UsageLedger::new();
        let mut streams = Streams::new();
        for event in &events {
            let before = snapshot_usage(&ledger);
            apply(&mut ledger, &mut streams, event);
            assert_monotonic(&before, &ledger);
            for (i, bucket) in BUCKETS.iter().enumerate() {
                let live: Vec<u64> =
                    streams.iter().filter(|(b, _)| *b == i).map(|(_, r)| *r).collect();
                match ledger.usage(bucket) {
                    Some(u) => {
                        prop_assert_eq!(u.stream_count, live.len() as u64);
                        prop_assert_eq!(u.retained_bytes, live.iter().sum::<u64>());
                    }
                    None => prop_assert!(live.is_empty()),
                }
            }
        }
    }

    #[test]
    fn counters_never_decrease_with_extreme_values(
        events in prop::collection::vec(
            (0..4u8, 0..BUCKETS.len(), any::<u64>(), any::<u64>()),
            1..60,
        )
    ) {
        let mut ledger = UsageLedger::new();
        for (kind, bucket, x, y) in events {
            let before = snapshot_usage(&ledger);
            let bucket = BUCKETS[bucket];
            let prior = ledger.usage(bucket).copied().unwrap_or_default();
            match kind {
                0 => ledger.record_stream_created(bucket, x, y),
                1 => ledger.record_append(bucket, x, y),
                2 => ledger.record_retention_advanced(bucket, x),
                _ => ledger.record_stream_removed(bucket, x),
            }
            assert_monotonic(&before, &ledger);
            let now = *ledger.usage(bucket).unwrap();
            if kind <= 1 {
                prop_assert_eq!(
                    now.committed_write_units,
                    prior.committed_write_units.saturating_add(write_units(x))
                );
                prop_assert_eq!(
                    now.committed_append_bytes,
                    prior.committed_append_bytes.saturating_add(x)
                );
            } else {
                prop_assert_eq!(counters(&now), counters(&prior));
            }
        }
    }
}
