//! Raft messages batched across groups: the wire format of
//! `POST /__strand/raft/batch`, the receiving side ([`serve_batch`]) and
//! the node-wide sender ([`Batcher`]) every group's peers share.
//!
//! A batch's body is a MessagePack array of at most
//! [`MAX_BATCH_MESSAGES`] messages, each an array
//! `[group: uint, kind: str, body: bin]` (`kind` is `append` or `vote`,
//! `body` the same MessagePack bytes `/__strand/raft/{group}/{kind}`
//! takes). The answer streams: one frame per message, sent as soon as
//! its group has answered (so one slow group delays no other group's
//! answer), each a big-endian `u32` length and the MessagePack array
//! `[index: uint, ok: bool, body: bin]`: the message's place in the
//! batch, and the group's answer when `ok`, else the error's text
//! (UTF-8).
//!
//! Sending: each peer address has one bounded queue and one task. The
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use strand_engine::Engine;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use crate::network::{Http, NOT_FOUND};

/// The path of the batch route.
pub const BATCH_PATH: &str = "/__strand/raft/batch";

/// The most messages one batch holds (a sender's limit, and the
/// receiver's: a longer list is refused).
pub const MAX_BATCH_MESSAGES: usize = 64;

/// A batch takes no more messages once their bodies reach this many
/// bytes; a message larger than this alone is not batched (it goes to
/// `/__strand/raft/{group}/{kind}` by itself).
pub const MAX_BATCHED_BYTES: usize = 4 << 20;

/// The largest batch body the receiver reads: [`MAX_BATCHED_BYTES`] of
/// message bodies and their framing (a few bytes a message).
pub const MAX_BATCH_BODY: usize = MAX_BATCHED_BYTES + (64 << 10);

/// Batches in flight to one peer at a time.
pub const BATCHES_IN_FLIGHT: usize = 4;

/// Messages waiting for a batch to one peer; when the queue is full a
/// message fails at once as unreachable (openraft retries it).
const QUEUE_DEPTH: usize = 1024;

/// The message kinds a batch may carry.
const BATCHED_KINDS: [&str; 2] = ["append", "vote"];

/// Why a batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchRefused {
    /// The body is not a batch.
    #[error("a malformed raft batch: {0}")]
    Malformed(String),
    /// The batch holds more messages than [`MAX_BATCH_MESSAGES`].
    #[error("a raft batch of {0} messages; at most {MAX_BATCH_MESSAGES} are taken")]
    TooMany(usize),
}

/// One message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchMessage {
    pub(crate) group: usize,
    pub(crate) kind: &'static str,
    pub(crate) body: Vec<u8>,
}

fn malformed(what: impl std::fmt::Debug) -> BatchRefused {
    BatchRefused::Malformed(format!("{what:?}"))
}

fn u32_len(len: usize) -> Result<u32, String> {
    u32::try_from(len).map_err(|_| format!("a length of {len} does not fit a batch"))
}

/// Writes a batch of `(group, kind, body)` messages.
pub(crate) fn encode_batch<'a>(
    messages: impl ExactSizeIterator<Item = (usize, &'a str, &'a [u8])>,
) -> Result<Vec<u8>, String> {
    use rmp::encode;
    let e = |e: encode::ValueWriteError| e.to_string();
    let mut out = Vec::new();
    encode::write_array_len(&mut out, u32_len(messages.len())?).map_err(e)?;
    for (group, kind, body) in messages {
        encode::write_array_len(&mut out, 3).map_err(e)?;
        encode::write_uint(&mut out, group as u64).map_err(e)?;
        encode::write_str(&mut out, kind).map_err(e)?;
        encode::write_bin_len(&mut out, u32_len(body.len())?).map_err(e)?;
        out.extend_from_slice(body);
    }
    Ok(out)
}

/// Reads `len` bytes off the front of `rd`.
fn take<'a>(rd: &mut &'a [u8], len: u32) -> Result<&'a [u8], BatchRefused> {
    let len = usize::try_from(len).map_err(malformed)?;
    if rd.len() < len {
        return Err(BatchRefused::Malformed(format!(
            "{len} bytes announced, {} left",
            rd.len()
        )));
    }
    let (data, rest) = rd.split_at(len);
    *rd = rest;
    Ok(data)
}

/// Reads a batch: every message, or why the body is refused (never a
/// panic, whatever the bytes).
pub(crate) fn decode_batch(body: &[u8]) -> Result<Vec<BatchMessage>, BatchRefused> {
    use rmp::decode;
    let mut rd = body;
    let count = decode::read_array_len(&mut rd).map_err(malformed)?;
    let count = usize::try_from(count).map_err(malformed)?;
    if count > MAX_BATCH_MESSAGES {
        return Err(BatchRefused::TooMany(count));
    }
    let mut messages = Vec::with_capacity(count);
    for _ in 0..count {
        if decode::read_array_len(&mut rd).map_err(malformed)? != 3 {
            return Err(BatchRefused::Malformed(
                "a message is not [group, kind, body]".to_owned(),
            ));
        }
        let group: usize = decode::read_int(&mut rd).map_err(malformed)?;
        let len = decode::read_str_len(&mut rd).map_err(malformed)?;
        let kind = take(&mut rd, len)?;
        let kind = BATCHED_KINDS
            .into_iter()
            .find(|k| k.as_bytes() == kind)
            .ok_or_else(|| {
                BatchRefused::Malformed(format!(
                    "kind {:?} cannot be batched",
                    String::from_utf8_lossy(kind)
                ))
            })?;
        let len = decode::read_bin_len(&mut rd).map_err(malformed)?;
        let body = take(&mut rd, len)?.to_vec();
        messages.push(BatchMessage { group, kind, body });
    }
    if !rd.is_empty() {
        return Err(BatchRefused::Malformed(format!(
            "{} bytes after the last message",
            rd.len()
        )));
    }
    Ok(messages)
}

/// The largest answer frame a sender reads (an append's or a vote's
/// answer is a few dozen bytes; this only bounds a misbehaving peer).
pub(crate) const MAX_ANSWER_FRAME: usize = 16 << 20;

/// Writes the answer to message `index` of a batch as one frame: a
/// big-endian `u32` length, then the MessagePack array
/// `[index: uint, ok: bool, body: bin]`.
pub(crate) fn encode_answer(
    index: usize,
    answer: &Result<Vec<u8>, String>,
) -> Result<Vec<u8>, String> {
    use rmp::encode;
    let e = |e: encode::ValueWriteError| e.to_string();
    let (ok, body) = match answer {
        Ok(body) => (true, body.as_slice()),
        Err(text) => (false, text.as_bytes()),
    };
    let mut out = vec![0; 4];
    encode::write_array_len(&mut out, 3).map_err(e)?;
    encode::write_uint(&mut out, index as u64).map_err(e)?;
    encode::write_bool(&mut out, ok).map_err(|e| e.to_string())?;
    encode::write_bin_len(&mut out, u32_len(body.len())?).map_err(e)?;
    out.extend_from_slice(body);
    let len = u32_len(out.len() - 4)?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// Takes the next whole answer frame (without its length) off the front
/// of `buf`: `None` while it has not all arrived.
pub(crate) fn next_frame(buf: &mut BytesMut) -> Result<Option<Bytes>, BatchRefused> {
    let Some(head) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = usize::try_from(u32::from_be_bytes(*head)).map_err(malformed)?;
    if len > MAX_ANSWER_FRAME {
        return Err(BatchRefused::Malformed(format!(
            "an answer frame of {len} bytes"
        )));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Reads one answer frame: the message's index in its batch and its
/// answer (a slice of `frame`) or error text.
pub(crate) fn decode_answer(frame: &Bytes) -> Result<(usize, Result<Bytes, String>), BatchRefused> {
    use rmp::decode;
    let mut rd: &[u8] = frame;
    if decode::read_array_len(&mut rd).map_err(malformed)? != 3 {
        return Err(BatchRefused::Malformed(
            "an answer is not [index, ok, body]".to_owned(),
        ));
    }
    let index: usize = decode::read_int(&mut rd).map_err(malformed)?;
    let ok = decode::read_bool(&mut rd).map_err(malformed)?;
    let len = decode::read_bin_len(&mut rd).map_err(malformed)?;
    let start = frame.len() - rd.len();
    let data = take(&mut rd, len)?;
    if !rd.is_empty() {
        return Err(BatchRefused::Malformed("bytes after an answer".to_owned()));
    }
    let data = frame.slice(start..start + data.len());
    let answer = if ok {
        Ok(data)
    } else {
        Err(String::from_utf8_lossy(&data).into_owned())
    };
    Ok((index, answer))
}

/// Serves a batch a peer sent to `POST /__strand/raft/batch`: hands
/// every message to its group's log at once (the groups work
/// concurrently) and returns the stream of their answers, one frame each
/// as soon as it is ready (a big-endian `u32` length, then the MessagePack
/// array `[index, ok, body]`: the message's place in the batch, and the
/// group's answer or its error text), so one slow group holds up no other
/// group's answer.
///
/// # Errors
/// A body that is not a batch, or a batch of more than
/// [`MAX_BATCH_MESSAGES`] messages; nothing is delivered then.
pub fn serve_batch(
    engine: &Engine,
    body: &[u8],
) -> Result<impl futures_util::Stream<Item = Bytes> + Send + 'static, BatchRefused> {
    use futures_util::StreamExt;
    let messages = decode_batch(body)?;
    let answers: futures_util::stream::FuturesUnordered<_> = messages
        .into_iter()
        .enumerate()
        .map(|(index, m)| {
            let engine = engine.clone();
            async move {
                let answer = engine.log_message(m.group, m.kind, m.body).await;
                encode_answer(index, &answer)
            }
        })
        .collect();
    // An answer that cannot be written (cannot happen: it was read from a
    // batch of bounded size) is left out; its sender times it out.
    Ok(answers.filter_map(|frame| std::future::ready(frame.ok().map(Bytes::from))))
}

/// A node's Raft traffic to its peers since it started (each counter
/// only grows), in `GET /__strand/health` under `network`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetworkStats {
    /// Raft messages (append entries, votes, snapshot chunks) sent to
    /// peers.
    pub raft_messages_sent: u64,
    /// HTTP requests that carried them: one per batch, one per message
    /// sent alone.
    pub raft_requests_sent: u64,
    /// Batches (`POST /__strand/raft/batch`) sent.
    pub raft_batches_sent: u64,
    /// Messages those batches carried.
    pub raft_batched_messages: u64,
    /// Messages that got no answer: the peer unreachable or too slow,
    /// the queue to it full.
    pub raft_messages_failed: u64,
}

impl NetworkStats {
    /// Messages per batch, when any batch was sent.
    #[must_use]
    pub fn messages_per_batch(&self) -> Option<f64> {
        (self.raft_batches_sent > 0)
            .then(|| self.raft_batched_messages as f64 / self.raft_batches_sent as f64)
    }

    /// Messages per HTTP request, when any was sent.
    #[must_use]
    pub fn messages_per_request(&self) -> Option<f64> {
        (self.raft_requests_sent > 0)
            .then(|| self.raft_messages_sent as f64 / self.raft_requests_sent as f64)
    }
}

/// The live counters behind [`NetworkStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    messages: AtomicU64,
    requests: AtomicU64,
    batches: AtomicU64,
    batched: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> NetworkStats {
        NetworkStats {
            raft_messages_sent: self.messages.load(Ordering::Relaxed),
            raft_requests_sent: self.requests.load(Ordering::Relaxed),
            raft_batches_sent: self.batches.load(Ordering::Relaxed),
            raft_batched_messages: self.batched.load(Ordering::Relaxed),
            raft_messages_failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// One message sent by itself, in its own request.
    pub(crate) fn sent_alone(&self, ok: bool) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn failed(&self, n: usize) {
        self.failed.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// A message waiting for its batch.
struct Outgoing {
    group: usize,
    kind: &'static str,
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
    pub(crate) fn takes(kind: &str, len: usize) -> bool {
        BATCHED_KINDS.contains(&kind) && len <= MAX_BATCHED_BYTES
    }

    /// The queue to `addr`, with its task started on first use.
    fn queue(&self, addr: &str) -> mpsc::Sender<Outgoing> {
        let mut queues = crate::log_store::lock(&self.queues);
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
        kind: &'static str,
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
            Err(e) if e.starts_with(NOT_FOUND) => {
                tracing::info!(peer = %self.addr, "the peer takes no raft batches; sending its messages one by one");
                self.alone.store(true, Ordering::Relaxed);
                self.send_alone(batch).await;
            }
            Err(e) => {
                self.count_batch(&batch);
                tracing::debug!(error = %e, messages = batch.len(), "a raft batch failed");
                answer_rest(&mut batch, &e);
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
            let path = format!("/__strand/raft/{}/{}", m.group, m.kind);
            let timeout = m.deadline.saturating_duration_since(Instant::now());
            let answer = self
                .http
                .post(&self.addr, &path, m.body, self.token.as_deref(), timeout)
                .await;
            if let Some(reply) = m.reply {
                let _ = reply.send(answer);
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

    fn sample() -> Vec<u8> {
        encode_batch(
            [
                (0usize, "append", &b"\x81\xa1a\x01"[..]),
                (7, "vote", &b""[..]),
            ]
            .into_iter(),
        )
        .unwrap()
    }

    #[test]
    fn a_batch_round_trips() {
        let messages = decode_batch(&sample()).unwrap();
        assert_eq!(
            messages,
            vec![
                BatchMessage {
                    group: 0,
                    kind: "append",
                    body: b"\x81\xa1a\x01".to_vec()
                },
                BatchMessage {
                    group: 7,
                    kind: "vote",
                    body: Vec::new()
                },
            ]
        );
        let empty = encode_batch(std::iter::empty()).unwrap();
        assert_eq!(decode_batch(&empty).unwrap(), Vec::new());
    }

    #[test]
    fn answer_frames_round_trip_and_split_anywhere() {
        let mut stream = encode_answer(1, &Ok(b"yes".to_vec())).unwrap();
        stream.extend(encode_answer(0, &Err("no group 9".to_owned())).unwrap());
        // However the bytes arrive, the same two answers come out.
        for cut in 0..=stream.len() {
            let mut buf = BytesMut::new();
            let mut answers = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                buf.extend_from_slice(part);
                while let Some(frame) = next_frame(&mut buf).unwrap() {
                    answers.push(decode_answer(&frame).unwrap());
                }
            }
            assert!(buf.is_empty());
            assert_eq!(
                answers,
                vec![
                    (1, Ok(Bytes::from_static(b"yes"))),
                    (0, Err("no group 9".to_owned()))
                ]
            );
        }
        let mut huge = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 0x93][..]);
        assert!(next_frame(&mut huge).is_err());
    }

    #[test]
    fn every_truncation_and_garbage_is_an_error() {
        let body = sample();
        for cut in 0..body.len() {
            assert!(
                matches!(decode_batch(&body[..cut]), Err(BatchRefused::Malformed(_))),
                "cut at {cut}"
            );
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode_batch(&longer).is_err());
        // Every single-byte change either decodes or is refused: no panic.
        for i in 0..body.len() {
            for b in [0x00, 0x7f, 0x90, 0xc0, 0xc4, 0xc5, 0xdc, 0xdd, 0xff] {
                let mut bad = body.clone();
                bad[i] = b;
                let _ = decode_batch(&bad);
            }
        }
        // A length beyond the body, a negative group, an unknown kind.
        assert!(
            decode_batch(&[
                0x91, 0x93, 0x00, 0xa4, b'v', b'o', b't', b'e', 0xc6, 0xff, 0xff, 0xff, 0xff
            ])
            .is_err()
        );
        assert!(
            decode_batch(&[0x91, 0x93, 0xff, 0xa4, b'v', b'o', b't', b'e', 0xc4, 0x00]).is_err()
        );
        let propose = encode_batch([(0usize, "propose", &b""[..])].into_iter()).unwrap();
        assert!(
            decode_batch(&propose)
                .unwrap_err()
                .to_string()
                .contains("propose")
        );
        // Not an array at all.
        assert!(decode_batch(b"\xa3abc").is_err());
        assert!(decode_answer(&Bytes::from_static(b"\x93\x00\xc3\xc4\x05ab")).is_err());
        assert!(decode_answer(&Bytes::from_static(b"\x93\x00\xc3\xc4\x01ab")).is_err());
        assert!(decode_answer(&Bytes::from_static(b"\x92\x00\xc3")).is_err());
    }

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
                    Ok(format!("{}:{}", m.group, m.kind).into_bytes())
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
                let kind = if g % 2 == 0 { "append" } else { "vote" };
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
                assert_eq!(answer.unwrap(), format!("{g}:{kind}").as_bytes());
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
            .send(&addr, 0, "append", vec![0x90], Duration::from_millis(150))
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
                .send(&addr, 3, "vote", b"v".to_vec(), Duration::from_secs(5))
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
    fn an_oversized_batch_is_refused() {
        let bodies: Vec<(usize, &str, &[u8])> = (0..=MAX_BATCH_MESSAGES)
            .map(|g| (g, "vote", &b""[..]))
            .collect();
        let body = encode_batch(bodies.into_iter()).unwrap();
        assert_eq!(
            decode_batch(&body),
            Err(BatchRefused::TooMany(MAX_BATCH_MESSAGES + 1))
        );
        // An announced length of 2^32 - 1 messages is refused before
        // anything is allocated for them.
        assert_eq!(
            decode_batch(&[0xdd, 0xff, 0xff, 0xff, 0xff]),
            Err(BatchRefused::TooMany(u32::MAX as usize))
        );
        assert!(Batcher::takes("append", MAX_BATCHED_BYTES));
        assert!(!Batcher::takes("append", MAX_BATCHED_BYTES + 1));
        assert!(!Batcher::takes("snapshot", 10));
    }
}
