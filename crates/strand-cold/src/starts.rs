//! Where messages start inside a flushed object, kept beside it so reads
//! below the hot buffer can still begin and end at whole messages.
//!
//! The state machine merges a stream's message records when a flush takes
//! its bytes (the reference's format keeps no more), so the cold tier keeps
//! them: each object that holds a piece of a non-JSON stream has a sidecar
//! object named [`sidecar_name`] (the object's name plus `.starts`),
//! written before the object and before the `FlushCold` that makes it
//! readable, and deleted with it:
//!
//! ```text
//! sidecar  := magic "STRMSG01" (8 bytes) ‖ count: u32 LE ‖ count × position: u32 LE
//! position := a byte position in the object where a message starts,
//!             strictly ascending, each below the object's size
//! ```
//!
//! (The local segment store adds its usual checksummed trailer to every
//! file, this one included.) A piece's first position is its first byte:
//! where an earlier flush cut a message (only a message longer than a
//! flush's piece), the rest of it counts as a message. Objects written
//! before sidecars existed, objects over 4 GiB, and JSON streams (whose
//! record index the machine keeps) have none, and are read from exactly
//! the offset asked for.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};

use crate::store::{ColdBackend, ColdError};

/// What a sidecar's name adds to its object's.
pub const SUFFIX: &str = ".starts";

const MAGIC: &[u8; 8] = b"STRMSG01";

/// Bytes before the positions.
pub const HEADER_LEN: u64 = 12;

/// Most positions a sidecar may claim (a 64 MiB sidecar): a header that
/// says more is damage, not a reason to read that much.
pub const MAX_POSITIONS: u32 = 1 << 24;

/// The sidecar of `object`.
pub fn sidecar_name(object: &str) -> String {
    format!("{object}{SUFFIX}")
}

/// The object a sidecar belongs to; `None` when `name` is not a sidecar.
pub fn object_of(name: &str) -> Option<&str> {
    name.strip_suffix(SUFFIX).filter(|o| !o.is_empty())
}

/// Whether `name` is live: it is in `live`, or it is the sidecar of an
/// object that is.
pub fn is_live(live: &std::collections::HashSet<String>, name: &str) -> bool {
    live.contains(name) || object_of(name).is_some_and(|o| live.contains(o))
}

/// The object positions of `(object_offset, chunk_start, message_starts)`
/// pieces, sorted; `None` when a position does not fit the format (an
/// object of 4 GiB or more), or when there is none.
pub fn positions<'a>(pieces: impl IntoIterator<Item = (u64, u64, &'a [u64])>) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for (object_offset, chunk_start, starts) in pieces {
        for &start in starts {
            let at = object_offset.checked_add(start.checked_sub(chunk_start)?)?;
            out.push(u32::try_from(at).ok()?);
        }
    }
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then_some(out)
}

/// The sidecar holding `positions` (sorted, distinct).
pub fn encode(positions: &[u32]) -> Bytes {
    let mut out = BytesMut::with_capacity(12 + 4 * positions.len());
    out.put_slice(MAGIC);
    out.put_u32_le(u32::try_from(positions.len()).unwrap_or(u32::MAX));
    for p in positions {
        out.put_u32_le(*p);
    }
    out.freeze()
}

/// The count a sidecar's header announces.
///
/// # Errors
/// A short header, a wrong magic, or a count over [`MAX_POSITIONS`].
pub fn decode_header(header: &[u8]) -> Result<u32, String> {
    let (Some(magic), Some(count)) = (header.get(..8), header.get(8..12)) else {
        return Err(format!("sidecar header of {} bytes", header.len()));
    };
    if magic != MAGIC {
        return Err("not a message-start sidecar (wrong magic)".into());
    }
    let mut raw = [0u8; 4];
    raw.copy_from_slice(count);
    let count = u32::from_le_bytes(raw);
    if count > MAX_POSITIONS {
        return Err(format!("sidecar claims {count} positions"));
    }
    Ok(count)
}

/// The positions of a sidecar's body (what follows its header).
///
/// # Errors
/// A body whose length is not `4 × count`, or positions that do not
/// ascend strictly.
pub fn decode_body(count: u32, body: &[u8]) -> Result<Vec<u32>, String> {
    if body.len() as u64 != 4 * u64::from(count) {
        return Err(format!(
            "sidecar body of {} bytes for {count} positions",
            body.len()
        ));
    }
    let out: Vec<u32> = body
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if out.windows(2).any(|w| w[0] >= w[1]) {
        return Err("sidecar positions do not ascend".into());
    }
    Ok(out)
}

/// A whole sidecar's positions.
///
/// # Errors
/// As [`decode_header`] and [`decode_body`].
pub fn decode(bytes: &[u8]) -> Result<Vec<u32>, String> {
    let count = decode_header(bytes)?;
    decode_body(count, bytes.get(12..).unwrap_or_default())
}

/// One object's message starts, in object positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starts(Arc<[u32]>);

impl Starts {
    /// The starts of positions.
    pub fn new(positions: Vec<u32>) -> Self {
        Self(positions.into())
    }

    /// The last start at or before `at`, not below `low`.
    pub fn at_or_before(&self, at: u64, low: u64) -> Option<u64> {
        let after = self.0.partition_point(|&p| u64::from(p) <= at);
        let p = u64::from(*self.0.get(after.checked_sub(1)?)?);
        (p >= low).then_some(p)
    }

    /// The first start after `at`, below `high`.
    pub fn after(&self, at: u64, high: u64) -> Option<u64> {
        let i = self.0.partition_point(|&p| u64::from(p) <= at);
        let p = u64::from(*self.0.get(i)?);
        (p < high).then_some(p)
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Cached sidecars, oldest first: object, its starts (`None`: it has no
/// sidecar).
type Entries = VecDeque<(String, Option<Starts>)>;

/// Loaded sidecars, bounded in positions held.
#[derive(Debug)]
pub(crate) struct StartsCache {
    capacity: usize,
    inner: Mutex<(Entries, usize)>,
}

/// What one cached entry weighs.
fn weight(starts: Option<&Starts>) -> usize {
    1 + starts.map_or(0, Starts::len)
}

impl StartsCache {
    /// A cache of at most `capacity` positions (an entry without a sidecar
    /// weighs one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new((VecDeque::new(), 0)),
        }
    }

    fn get(&self, object: &str) -> Option<Option<Starts>> {
        let g = self.inner.lock().ok()?;
        g.0.iter()
            .find_map(|(n, s)| (n == object).then(|| s.clone()))
    }

    fn put(&self, object: &str, starts: Option<Starts>) {
        let w = weight(starts.as_ref());
        if w > self.capacity / 4 {
            return;
        }
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        g.1 += w;
        g.0.push_back((object.to_owned(), starts));
        while g.1 > self.capacity {
            match g.0.pop_front() {
                Some((_, s)) => g.1 -= weight(s.as_ref()),
                None => break,
            }
        }
    }

    /// The starts of `object`, from the cache or its sidecar; `None` when
    /// it has no sidecar.
    ///
    /// # Errors
    /// The store failed, or the sidecar is damaged.
    pub(crate) async fn load(
        &self,
        backend: &dyn ColdBackend,
        object: &str,
    ) -> Result<Option<Starts>, ColdError> {
        if let Some(hit) = self.get(object) {
            return Ok(hit);
        }
        let name = sidecar_name(object);
        let damaged = |why: String| ColdError::Damaged(format!("{name}: {why}"));
        let header = match backend.get_range(&name, 0..HEADER_LEN).await {
            Ok(h) => h,
            Err(ColdError::NotFound(_)) => {
                self.put(object, None);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let count = decode_header(&header).map_err(damaged)?;
        let body = if count == 0 {
            Bytes::new()
        } else {
            let end = HEADER_LEN + 4 * u64::from(count);
            backend.get_range(&name, HEADER_LEN..end).await?
        };
        let starts = Starts::new(decode_body(count, &body).map_err(damaged)?);
        self.put(object, Some(starts.clone()));
        Ok(Some(starts))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        let s = sidecar_name("g001/p/0000000000001-00000000000000ab.pack");
        assert_eq!(s, "g001/p/0000000000001-00000000000000ab.pack.starts");
        assert_eq!(
            object_of(&s),
            Some("g001/p/0000000000001-00000000000000ab.pack")
        );
        assert_eq!(object_of("g001/p/x.pack"), None);
        assert_eq!(object_of(".starts"), None);
        let live = ["g001/a.bin".to_owned()].into_iter().collect();
        assert!(is_live(&live, "g001/a.bin"));
        assert!(is_live(&live, "g001/a.bin.starts"));
        assert!(!is_live(&live, "g001/b.bin.starts"));
    }

    #[test]
    fn positions_place_each_piece_at_its_object_offset() {
        // A piece of stream offsets [100, 110) at object position 20, and
        // one of [5, 9) at 0.
        let p = positions([(20, 100, &[100, 104][..]), (0, 5, &[5, 7][..])]).unwrap();
        assert_eq!(p, [0, 2, 20, 24]);
        assert_eq!(positions([(0, 0, &[][..])]), None);
        assert_eq!(positions([(1 << 32, 0, &[0][..])]), None, "too far");
        assert_eq!(positions([(0, 10, &[3][..])]), None, "before its chunk");
    }

    #[test]
    fn the_format_round_trips_and_is_stable() {
        let bytes = encode(&[0, 6, 10, 300]);
        insta::assert_snapshot!(hex(&bytes), @"5354524d53473031040000000000000006000000 0a0000002c010000");
        assert_eq!(decode(&bytes).unwrap(), [0, 6, 10, 300]);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<u32>::new());
    }

    fn hex(b: &[u8]) -> String {
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("{} {}", &h[..40], &h[40..])
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let good = encode(&[1, 2, 3]);
        assert!(decode(&good[..11]).is_err(), "short header");
        assert!(decode(&good[..15]).is_err(), "short body");
        let mut magic = good.to_vec();
        magic[0] = b'X';
        assert!(decode(&magic).is_err());
        let mut order = good.to_vec();
        order[12..16].copy_from_slice(&9u32.to_le_bytes());
        assert!(decode(&order).is_err(), "not ascending");
        let mut huge = good.to_vec();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_header(&huge).is_err());
        for cut in 0..good.len() {
            let _ = decode(&good[..cut]);
        }
    }

    #[test]
    fn lookups_stay_inside_a_piece() {
        let s = Starts::new(vec![0, 6, 10, 20, 26]);
        assert_eq!(s.at_or_before(8, 0), Some(6));
        assert_eq!(s.at_or_before(10, 0), Some(10));
        assert_eq!(s.at_or_before(22, 20), Some(20));
        assert_eq!(s.at_or_before(19, 12), None, "10 is another piece's");
        assert_eq!(s.after(8, 100), Some(10));
        assert_eq!(s.after(22, 26), None, "26 is past the piece");
        assert_eq!(s.after(26, 100), None);
    }

    #[tokio::test]
    async fn the_cache_loads_sidecars_and_remembers_missing_ones() {
        let backend = crate::ObjectStoreBackend::memory();
        backend
            .put(&sidecar_name("g000/a.bin"), encode(&[0, 4]))
            .await
            .unwrap();
        let cache = StartsCache::new(16);
        let a = cache.load(&backend, "g000/a.bin").await.unwrap().unwrap();
        assert_eq!(a.at_or_before(5, 0), Some(4));
        assert_eq!(cache.load(&backend, "g000/b.bin").await.unwrap(), None);
        backend
            .put(
                &sidecar_name("g000/c.bin"),
                Bytes::from_static(b"STRMSG01\x09"),
            )
            .await
            .unwrap();
        assert!(matches!(
            cache.load(&backend, "g000/c.bin").await,
            Err(ColdError::Damaged(_))
        ));
        // Bounded: many entries push the first ones out.
        for i in 0..40 {
            cache.put(&format!("x{i}"), None);
        }
        assert!(cache.get("g000/a.bin").is_none());
    }
}
