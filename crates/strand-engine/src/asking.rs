//! The engine's questions over groups: answered by this node's machines
//! where it holds the group, else by a node that does
//! ([`RemoteGroups`](crate::RemoteGroups)); and the answers this node
//! gives to questions from others.

use std::sync::Arc;

use strand::BucketUsageSnapshot;

use crate::engine::{Engine, add_usage};
use crate::error::{EngineError, Unavailable};
use crate::remote::{AnswerError, BucketExists, BucketUsage, GroupQuery, RemoteGroups};

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

    /// `query`'s answer for `group`: from this node's machine when it
    /// holds the group, else from a node that does.
    ///
    /// # Errors
    /// The group could not answer (its queue is full, the engine stops),
    /// or no node that holds it answered ([`Unavailable::Remote`]).
    pub async fn ask<Q: GroupQuery>(
        &self,
        group: usize,
        query: Q,
    ) -> Result<Q::Answer, EngineError> {
        let remote = match self.remote().get() {
            Some(remote) if !remote.holds(group) => remote,
            _ => return self.query_group(group, move |m| query.run(m)).await,
        };
        let body = serde_json::to_vec(&query).map_err(|_| Unavailable::Remote)?;
        let answer = remote.ask(group, Q::KIND, body).await?;
        serde_json::from_slice(&answer).map_err(|e| {
            tracing::debug!(kind = Q::KIND, error = %e, "a remote answer did not decode");
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
        if !self.holds_group(group) {
            return Err(AnswerError::NotHeld(group));
        }
        let query: Q = serde_json::from_slice(query).map_err(|e| AnswerError::Malformed {
            kind: Q::KIND,
            error: e.to_string(),
        })?;
        let answer = self.query_group(group, move |m| query.run(m)).await?;
        serde_json::to_vec(&answer)
            .map_err(|_| EngineError::Unavailable(Unavailable::Remote).into())
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
