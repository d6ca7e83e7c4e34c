//! The one storage trait the cold tier uses ([`ColdBackend`]: put, ranged
//! get, delete, list under a prefix), its `object_store` implementation
//! (local filesystem, in-memory, S3) and the fault-injecting wrapper.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use futures_util::future::BoxFuture;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// Why a storage operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColdError {
    /// The object does not exist.
    #[error("object not found: {0}")]
    NotFound(String),
    /// A name the store cannot hold.
    #[error("invalid object name {0:?}")]
    InvalidName(String),
    /// A segment file that fails its check (length, trailer, checksum):
    /// never served.
    #[error("{0}")]
    Damaged(String),
    /// Anything else (network, permissions, a full disk, injected faults):
    /// worth retrying.
    #[error("object store error: {0}")]
    Store(String),
}

/// One object found by a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object's name, relative to the backend's root.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written, in ms since the Unix epoch.
    pub last_modified_ms: u64,
}

/// What the cold tier needs from object storage. Names are relative
/// `/`-separated paths made of `[A-Za-z0-9._~-]` segments.
pub trait ColdBackend: Send + Sync + 'static {
    /// Stores `bytes` under `name`, atomically (readers never see part of
    /// it).
    fn put(&self, name: &str, bytes: Bytes) -> BoxFuture<'_, Result<(), ColdError>>;
    /// Stores the concatenation of `parts` under `name`, like
    /// [`ColdBackend::put`]; backends that can write the parts as they are
    /// (no copy into one buffer) override it.
    fn put_parts(&self, name: &str, parts: Vec<Bytes>) -> BoxFuture<'_, Result<(), ColdError>> {
        let mut whole = bytes::BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
        for part in &parts {
            whole.extend_from_slice(part);
        }
        self.put(name, whole.freeze())
    }
    /// Reads `range` (byte positions inside the object).
    fn get_range(&self, name: &str, range: Range<u64>) -> BoxFuture<'_, Result<Bytes, ColdError>>;
    /// Deletes an object; a missing object is not an error.
    fn delete(&self, name: &str) -> BoxFuture<'_, Result<(), ColdError>>;
    /// Every object whose name starts with the directory `prefix` (no
    /// trailing slash; empty for all).
    fn list(&self, prefix: &str) -> BoxFuture<'_, Result<Vec<ObjectInfo>, ColdError>>;
    /// A short description for logs and the status report.
    fn describe(&self) -> String;
}

/// A shared backend.
pub type SharedBackend = Arc<dyn ColdBackend>;

/// A [`ColdBackend`] over any `object_store` store, under a root prefix.
#[derive(Debug)]
pub struct ObjectStoreBackend {
    store: Arc<dyn ObjectStore>,
    root: String,
    description: String,
}

fn store_error(e: object_store::Error) -> ColdError {
    match e {
        object_store::Error::NotFound { path, .. } => ColdError::NotFound(path),
        other => ColdError::Store(other.to_string()),
    }
}

impl ObjectStoreBackend {
    /// Wraps a store; every name is placed under `root` (may be empty).
    pub fn new(store: Arc<dyn ObjectStore>, root: &str, description: impl Into<String>) -> Self {
        Self {
            store,
            root: root.trim_matches('/').to_owned(),
            description: description.into(),
        }
    }

    /// The local filesystem backend rooted at `dir` (created if missing).
    pub fn local(dir: &std::path::Path) -> Result<Self, ColdError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| ColdError::Store(format!("cannot create {}: {e}", dir.display())))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .map_err(store_error)?
            .with_automatic_cleanup(true);
        Ok(Self::new(
            Arc::new(store),
            "",
            format!("local:{}", dir.display()),
        ))
    }

    /// An in-memory backend (tests).
    pub fn memory() -> Self {
        Self::new(
            Arc::new(object_store::memory::InMemory::new()),
            "",
            "memory",
        )
    }

    /// S3 at `s3://bucket/prefix`, with credentials, region and endpoint
    /// from the usual environment variables (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL`; `AWS_ALLOW_HTTP=true` for a plain-HTTP
    /// endpoint).
    pub fn s3(url: &str) -> Result<Self, ColdError> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| ColdError::Store(format!("{url:?} is not an s3:// URL")))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(ColdError::Store(format!("{url:?} names no bucket")));
        }
        let mut builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            builder = builder.with_region("us-east-1");
        }
        if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
            if endpoint.starts_with("http://") {
                builder = builder.with_allow_http(true);
            }
            builder = builder
                .with_endpoint(endpoint)
                .with_virtual_hosted_style_request(false);
        }
        let store = builder.build().map_err(store_error)?;
        Ok(Self::new(Arc::new(store), prefix, format!("s3://{rest}")))
    }

    fn path(&self, name: &str) -> Result<Path, ColdError> {
        let full = if self.root.is_empty() {
            name.to_owned()
        } else if name.is_empty() {
            self.root.clone()
        } else {
            format!("{}/{name}", self.root)
        };
        Path::parse(&full).map_err(|_| ColdError::InvalidName(full))
    }

    fn relative(&self, path: &Path) -> String {
        let text = path.as_ref();
        if self.root.is_empty() {
            return text.to_owned();
        }
        text.strip_prefix(self.root.as_str())
            .map_or(text, |r| r.trim_start_matches('/'))
            .to_owned()
    }
}

impl ColdBackend for ObjectStoreBackend {
    fn put(&self, name: &str, bytes: Bytes) -> BoxFuture<'_, Result<(), ColdError>> {
        self.put_parts(name, vec![bytes])
    }

    fn put_parts(&self, name: &str, parts: Vec<Bytes>) -> BoxFuture<'_, Result<(), ColdError>> {
        let path = self.path(name);
        Box::pin(async move {
            self.store
                .put(&path?, parts.into_iter().collect::<PutPayload>())
                .await
                .map(|_| ())
                .map_err(store_error)
        })
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> BoxFuture<'_, Result<Bytes, ColdError>> {
        let path = self.path(name);
        Box::pin(async move {
            if range.is_empty() {
                return Ok(Bytes::new());
            }
            self.store
                .get_range(&path?, range)
                .await
                .map_err(store_error)
        })
    }

    fn delete(&self, name: &str) -> BoxFuture<'_, Result<(), ColdError>> {
        let path = self.path(name);
        Box::pin(async move {
            match self.store.delete(&path?).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(store_error(e)),
            }
        })
    }

    fn list(&self, prefix: &str) -> BoxFuture<'_, Result<Vec<ObjectInfo>, ColdError>> {
        let path = self.path(prefix);
        Box::pin(async move {
            let path = path?;
            let prefix = (!path.as_ref().is_empty()).then_some(&path);
            let metas: Vec<object_store::ObjectMeta> =
                match self.store.list(prefix).try_collect().await {
                    Ok(m) => m,
                    // A prefix that was never written is an empty listing.
                    Err(object_store::Error::NotFound { .. }) => Vec::new(),
                    Err(e) => return Err(store_error(e)),
                };
            Ok(metas
                .into_iter()
                .map(|m| ObjectInfo {
                    name: self.relative(&m.location),
                    size: m.size,
                    last_modified_ms: u64::try_from(m.last_modified.timestamp_millis())
                        .unwrap_or(0),
                })
                .collect())
        })
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

/// How often the fault wrapper fails or delays each kind of operation:
/// probabilities in parts per million.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Puts that fail without storing anything.
    pub fail_put_ppm: u32,
    /// Puts that store the object and then report failure (the ambiguous
    /// outcome of a timeout: the object becomes an orphan).
    pub phantom_put_ppm: u32,
    /// Ranged gets that fail.
    pub fail_get_ppm: u32,
    /// Deletes that fail without deleting.
    pub fail_delete_ppm: u32,
    /// Lists that fail.
    pub fail_list_ppm: u32,
    /// Operations delayed by up to `max_delay`.
    pub delay_ppm: u32,
    /// The longest injected delay.
    pub max_delay: Duration,
}

/// Counts of what the fault wrapper injected.
#[derive(Debug, Default)]
pub struct FaultCounts {
    /// Operations failed on purpose (including while down).
    pub failed: AtomicU64,
    /// Puts stored and then reported failed.
    pub phantoms: AtomicU64,
    /// Operations delayed.
    pub delayed: AtomicU64,
}

/// A backend wrapper that fails or delays operations at random with a
/// seed (deterministic sequence of decisions), and can be switched down
/// entirely (every operation fails) to simulate an outage.
pub struct FaultyBackend {
    inner: SharedBackend,
    plan: FaultPlan,
    state: AtomicU64,
    down: AtomicBool,
    deletes_down: AtomicBool,
    /// Puts still to turn into phantoms whatever the plan draws.
    forced_phantoms: AtomicU64,
    /// What was injected so far.
    pub counts: FaultCounts,
}

impl FaultyBackend {
    /// Wraps `inner` with `plan`, drawing decisions from `seed`.
    pub fn new(inner: SharedBackend, plan: FaultPlan, seed: u64) -> Self {
        Self {
            inner,
            plan,
            state: AtomicU64::new(seed),
            down: AtomicBool::new(false),
            deletes_down: AtomicBool::new(false),
            forced_phantoms: AtomicU64::new(0),
            counts: FaultCounts::default(),
        }
    }

    /// Makes the next `n` puts that are not refused phantoms (stored, then
    /// reported failed), beside those the plan draws at random: a test
    /// that must exercise that path then does whatever the timing.
    pub fn phantom_next_puts(&self, n: u64) {
        self.forced_phantoms.store(n, Ordering::SeqCst);
    }

    /// Takes one forced phantom, if any is left.
    fn take_forced_phantom(&self) -> bool {
        self.forced_phantoms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Takes the store down (every operation fails) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Makes every delete fail (or not), the rest working.
    pub fn set_deletes_down(&self, down: bool) {
        self.deletes_down.store(down, Ordering::SeqCst);
    }

    /// Whether the store is down.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// The next pseudo-random number (splitmix64 over an atomic counter).
    fn next(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn hit(&self, ppm: u32) -> bool {
        ppm > 0 && self.next() % 1_000_000 < u64::from(ppm)
    }

    async fn maybe_delay(&self) {
        if self.hit(self.plan.delay_ppm) && !self.plan.max_delay.is_zero() {
            self.counts.delayed.fetch_add(1, Ordering::Relaxed);
            let max = u64::try_from(self.plan.max_delay.as_micros()).unwrap_or(u64::MAX);
            tokio::time::sleep(Duration::from_micros(self.next() % max.max(1))).await;
        }
    }

    fn fail(&self, what: &str, name: &str) -> ColdError {
        self.counts.failed.fetch_add(1, Ordering::Relaxed);
        ColdError::Store(format!("injected fault: {what} {name}"))
    }

    fn refuse(&self, ppm: u32) -> bool {
        self.is_down() || self.hit(ppm)
    }
}

impl ColdBackend for FaultyBackend {
    fn put(&self, name: &str, bytes: Bytes) -> BoxFuture<'_, Result<(), ColdError>> {
        self.put_parts(name, vec![bytes])
    }

    fn put_parts(&self, name: &str, parts: Vec<Bytes>) -> BoxFuture<'_, Result<(), ColdError>> {
        let name = name.to_owned();
        Box::pin(async move {
            self.maybe_delay().await;
            if self.refuse(self.plan.fail_put_ppm) {
                return Err(self.fail("put", &name));
            }
            let phantom = self.take_forced_phantom() || self.hit(self.plan.phantom_put_ppm);
            self.inner.put_parts(&name, parts).await?;
            if phantom {
                self.counts.phantoms.fetch_add(1, Ordering::Relaxed);
                return Err(self.fail("put (stored, reported failed)", &name));
            }
            Ok(())
        })
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> BoxFuture<'_, Result<Bytes, ColdError>> {
        let name = name.to_owned();
        Box::pin(async move {
            self.maybe_delay().await;
            if self.refuse(self.plan.fail_get_ppm) {
                return Err(self.fail("get", &name));
            }
            self.inner.get_range(&name, range).await
        })
    }

    fn delete(&self, name: &str) -> BoxFuture<'_, Result<(), ColdError>> {
        let name = name.to_owned();
        Box::pin(async move {
            self.maybe_delay().await;
            if self.refuse(self.plan.fail_delete_ppm) || self.deletes_down.load(Ordering::SeqCst) {
                return Err(self.fail("delete", &name));
            }
            self.inner.delete(&name).await
        })
    }

    fn list(&self, prefix: &str) -> BoxFuture<'_, Result<Vec<ObjectInfo>, ColdError>> {
        let prefix = prefix.to_owned();
        Box::pin(async move {
            self.maybe_delay().await;
            if self.refuse(self.plan.fail_list_ppm) {
                return Err(self.fail("list", &prefix));
            }
            self.inner.list(&prefix).await
        })
    }

    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_and_local_backends_put_get_list_delete() {
        let dir = tempfile::tempdir().unwrap();
        let backends: Vec<SharedBackend> = vec![
            Arc::new(ObjectStoreBackend::memory()),
            Arc::new(ObjectStoreBackend::local(&dir.path().join("cold")).unwrap()),
        ];
        for b in backends {
            b.put("g000/s/a/b/x.bin", Bytes::from_static(b"hello world"))
                .await
                .unwrap();
            b.put("g001/p.pack", Bytes::from_static(b"zz"))
                .await
                .unwrap();
            assert_eq!(
                b.get_range("g000/s/a/b/x.bin", 6..11).await.unwrap(),
                Bytes::from_static(b"world")
            );
            let listed = b.list("g000").await.unwrap();
            assert_eq!(listed.len(), 1, "{}", b.describe());
            assert_eq!(listed[0].name, "g000/s/a/b/x.bin");
            assert_eq!(listed[0].size, 11);
            assert!(b.list("g009").await.unwrap().is_empty());
            b.delete("g000/s/a/b/x.bin").await.unwrap();
            b.delete("g000/s/a/b/x.bin").await.unwrap();
            assert!(matches!(
                b.get_range("g000/s/a/b/x.bin", 0..1).await,
                Err(ColdError::NotFound(_))
            ));
            assert_eq!(b.list("").await.unwrap().len(), 1);
        }
    }

    #[tokio::test]
    async fn the_fault_wrapper_is_seeded_and_can_go_down() {
        let plan = FaultPlan {
            fail_put_ppm: 500_000,
            ..FaultPlan::default()
        };
        let outcomes = |seed| async move {
            let f = FaultyBackend::new(Arc::new(ObjectStoreBackend::memory()), plan, seed);
            let mut v = Vec::new();
            for i in 0..32 {
                v.push(
                    f.put(&format!("o{i}"), Bytes::from_static(b"x"))
                        .await
                        .is_ok(),
                );
            }
            v
        };
        let a = outcomes(7).await;
        assert_eq!(a, outcomes(7).await);
        assert!(a.iter().any(|ok| *ok) && a.iter().any(|ok| !*ok));
        let f = FaultyBackend::new(
            Arc::new(ObjectStoreBackend::memory()),
            FaultPlan::default(),
            1,
        );
        f.put("a", Bytes::from_static(b"x")).await.unwrap();
        f.set_down(true);
        assert!(f.get_range("a", 0..1).await.is_err());
        f.set_down(false);
        assert_eq!(
            f.get_range("a", 0..1).await.unwrap(),
            Bytes::from_static(b"x")
        );
    }

    #[tokio::test]
    async fn forced_phantoms_store_and_report_failure_once_each() {
        let f = FaultyBackend::new(
            Arc::new(ObjectStoreBackend::memory()),
            FaultPlan::default(),
            1,
        );
        f.phantom_next_puts(2);
        // While down a put is refused before it stores: no phantom taken.
        f.set_down(true);
        assert!(f.put("refused", Bytes::from_static(b"r")).await.is_err());
        f.set_down(false);
        for name in ["p1", "p2"] {
            assert!(f.put(name, Bytes::from_static(b"x")).await.is_err());
        }
        f.put("ok", Bytes::from_static(b"y")).await.unwrap();
        assert_eq!(f.counts.phantoms.load(Ordering::Relaxed), 2);
        let names: Vec<String> = f
            .list("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect();
        assert_eq!(names, ["ok", "p1", "p2"]);
    }
}
