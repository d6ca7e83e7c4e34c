//! The engine's questions over groups: answered by this node's machines
//! where it holds the group, else by a node that does
//! ([`RemoteGroups`](crate::RemoteGroups)); and the answers this node
//! gives to questions from others.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strand::{BucketStreamId, BucketUsageSnapshot, HotRead};

use crate::engine::{Engine, add_usage};
use crate::error::{EngineError, Unavailable};
use crate::group::ReadReply;
use crate::ops::{HeadOutcome, ReadFrom, ReadOutcome};
use crate::remote::{
    AnswerError, BucketExists, BucketUsage, GroupQuery, HeadOf, ReadPage, ReadStep, RemoteGroups,
    StepAnswer,
};

/// A question or answer as it travels.
fn encode(value: &impl Serialize) -> Result<Vec<u8>, EngineError> {
    rmp_serde::to_vec_named(value).map_err(|_| EngineError::Unavailable(Unavailable::Remote))
}

/// A question or answer that came from another node.
fn decode<T: DeserializeOwned>(kind: &'static str, bytes: &[u8]) -> Result<T, AnswerError> {
    rmp_serde::from_slice(bytes).map_err(|e| AnswerError::Malformed {
        kind,
        error: e.to_string(),
    })
}

impl Engine {
    /// Installs how this node learns which groups it holds and asks the
    /// others about the rest. Only the first call takes effect; it
    /// answers whether it did. Without one, the node holds every group.
    pub fn set_remote_groups(&self, remote: Arc<dyn RemoteGroups>) -> bool {
        self.remote().set(remote).is_ok()
    }

    /// Whether this node holds `group`'s state (always, without
    /// [`RemoteGroups`]).
    pub fn holds_group(&self, group: usize) -> bool {
        self.remote().get().is_none_or(|r| r.holds(group))
    }

    /// Whether this node answers questions about `group` from its own
    /// state — another node's, and its own about a group other than the
    /// one a request is for: without [`RemoteGroups`], always; in a
    /// cluster, only as the group's leader (holding it). A follower may not have
    /// applied yet what the leader answered a client a moment ago through
    /// another member, and that client's next request (a fork of the
    /// stream it just created, say) must see it; every leader has applied
    /// every entry acknowledged before it led.
    pub fn answers_group(&self, group: usize) -> bool {
        match self.remote().get() {
            None => true,
            Some(remote) => remote.holds(group) && self.leads_group(group),
        }
    }

    /// Whether this node is out of `group` (never without
    /// [`RemoteGroups`]): it does not hold it and the placement gives it
    /// no vote in it ([`RemoteGroups::dropped`]).
    pub fn dropped_group(&self, group: usize) -> bool {
        self.remote().get().is_some_and(|r| r.dropped(group))
    }

    /// `query`'s answer for `group`: from this node's machine when it
    /// answers for the group ([`Engine::answers_group`]), else from the
    /// group's leader.
    ///
    /// # Errors
    /// The group could not answer (its queue is full, the engine stops),
    /// or its leader did not answer ([`Unavailable::Remote`]).
    pub async fn ask<Q: GroupQuery>(
        &self,
        group: usize,
        query: Q,
    ) -> Result<Q::Answer, EngineError> {
        let remote = match self.remote().get() {
            Some(remote) if !self.answers_group(group) => remote,
            _ => return self.query_group(group, move |m| query.run(m)).await,
        };
        let answer = remote.ask(group, Q::KIND, encode(&query)?).await?;
        decode(Q::KIND, &answer).map_err(|e| {
            tracing::debug!(error = %e, "a remote answer did not decode");
            EngineError::Unavailable(Unavailable::Remote)
        })
    }

    /// Answers another node's question `Q` (encoded as `query`) about
    /// `group` from this node's machine; the encoded answer.
    ///
    /// # Errors
    /// This node does not hold the group, there is no such group, the
    /// question does not decode, or the group could not answer.
    pub async fn answer_here<Q: GroupQuery>(
        &self,
        group: usize,
        query: &[u8],
    ) -> Result<Vec<u8>, AnswerError> {
        if group >= self.group_count() {
            return Err(AnswerError::NoSuchGroup(group));
        }
        self.answers_for(group)?;
        let query: Q = decode(Q::KIND, query)?;
        let answer = self.query_group(group, move |m| query.run(m)).await?;
        Ok(encode(&answer)?)
    }

    /// One step of a read through a fork chain in `stream`'s group: up to
    /// `max_len` bytes from `offset` of the stream's own (hot or cold), or
    /// where it inherits `offset` from. Read here when this node answers
    /// for the group, or holds it and it is `home`, the group of the
    /// stream the read is for (one group's state is one consistent
    /// prefix of its log); else asked at the group's leader.
    pub(crate) async fn read_step(
        &self,
        stream: &BucketStreamId,
        offset: u64,
        max_len: usize,
        home: usize,
    ) -> Result<StepAnswer, EngineError> {
        let group = self.group_for(stream);
        let here = self.answers_group(group) || (group == home && self.holds_group(group));
        if !here {
            let step = ReadStep {
                stream: stream.clone(),
                offset,
                max_len,
            };
            return self.ask_elsewhere(group, ReadStep::KIND, &step).await;
        }
        let read: HotRead = match self.read_once(stream, offset, max_len, true).await? {
            ReadReply::Data(Ok(read)) => read,
            ReadReply::Data(Err(e)) => return Ok(StepAnswer::Refused(e)),
            ReadReply::Cold { from, error } => {
                match self
                    .read_cold(stream.clone(), from, max_len, true, error)
                    .await?
                {
                    Ok(read) => read,
                    Err(e) => return Ok(StepAnswer::Refused(e)),
                }
            }
            ReadReply::Inherited {
                source,
                cap,
                content_type,
                ..
            } => {
                return Ok(StepAnswer::Inherited {
                    source,
                    cap,
                    content_type,
                });
            }
        };
        Ok(StepAnswer::Data(read))
    }

    /// Answers another node's [`ReadStep`] (encoded as `step`) in
    /// `group`, the stream's group, from this node's state; the encoded
    /// [`StepAnswer`].
    ///
    /// # Errors
    /// This node does not hold the group, the step does not decode or
    /// names a stream of another group, or the group could not answer.
    pub async fn answer_read_step(
        &self,
        group: usize,
        step: &[u8],
    ) -> Result<Vec<u8>, AnswerError> {
        let step: ReadStep = decode(ReadStep::KIND, step)?;
        self.answerable(group, ReadStep::KIND, &step.stream)?;
        let answer = self
            .read_step(&step.stream, step.offset, step.max_len, group)
            .await?;
        Ok(encode(&answer)?)
    }

    /// Sends `question` (of kind `kind`) about `group` to a member that
    /// holds it; its decoded answer.
    async fn ask_elsewhere<A: DeserializeOwned>(
        &self,
        group: usize,
        kind: &'static str,
        question: &impl Serialize,
    ) -> Result<A, EngineError> {
        let Some(remote) = self.remote().get() else {
            return Err(EngineError::Unavailable(Unavailable::Remote));
        };
        let answer = remote.ask(group, kind, encode(question)?).await?;
        decode(kind, &answer).map_err(|e| {
            tracing::debug!(error = %e, "a remote answer did not decode");
            EngineError::Unavailable(Unavailable::Remote)
        })
    }

    /// [`Engine::read`] of a stream in `group`, which this node does not
    /// hold.
    pub(crate) async fn read_elsewhere(
        &self,
        group: usize,
        stream: BucketStreamId,
        from: ReadFrom,
        max_len: usize,
    ) -> Result<ReadOutcome, EngineError> {
        let page = ReadPage {
            stream,
            from,
            max_len,
        };
        match self.ask_elsewhere(group, ReadPage::KIND, &page).await? {
            StepAnswer::Data(page) => Ok(Ok(page)),
            StepAnswer::Refused(e) => Ok(Err(e)),
            StepAnswer::Inherited { .. } => Err(EngineError::Unavailable(Unavailable::Remote)),
        }
    }

    /// [`Engine::head`] of a stream in `group`, which this node does not
    /// hold.
    pub(crate) async fn head_elsewhere(
        &self,
        group: usize,
        stream: BucketStreamId,
    ) -> Result<HeadOutcome, EngineError> {
        self.ask_elsewhere(group, HeadOf::KIND, &HeadOf { stream })
            .await
    }

    /// A stream's metadata as its group's leader has it — this node's
    /// own when it answers for the group ([`Engine::answers_group`]),
    /// else asked of the leader: what a request about another stream
    /// needs (a fork's source), since the client's write of that stream
    /// may have gone through another member and this node may follow
    /// its group without having applied it yet. `None` when missing or
    /// expired; does not renew a TTL.
    ///
    /// # Errors
    /// As [`Engine::head`], and [`Unavailable::Remote`] when the leader
    /// did not answer.
    pub async fn head_at_leader(&self, stream: BucketStreamId) -> Result<HeadOutcome, EngineError> {
        let group = self.group_for(&stream);
        if self.answers_group(group) {
            return self.head(stream).await;
        }
        self.head_elsewhere(group, stream).await
    }

    /// Whether this node answers another node's question about `group`:
    /// it holds the group and answers for it ([`Engine::answers_group`]).
    fn answers_for(&self, group: usize) -> Result<(), AnswerError> {
        if !self.holds_group(group) {
            return Err(AnswerError::NotHeld(group));
        }
        if !self.answers_group(group) {
            return Err(AnswerError::NotLeader(group));
        }
        Ok(())
    }

    /// Checks that another node's question about `stream` came to its
    /// group, `group`, and that this node holds and answers for it
    /// ([`Engine::answers_group`]).
    fn answerable(
        &self,
        group: usize,
        kind: &'static str,
        stream: &BucketStreamId,
    ) -> Result<(), AnswerError> {
        if group >= self.group_count() {
            return Err(AnswerError::NoSuchGroup(group));
        }
        if self.group_for(stream) != group {
            return Err(AnswerError::Malformed {
                kind,
                error: format!("stream '{stream}' is not in group {group}"),
            });
        }
        self.answers_for(group)
    }

    /// Answers another node's [`ReadPage`] (encoded as `page`) in `group`
    /// from this node's state, as [`Engine::read`]; the encoded
    /// [`StepAnswer`].
    ///
    /// # Errors
    /// As [`Engine::answer_read_step`].
    pub async fn answer_read(&self, group: usize, page: &[u8]) -> Result<Vec<u8>, AnswerError> {
        let page: ReadPage = decode(ReadPage::KIND, page)?;
        self.answerable(group, ReadPage::KIND, &page.stream)?;
        let answer = match self.read(page.stream, page.from, page.max_len).await? {
            Ok(read) => StepAnswer::Data(read),
            Err(e) => StepAnswer::Refused(e),
        };
        Ok(encode(&answer)?)
    }

    /// Answers another node's [`HeadOf`] (encoded as `head`) in `group`
    /// from this node's state; the encoded [`HeadOutcome`].
    ///
    /// # Errors
    /// As [`Engine::answer_read_step`].
    pub async fn answer_head(&self, group: usize, head: &[u8]) -> Result<Vec<u8>, AnswerError> {
        let head: HeadOf = decode(HeadOf::KIND, head)?;
        self.answerable(group, HeadOf::KIND, &head.stream)?;
        Ok(encode(&self.head(head.stream).await?)?)
    }

    /// A bucket's usage summed over the groups (a group this node does
    /// not hold is asked at a node that does); `None` when no group knows
    /// the bucket.
    pub async fn bucket_usage(
        &self,
        bucket_id: &str,
    ) -> Result<Option<BucketUsageSnapshot>, EngineError> {
        let mut total: Option<BucketUsageSnapshot> = None;
        for group in 0..self.group_count() {
            let bucket = bucket_id.to_owned();
            if let Some(u) = self.ask(group, BucketUsage { bucket }).await? {
                total = Some(match total {
                    None => u,
                    Some(t) => add_usage(t, &u),
                });
            }
        }
        Ok(total)
    }

    /// Whether a bucket exists in any group (a group this node does not
    /// hold is asked at a node that does).
    pub async fn bucket_exists(&self, bucket_id: &str) -> Result<bool, EngineError> {
        for group in 0..self.group_count() {
            let bucket = bucket_id.to_owned();
            if self.ask(group, BucketExists { bucket }).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
