//! Reads that reach below the hot buffer: the machine's read plan names
//! the objects, ranged GETs fetch them, and the hot bytes after them are
//! added as `Bytes` slices of the hot buffer, so a page is one answer
//! whatever tier its bytes live in. A small cache keeps recently read
//! ranges, bounded in bytes.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use strand::{
    BucketStreamId, CORRECTED_MAX_READ_BYTES, HotRead, ObjectPayloadRef, StreamReadPlan,
    StreamReadSegment, StreamResponse,
};
use strand_engine::{Engine, EngineError, ReadFrom, ReadOutcome};

use crate::Shared;
use crate::stats::ColdStats;
use crate::store::ColdError;

/// Why a cold read could not be served (as opposed to the machine
/// answering it with an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColdReadError {
    /// The engine refused the query.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The object store failed.
    #[error(transparent)]
    Store(#[from] ColdError),
    /// The range is held in a way this node cannot fetch (an exclusive
    /// chunk or external object the machine does not record).
    #[error("the range {0}..{1} has no recorded object")]
    Unrecorded(u64, u64),
}

/// Cached ranges, oldest first: object, range in it, bytes.
type Entries = VecDeque<(String, Range<u64>, Bytes)>;

/// A byte-bounded FIFO cache of fetched ranges.
#[derive(Debug)]
pub(crate) struct RangeCache {
    capacity: usize,
    inner: Mutex<(Entries, usize)>,
}

impl RangeCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new((VecDeque::new(), 0)),
        }
    }

    fn get(&self, name: &str, range: &Range<u64>) -> Option<Bytes> {
        let g = self.inner.lock().ok()?;
        g.0.iter().find_map(|(n, r, b)| {
            (n == name && r.start <= range.start && range.end <= r.end).then(|| {
                let from = usize::try_from(range.start - r.start).unwrap_or(0);
                let to = usize::try_from(range.end - r.start).unwrap_or(0);
                b.slice(from..to)
            })
        })
    }

    fn put(&self, name: &str, range: Range<u64>, bytes: Bytes) {
        if bytes.len() > self.capacity / 4 {
            return;
        }
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        g.1 += bytes.len();
        g.0.push_back((name.to_owned(), range, bytes));
        while g.1 > self.capacity {
            match g.0.pop_front() {
                Some((_, _, b)) => g.1 -= b.len(),
                None => break,
            }
        }
    }
}

/// What the group answered for a read that starts below the hot buffer.
enum Planned {
    /// Entirely hot after all (the data was read concurrently with a
    /// flush, or the caller asked for a hot range).
    Hot(HotRead),
    /// The cold part's plan, and what follows it on the page.
    Cold(StreamReadPlan, After),
}

/// What follows a page's cold part.
enum After {
    /// Nothing known: the page ends with its cold part, which the
    /// object's sidecar ends on a message boundary where it knows one.
    Unknown,
    /// The page ends with its cold part, at a message start the machine
    /// knows (the hot start).
    Boundary,
    /// These hot bytes.
    Hot(HotRead),
}

/// One ranged GET: an object and a byte range in it, serving one or more
/// plan segments that follow each other.
struct Fetch {
    name: String,
    range: Range<u64>,
}

/// Plans a read. `now_ms` is `None` for a fork reading through the
/// stream (`docs/forks.md` §4): the machine's `*_through` reads, which
/// ignore expiry and soft deletion.
fn plan_read(
    m: &strand::StreamStateMachine,
    id: &BucketStreamId,
    from: ReadFrom,
    max_len: usize,
    now_ms: Option<u64>,
) -> Result<Planned, StreamResponse> {
    let offset = match from {
        ReadFrom::Start => m.read_start_offset(id),
        ReadFrom::Tail => m.head(id).map_or(0, |h| h.tail_offset),
        ReadFrom::Offset(o) => o,
        ReadFrom::Within(o) => m.whole_message_start(id, o, max_len),
    };
    let hot = |offset: u64, len: usize| match now_ms {
        Some(now_ms) => m.read_hot_at(id, offset, len, now_ms),
        None => m.read_hot_through(id, offset, len),
    };
    let hot_start = m.hot_start_offset(id);
    let cold_len = usize::try_from(hot_start.saturating_sub(offset))
        .unwrap_or(usize::MAX)
        .min(max_len);
    // Pages end on message boundaries where the machine knows them, so
    // every offset handed out is one a client may resume from.
    let whole = |mut read: HotRead| {
        if now_ms.is_some() {
            m.end_on_message(id, &mut read);
        }
        read
    };
    if cold_len == 0 {
        return hot(offset, max_len).map(|read| Planned::Hot(whole(read)));
    }
    let plan = match now_ms {
        Some(now_ms) => m.read_plan_at(id, offset, cold_len, now_ms)?,
        None => m.read_plan_through(id, offset, cold_len)?,
    };
    let used = usize::try_from(plan.next_offset.saturating_sub(offset)).unwrap_or(usize::MAX);
    let rest = max_len.saturating_sub(used);
    let after = if rest > 0 && plan.next_offset == hot_start && !plan.up_to_date {
        match hot(hot_start, rest) {
            Ok(read) if now_ms.is_some() => after_cold(m, id, read),
            Ok(read) => After::Hot(read),
            Err(_) => After::Unknown,
        }
    } else {
        After::Unknown
    };
    Ok(Planned::Cold(plan, after))
}

/// The hot bytes that follow a page's cold part, ended as the whole page
/// must end: where they stop inside a message, at that message's start,
/// and before them all when that start is the hot start or below it.
/// (The machine's own rule keeps a page holding no whole message; this
/// page holds the cold bytes before it, so it ends the same whichever
/// tier its bytes were in when it was read.)
fn after_cold(m: &strand::StreamStateMachine, id: &BucketStreamId, mut read: HotRead) -> After {
    if read.up_to_date {
        return After::Hot(read);
    }
    match m.message_bounds(id, read.next_offset) {
        Some((start, _)) if start == read.offset => After::Boundary,
        Some((start, _)) if start < read.offset => After::Unknown,
        Some((start, _)) => {
            read.truncate_at(start);
            After::Hot(read)
        }
        None => After::Hot(read),
    }
}

/// Reads a page that may start in the cold tier: `Ok(Err(response))` is
/// the machine's own answer (not found, gone, out of range).
pub(crate) async fn read(
    shared: &Arc<Shared>,
    engine: &Engine,
    id: BucketStreamId,
    from: ReadFrom,
    max_len: usize,
    through: bool,
) -> Result<ReadOutcome, ColdReadError> {
    let mut from = from;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let now_ms = (!through).then(|| engine.now_ms());
        let query_id = id.clone();
        let planned = engine
            .query(&id, move |m| plan_read(m, &query_id, from, max_len, now_ms))
            .await?;
        let (plan, after) = match planned {
            Err(response) => return Ok(Err(response)),
            Ok(Planned::Hot(read)) => return Ok(Ok(read)),
            Ok(Planned::Cold(plan, after)) => (plan, after),
        };
        // An offset a client computed, inside a flushed message: the read
        // starts at that message, as it does above the hot start.
        if let ReadFrom::Within(_) = from {
            from = ReadFrom::Offset(plan.offset);
            if let Some(start) = message_start(shared, &plan, max_len).await? {
                from = ReadFrom::Offset(start);
                continue;
            }
        }
        match fetch(shared, &plan).await {
            Ok(slices) => {
                let cold_bytes: u64 = slices.iter().map(|s| s.len() as u64).sum();
                ColdStats::add(&shared.stats.cold_reads, 1);
                ColdStats::add(&shared.stats.cold_read_bytes, cold_bytes);
                let mut read = HotRead {
                    offset: plan.offset,
                    next_offset: plan.next_offset,
                    content_type: plan.content_type.clone(),
                    slices,
                    up_to_date: plan.up_to_date,
                    closed: plan.closed,
                };
                let ends_cold = match after {
                    After::Hot(hot) => {
                        read.next_offset = hot.next_offset;
                        read.up_to_date = hot.up_to_date;
                        read.closed = hot.closed;
                        read.slices.extend(hot.slices);
                        false
                    }
                    After::Boundary => false,
                    After::Unknown => true,
                };
                if !through && ends_cold {
                    // The page ends in a flushed object: at a message
                    // boundary where its sidecar knows one.
                    end_on_message(shared, &plan, &mut read).await?;
                }
                return Ok(Ok(read));
            }
            // Reclaimed between plan and fetch (deleted, retained past):
            // plan again, the machine now answers differently.
            Err(ColdReadError::Store(ColdError::NotFound(_))) if attempt < 3 => continue,
            Err(e) => {
                if let ColdReadError::Store(s) = &e {
                    shared.stats.failure("cold read", s);
                }
                return Err(e);
            }
        }
    }
}

/// The object segment of `plan` holding stream offset `at`, with the
/// object positions of its piece (`[low, high)`) and of `at`.
fn locate(plan: &StreamReadPlan, at: u64) -> Option<(&ObjectPayloadRef, u64, u64, u64)> {
    plan.segments.iter().find_map(|segment| {
        let StreamReadSegment::Object(s) = segment else {
            return None;
        };
        let o = &s.object;
        if at < o.start_offset || at >= o.end_offset {
            return None;
        }
        let low = o.object_offset;
        let high = low.checked_add(o.end_offset - o.start_offset)?;
        Some((o, low, high, low.checked_add(at - o.start_offset)?))
    })
}

/// Where a read of `plan` (which starts at an offset a client may have
/// computed) starts instead: the start of the flushed message holding
/// `plan.offset`, when the object's sidecar knows it, it is in the same
/// piece, and the whole message fits a page of `max_len` bytes (the rule
/// of `StreamStateMachine::whole_message_start`). `None`: read from
/// `plan.offset` itself.
async fn message_start(
    shared: &Arc<Shared>,
    plan: &StreamReadPlan,
    max_len: usize,
) -> Result<Option<u64>, ColdError> {
    let Some((object, low, high, at)) = locate(plan, plan.offset) else {
        return Ok(None);
    };
    let Some(starts) = shared
        .starts
        .load(&*shared.backend, &object.s3_path)
        .await?
    else {
        return Ok(None);
    };
    let Some(start) = starts.at_or_before(at, low) else {
        return Ok(None);
    };
    if start == at {
        return Ok(None);
    }
    let end = starts.after(at, high).unwrap_or(high);
    let page = u64::try_from(max_len)
        .unwrap_or(u64::MAX)
        .min(CORRECTED_MAX_READ_BYTES);
    if end - start > page {
        return Ok(None);
    }
    Ok(Some(object.start_offset + (start - low)))
}

/// Ends a page whose last byte is flushed at the last message start inside
/// it (after its first byte), when the object's sidecar knows one: every
/// offset handed out is then one [`message_start`] leaves where it is.
async fn end_on_message(
    shared: &Arc<Shared>,
    plan: &StreamReadPlan,
    read: &mut HotRead,
) -> Result<(), ColdError> {
    if read.up_to_date || read.next_offset <= read.offset {
        return Ok(());
    }
    let last = read.next_offset - 1;
    let Some((object, low, _, at)) = locate(plan, last) else {
        return Ok(());
    };
    let Some(starts) = shared
        .starts
        .load(&*shared.backend, &object.s3_path)
        .await?
    else {
        return Ok(());
    };
    // The page's end is `at + 1`; a start there means it is whole already.
    let Some(start) = starts.at_or_before(at + 1, low) else {
        return Ok(());
    };
    read.truncate_at(object.start_offset + (start - low));
    Ok(())
}

/// One ranged GET, through the cache.
async fn fetch_one(
    shared: Arc<Shared>,
    name: String,
    range: Range<u64>,
) -> Result<Bytes, ColdError> {
    if let Some(hit) = shared.cache.get(&name, &range) {
        ColdStats::add(&shared.stats.cache_hits, 1);
        return Ok(hit);
    }
    let bytes = shared.backend.get_range(&name, range.clone()).await?;
    if bytes.len() as u64 != range.end - range.start {
        return Err(ColdError::Store(format!(
            "object {name} returned {} bytes for range {range:?}",
            bytes.len()
        )));
    }
    shared.cache.put(&name, range, bytes.clone());
    Ok(bytes)
}

/// Fetches a plan's segments, merging ranges that follow each other in
/// one object into one GET, a few GETs at a time.
async fn fetch(shared: &Arc<Shared>, plan: &StreamReadPlan) -> Result<Vec<Bytes>, ColdReadError> {
    let mut fetches: Vec<Fetch> = Vec::new();
    let mut hot_parts: Vec<(usize, Bytes)> = Vec::new();
    let mut order: Vec<usize> = Vec::new(); // index into fetches, or usize::MAX for a hot part
    for segment in &plan.segments {
        match segment {
            StreamReadSegment::Object(s) => {
                let within = s.read_start_offset.saturating_sub(s.object.start_offset);
                let start = s.object.object_offset.saturating_add(within);
                let end = start.saturating_add(s.len as u64);
                let last_is_fetch =
                    !fetches.is_empty() && order.last() == Some(&(fetches.len() - 1));
                match fetches.last_mut() {
                    Some(f)
                        if f.name == s.object.s3_path && f.range.end == start && last_is_fetch =>
                    {
                        f.range.end = end;
                    }
                    _ => {
                        fetches.push(Fetch {
                            name: s.object.s3_path.clone(),
                            range: start..end,
                        });
                        order.push(fetches.len() - 1);
                    }
                }
            }
            StreamReadSegment::Hot(bytes) => {
                hot_parts.push((order.len(), Bytes::copy_from_slice(bytes)));
                order.push(usize::MAX);
            }
            StreamReadSegment::ColdIndex(s) => {
                let start = s.read_start_offset;
                return Err(ColdReadError::Unrecorded(
                    start,
                    start.saturating_add(s.len as u64),
                ));
            }
        }
    }
    let jobs: Vec<_> = fetches
        .iter()
        .map(|f| fetch_one(Arc::clone(shared), f.name.clone(), f.range.clone()))
        .collect();
    let fetched: Vec<Bytes> = futures_util::stream::iter(jobs)
        .buffered(8)
        .try_collect()
        .await?;
    let mut out = Vec::with_capacity(plan.segments.len());
    let mut hot = hot_parts.into_iter().peekable();
    for (position, index) in order.iter().enumerate() {
        if *index == usize::MAX {
            if let Some((at, bytes)) = hot.next()
                && at == position
            {
                out.push(bytes);
            }
            continue;
        }
        // One slice per GET: the segments it serves follow each other in
        // the object and on the page, so splitting it would only make the
        // server gather the pieces again.
        if let Some(bytes) = fetched.get(*index) {
            out.push(bytes.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_serves_sub_ranges_and_stays_bounded() {
        let c = RangeCache::new(40);
        c.put("a", 10..20, Bytes::from_static(b"0123456789"));
        assert_eq!(c.get("a", &(12..15)).unwrap(), Bytes::from_static(b"234"));
        assert!(c.get("a", &(5..15)).is_none());
        assert!(c.get("b", &(12..15)).is_none());
        c.put("b", 0..10, Bytes::from_static(b"abcdefghij"));
        c.put("c", 0..10, Bytes::from_static(b"abcdefghij"));
        c.put("d", 0..10, Bytes::from_static(b"abcdefghij"));
        c.put("e", 0..10, Bytes::from_static(b"abcdefghij"));
        assert!(c.get("a", &(12..15)).is_none());
        assert!(c.get("e", &(0..1)).is_some());
    }
}
