//! The node-wide sender of batched Raft messages ([`Batcher`], the wire
//! format is `crate::wire`). Each peer address has one bounded queue and one task. The
//! task takes what is queued (up to [`MAX_BATCH_MESSAGES`] messages and
//! [`MAX_BATCHED_BYTES`] of bodies) and POSTs it as one batch; up to
//! [`BATCHES_IN_FLIGHT`] batches per peer are in flight at once, so a
//! batch held up by a slow group (an fsync) does not stop the other
//! groups' heartbeats; while every slot is taken, messages queue up and
//! go together in the next batch (and a task finding a single message
//! queued yields once first, so the groups woken together by one batch's
//! answers send their next messages into the same batch). Every message
//! keeps its own deadline
//! (openraft's `hard_ttl`): its caller gives up at the deadline whatever
//! the batch does, each caller is answered as its frame arrives, a
//! message whose caller has gone is not sent, and a batch gives up at the
//! latest deadline of its messages. A peer that
//! answers a batch with 404 (an older node) gets every message alone from
//! then on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use crate::http::{Http, PeerError};
use crate::stats::Counters;
use crate::wire::{
    BATCH_PATH, MAX_BATCH_MESSAGES, MAX_BATCHED_BYTES, RaftMessage, decode_answer, encode_batch,
    next_frame,
};

/// Batches in flight to one peer at a time.
pub const BATCHES_IN_FLIGHT: usize = 4;

/// Messages waiting for a batch to one peer; when the queue is full a
/// message fails at once as unreachable (openraft retries it).
const QUEUE_DEPTH: usize = 1024;

/// A message waiting for its batch.
struct Outgoing {
    group: usize,
    kind: RaftMessage,
    body: Vec<u8>,
    deadline: Instant,
    /// Taken when the message is answered.
    reply: Option<oneshot::Sender<Result<Bytes, String>>>,
}

/// The node-wide sender of batched messages: one queue and one task per
/// peer address, made on first use. Cheap to clone; the tasks end once
/// every clone is gone and their queues are drained.
#[derive(Clone)]
pub(crate) struct Batcher {
    http: Http,
    token: Option<Arc<str>>,
    counters: Arc<Counters>,
    queues: Arc<Mutex<HashMap<String, mpsc::Sender<Outgoing>>>>,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}

impl Batcher {
    pub(crate) fn new(http: Http, token: Option<&str>, counters: Arc<Counters>) -> Self {
        Self {
            http,
            token: token.map(Arc::from),
            counters,
            queues: Arc::default(),
        }
    }

    /// Whether a message goes through a batch: an `append` or a `vote`
    /// no larger than [`MAX_BATCHED_BYTES`].
    pub(crate) fn takes(kind: RaftMessage, len: usize) -> bool {
        kind.batched() && len <= MAX_BATCHED_BYTES
    }

    /// The queue to `addr`, with its task started on first use.
    fn queue(&self, addr: &str) -> mpsc::Sender<Outgoing> {
        let mut queues = crate::sync::lock(&self.queues);
        if let Some(tx) = queues.get(addr)
            && !tx.is_closed()
        {
            return tx.clone();
        }
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(run_peer(
            self.http.clone(),
            addr.to_owned(),
            self.token.clone(),
            Arc::clone(&self.counters),
            rx,
        ));
        queues.insert(addr.to_owned(), tx.clone());
        tx
    }

    /// Sends a message of group `group` to the peer at `addr` in the next
    /// batch and waits for its answer, for at most `ttl`.
    pub(crate) async fn send(
        &self,
        addr: &str,
        group: usize,
        kind: RaftMessage,
        body: Vec<u8>,
        ttl: Duration,
    ) -> Result<Bytes, String> {
        self.counters.messages.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + ttl;
        let (reply, answer) = oneshot::channel();
        let message = Outgoing {
            group,
            kind,
            body,
            deadline,
            reply: Some(reply),
        };
        let result = match self.queue(addr).try_send(message) {
            Ok(()) => match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(format!("{addr}: the batch was dropped")),
                Err(_) => Err(format!("{addr}: timed out")),
            },
            Err(mpsc::error::TrySendError::Full(_)) => {
                Err(format!("{addr}: too many messages queued"))
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(format!("{addr}: shutting down")),
        };
        if result.is_err() {
            self.counters.failed(1);
        }
        result
    }
}

/// The task of one peer: batches what is queued, at most
/// [`BATCHES_IN_FLIGHT`] at a time.
async fn run_peer(
    http: Http,
    addr: String,
    token: Option<Arc<str>>,
    counters: Arc<Counters>,
    mut rx: mpsc::Receiver<Outgoing>,
) {
    let slots = Arc::new(Semaphore::new(BATCHES_IN_FLIGHT));
    // Set once the peer answers 404 to a batch (an older node): from then
    // on every message goes alone.
    let alone = Arc::new(AtomicBool::new(false));
    // A message taken from the queue that did not fit the last batch.
    let mut carried: Option<Outgoing> = None;
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let first = match carried.take() {
            Some(message) => message,
            None => match rx.recv().await {
                Some(message) => message,
                None => break,
            },
        };
        if rx.is_empty() {
            // The answers of one batch wake several groups at once, and
            // each sends its next message: let them queue it before this
            // batch is closed (one turn of the scheduler, no timer).
            tokio::task::yield_now().await;
        }
        let mut bytes = first.body.len();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_MESSAGES {
            let Ok(next) = rx.try_recv() else {
                break;
            };
            if bytes + next.body.len() > MAX_BATCHED_BYTES {
                carried = Some(next);
                break;
            }
            bytes += next.body.len();
            batch.push(next);
        }
        let now = Instant::now();
        // A message whose caller has given up is not sent.
        batch.retain(|m| m.reply.as_ref().is_some_and(|r| !r.is_closed()) && m.deadline > now);
        if batch.is_empty() {
            continue;
        }
        let peer = Peer {
            http: http.clone(),
            addr: addr.clone(),
            token: token.clone(),
            counters: Arc::clone(&counters),
            alone: Arc::clone(&alone),
        };
        tokio::spawn(async move {
            if peer.alone.load(Ordering::Relaxed) {
                peer.send_alone(batch).await;
            } else {
                peer.send_batch(batch).await;
            }
            drop(slot);
        });
    }
}

/// What sending to one peer needs.
struct Peer {
    http: Http,
    addr: String,
    token: Option<Arc<str>>,
    counters: Arc<Counters>,
    alone: Arc<AtomicBool>,
}

impl Peer {
    /// POSTs one batch and answers each of its messages as its answer
    /// arrives; what has no answer when the exchange ends (the peer
    /// failed, the latest deadline passed) gets the error.
    async fn send_batch(&self, mut batch: Vec<Outgoing>) {
        let deadline = batch
            .iter()
            .map(|m| m.deadline)
            .max()
            .unwrap_or_else(Instant::now);
        let body = match encode_batch(batch.iter().map(|m| (m.group, m.kind, m.body.as_slice()))) {
            Ok(body) => body,
            Err(e) => {
                answer_rest(&mut batch, &e);
                return;
            }
        };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let timeout = deadline.saturating_duration_since(Instant::now());
        let mut buf = BytesMut::new();
        let outcome = {
            let batch = &mut batch;
            let each = |chunk: Bytes| -> Result<(), String> {
                buf.extend_from_slice(&chunk);
                while let Some(frame) = next_frame(&mut buf).map_err(|e| e.to_string())? {
                    let (index, answer) = decode_answer(&frame).map_err(|e| e.to_string())?;
                    let reply = batch
                        .get_mut(index)
                        .and_then(|m| m.reply.take())
                        .ok_or_else(|| format!("an unexpected answer to message {index}"))?;
                    let _ = reply.send(answer);
                }
                Ok(())
            };
            self.http
                .post_streaming(
                    &self.addr,
                    BATCH_PATH,
                    body,
                    self.token.as_deref(),
                    timeout,
                    each,
                )
                .await
        };
        match outcome {
            Err(PeerError::Status { status: 404, .. }) => {
                tracing::info!(peer = %self.addr, "the peer takes no raft batches; sending its messages one by one");
                self.alone.store(true, Ordering::Relaxed);
                self.send_alone(batch).await;
            }
            Err(e) => {
                self.count_batch(&batch);
                tracing::debug!(error = %e, messages = batch.len(), "a raft batch failed");
                answer_rest(&mut batch, &e.to_string());
            }
            Ok(()) => {
                self.count_batch(&batch);
                answer_rest(
                    &mut batch,
                    &format!("{}: no answer in the batch", self.addr),
                );
            }
        }
    }

    fn count_batch(&self, batch: &[Outgoing]) {
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters
            .batched
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
    }

    /// Sends each message of `batch` alone, all at once, each to
    /// `/__strand/raft/{group}/{kind}` and within its own deadline.
    async fn send_alone(&self, batch: Vec<Outgoing>) {
        futures_util::future::join_all(batch.into_iter().map(|m| async move {
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            let path = m.kind.path(m.group);
            let timeout = m.deadline.saturating_duration_since(Instant::now());
            let answer = self
                .http
                .post(&self.addr, &path, m.body, self.token.as_deref(), timeout)
                .await;
            if let Some(reply) = m.reply {
                let _ = reply.send(answer.map_err(|e| e.to_string()));
            }
        }))
        .await;
    }
}

/// Answers every message of `batch` not answered yet with `error`.
fn answer_rest(batch: &mut [Outgoing], error: &str) {
    for message in batch {
        if let Some(reply) = message.reply.take() {
            let _ = reply.send(Err(error.to_owned()));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::{decode_batch, encode_answer};

    /// A loopback HTTP/1.1 server (keep-alive, `Content-Length` bodies
    /// only) answering each request with `answer(path, body)`: a status
    /// and a body, or `None` to never answer.
    async fn peer(
        answer: impl Fn(&str, &[u8]) -> Option<(u16, Vec<u8>)> + Send + Sync + 'static,
    ) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let answer = Arc::clone(&answer);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            let mut chunk = [0u8; 4096];
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().ok())?
                            })
                            .unwrap_or(0);
                        while buf.len() < end + 4 + len {
                            let mut chunk = [0u8; 4096];
                            match conn.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let body = buf[end + 4..end + 4 + len].to_vec();
                        buf.drain(..end + 4 + len);
                        let Some((status, reply)) = answer(&path, &body) else {
                            // Never answers; holds the connection.
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            return;
                        };
                        let head = format!(
                            "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n",
                            reply.len()
                        );
                        if conn.write_all(head.as_bytes()).await.is_err()
                            || conn.write_all(&reply).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        format!("http://{addr}")
    }

    fn batcher() -> (Batcher, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        (
            Batcher::new(Http::new(), Some("t"), Arc::clone(&counters)),
            counters,
        )
    }

    #[tokio::test]
    async fn concurrent_messages_share_batches_and_get_their_own_answers() {
        let addr = peer(|path, body| {
            assert_eq!(path, BATCH_PATH);
            let messages = decode_batch(body).unwrap();
            // Answered in reverse order: each answer names its message.
            let mut frames = Vec::new();
            for (index, m) in messages.iter().enumerate().rev() {
                let answer = if m.group == 13 {
                    Err("no group 13".to_owned())
                } else {
                    Ok(format!("{}:{}", m.group, m.kind.name()).into_bytes())
                };
                frames.extend(encode_answer(index, &answer).unwrap());
            }
            Some((200, frames))
        })
        .await;
        let (batcher, counters) = batcher();
        let sends = (0..20).map(|g| {
            let batcher = batcher.clone();
            let addr = addr.clone();
            async move {
                let kind = if g % 2 == 0 {
                    RaftMessage::Append
                } else {
                    RaftMessage::Vote
                };
                let answer = batcher
                    .send(&addr, g, kind, vec![0x90], Duration::from_secs(5))
                    .await;
                (g, kind, answer)
            }
        });
        for (g, kind, answer) in futures_util::future::join_all(sends).await {
            if g == 13 {
                assert_eq!(answer, Err("no group 13".to_owned()));
            } else {
                assert_eq!(answer.unwrap(), format!("{g}:{}", kind.name()).as_bytes());
            }
        }
        let stats = counters.snapshot();
        assert_eq!(stats.raft_messages_sent, 20);
        assert_eq!(stats.raft_batched_messages, 20);
        assert_eq!(stats.raft_requests_sent, stats.raft_batches_sent);
        // 20 at once, 4 batches in flight: they cannot all go alone.
        assert!(stats.raft_batches_sent < 20, "{stats:?}");
        assert_eq!(stats.raft_messages_failed, 1);
    }

    #[tokio::test]
    async fn a_peer_that_does_not_answer_fails_each_message_at_its_deadline() {
        let addr = peer(|_, _| None).await;
        let (batcher, counters) = batcher();
        let started = std::time::Instant::now();
        let answer = batcher
            .send(
                &addr,
                0,
                RaftMessage::Append,
                vec![0x90],
                Duration::from_millis(150),
            )
            .await;
        assert!(answer.unwrap_err().contains("timed out"));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        assert_eq!(counters.snapshot().raft_messages_failed, 1);
    }

    #[tokio::test]
    async fn a_peer_without_the_batch_route_gets_every_message_alone() {
        let addr = peer(|path, body| match path {
            BATCH_PATH => Some((404, b"no such raft route".to_vec())),
            "/__strand/raft/3/vote" => Some((200, body.to_vec())),
            _ => Some((500, Vec::new())),
        })
        .await;
        let (batcher, counters) = batcher();
        for _ in 0..2 {
            let answer = batcher
                .send(
                    &addr,
                    3,
                    RaftMessage::Vote,
                    b"v".to_vec(),
                    Duration::from_secs(5),
                )
                .await;
            assert_eq!(answer.unwrap(), &b"v"[..]);
        }
        let stats = counters.snapshot();
        // One refused batch, then each message alone.
        assert_eq!(stats.raft_batches_sent, 0);
        assert_eq!(stats.raft_requests_sent, 3);
        assert_eq!(stats.raft_messages_sent, 2);
        assert_eq!(stats.raft_messages_failed, 0);
    }

    #[test]
    fn only_small_appends_and_votes_are_batched() {
        assert!(Batcher::takes(RaftMessage::Append, MAX_BATCHED_BYTES));
        assert!(Batcher::takes(RaftMessage::Vote, 0));
        assert!(!Batcher::takes(RaftMessage::Append, MAX_BATCHED_BYTES + 1));
        assert!(!Batcher::takes(RaftMessage::Snapshot, 10));
        assert!(!Batcher::takes(RaftMessage::Propose, 10));
    }
}
