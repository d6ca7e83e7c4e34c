//! Per-token limits, so one client cannot starve the others: a request
//! rate (a token bucket per token subject) and a number of concurrent live
//! readers per subject. Both answer 429 with `Retry-After`. They apply when
//! authentication is on (a request without a token has no identity to
//! count against; the node-wide limits still bound everything).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::StatusCode;

use crate::errors::ApiError;

/// Most subjects tracked at once; the idlest are forgotten beyond it.
const MAX_TRACKED: usize = 100_000;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// The per-subject counters.
#[derive(Debug)]
pub struct Limits {
    rate: f64,
    live_readers: usize,
    buckets: Mutex<HashMap<String, Bucket>>,
    live: Arc<Mutex<HashMap<String, usize>>>,
}

/// A live-reader place of one subject; dropping it frees the place.
#[derive(Debug)]
pub struct LivePlace {
    subject: String,
    live: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for LivePlace {
    fn drop(&mut self) {
        let mut live = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = live.get_mut(&self.subject) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                live.remove(&self.subject);
            }
        }
    }
}

fn too_many(message: String, retry_after: u64) -> ApiError {
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, message).with_header(
        axum::http::header::RETRY_AFTER,
        retry_after.max(1).to_string(),
    )
}

impl Limits {
    /// `rate` requests per second per subject (burst `rate`; 0 = no limit)
    /// and `live_readers` concurrent live readers per subject (0 = no
    /// limit).
    pub fn new(rate: u64, live_readers: usize) -> Self {
        Self {
            rate: rate as f64,
            live_readers,
            buckets: Mutex::new(HashMap::new()),
            live: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Takes one request from the subject's bucket, or answers 429.
    pub fn admit(&self, subject: &str) -> Result<(), ApiError> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_TRACKED && !buckets.contains_key(subject) {
            // Forget the fullest (idlest) buckets: they would refill anyway.
            let rate = self.rate;
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.updated).as_secs_f64() * rate < rate
            });
        }
        let bucket = buckets.entry(subject.to_owned()).or_insert(Bucket {
            tokens: self.rate,
            updated: now,
        });
        let elapsed = now.duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.rate);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - bucket.tokens) / self.rate).ceil() as u64;
            Err(too_many(
                format!(
                    "more than {} requests per second for {subject:?}",
                    self.rate
                ),
                wait,
            ))
        }
    }

    /// Takes a live-reader place for the subject, or answers 429.
    pub fn live_place(&self, subject: &str) -> Result<Option<LivePlace>, ApiError> {
        if self.live_readers == 0 {
            return Ok(None);
        }
        let mut live = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = live.entry(subject.to_owned()).or_insert(0);
        if *n >= self.live_readers {
            return Err(too_many(
                format!(
                    "{subject:?} already holds {} live readers",
                    self.live_readers
                ),
                1,
            ));
        }
        *n += 1;
        Ok(Some(LivePlace {
            subject: subject.to_owned(),
            live: Arc::clone(&self.live),
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_refills() {
        let l = Limits::new(3, 0);
        for _ in 0..3 {
            l.admit("a").unwrap();
        }
        let refused = l.admit("a").unwrap_err();
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(
            refused
                .headers
                .iter()
                .any(|(n, v)| n == "retry-after" && v == "1")
        );
        // Another subject has its own bucket.
        l.admit("b").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        l.admit("a").unwrap();
        assert!(Limits::new(0, 0).admit("x").is_ok());
    }

    #[test]
    fn live_places_are_counted_and_freed() {
        let l = Limits::new(0, 2);
        let a = l.live_place("s").unwrap();
        let _b = l.live_place("s").unwrap();
        assert!(l.live_place("s").is_err());
        assert!(l.live_place("t").unwrap().is_some());
        drop(a);
        assert!(l.live_place("s").unwrap().is_some());
        assert!(Limits::new(0, 0).live_place("s").unwrap().is_none());
    }
}
