//! Questions over groups a node does not hold: answered by its own
//! machine where it holds the group, else handed, encoded, to the
//! installed `RemoteGroups`; and answered for others only about groups
//! it holds.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use strand::StreamCommand;
use strand_engine::{
    AnswerError, BucketExists, BucketUsage, Engine, EngineError, GroupQuery, RemoteAnswer,
    RemoteGroups, Unavailable,
};

/// Holds the groups in `held`; answers every question about the others
/// with `answer` (or fails without one), recording what it was asked.
struct Fake {
    held: Vec<usize>,
    answer: Option<Vec<u8>>,
    asked: Mutex<Vec<(usize, &'static str, Vec<u8>)>>,
}

impl RemoteGroups for Fake {
    fn holds(&self, group: usize) -> bool {
        self.held.contains(&group)
    }
    fn ask(&self, group: usize, kind: &'static str, query: Vec<u8>) -> RemoteAnswer {
        self.asked.lock().unwrap().push((group, kind, query));
        let answer = self.answer.clone();
        Box::pin(async move { answer.ok_or(EngineError::Unavailable(Unavailable::Remote)) })
    }
}

fn msgpack(value: &impl serde::Serialize) -> Vec<u8> {
    rmp_serde::to_vec_named(value).unwrap()
}

fn acme() -> Vec<u8> {
    msgpack(&BucketExists {
        bucket: "acme".into(),
    })
}

fn engine() -> Engine {
    crate::engine::engine(4)
}

#[tokio::test]
async fn held_groups_answer_here_and_the_others_are_asked() {
    let engine = engine();
    engine
        .apply_all(StreamCommand::CreateBucket {
            bucket_id: "acme".to_owned(),
        })
        .await
        .unwrap();
    // Without a RemoteGroups every group is held.
    assert!((0..4).all(|g| engine.holds_group(g)));
    let fake = Arc::new(Fake {
        held: vec![0, 2],
        answer: Some(msgpack(&false)),
        asked: Mutex::default(),
    });
    assert!(engine.set_remote_groups(fake.clone()));
    assert!(
        !engine.set_remote_groups(fake.clone()),
        "only the first one"
    );
    assert!(engine.holds_group(2) && !engine.holds_group(1));
    let here = engine
        .ask(
            0,
            BucketExists {
                bucket: "acme".into(),
            },
        )
        .await
        .unwrap();
    assert!(here, "group 0 is held: its machine knows the bucket");
    assert!(fake.asked.lock().unwrap().is_empty());
    let there = engine
        .ask(
            3,
            BucketExists {
                bucket: "acme".into(),
            },
        )
        .await
        .unwrap();
    assert!(!there, "group 3's answer is the remote one");
    assert_eq!(
        fake.asked.lock().unwrap().as_slice(),
        [(
            3,
            BucketExists::KIND,
            msgpack(&BucketExists {
                bucket: "acme".into()
            })
        )]
    );
    // The fan-outs ask about the groups not held only.
    fake.asked.lock().unwrap().clear();
    assert!(!engine.bucket_exists("nosuch").await.unwrap());
    let asked: Vec<usize> = fake.asked.lock().unwrap().iter().map(|a| a.0).collect();
    assert_eq!(asked, [1, 3]);
    // An answer that does not decode is unavailable, not a panic.
    let usage = engine.bucket_usage("acme").await;
    assert!(
        matches!(usage, Err(EngineError::Unavailable(Unavailable::Remote))),
        "{usage:?}"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_remote_that_fails_is_unavailable() {
    let engine = engine();
    engine.set_remote_groups(Arc::new(Fake {
        held: vec![0],
        answer: None,
        asked: Mutex::default(),
    }));
    let r = engine.bucket_usage("acme").await;
    assert!(
        matches!(r, Err(EngineError::Unavailable(Unavailable::Remote))),
        "{r:?}"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn questions_from_others_are_answered_about_held_groups_only() {
    let engine = engine();
    let id = strand::BucketStreamId::new("acme", "s");
    engine
        .apply_all(StreamCommand::CreateBucket {
            bucket_id: "acme".to_owned(),
        })
        .await
        .unwrap();
    let created = engine
        .apply(&id, crate::engine::create(&id, b"hello"))
        .await
        .unwrap();
    assert!(
        matches!(created, strand::StreamResponse::Created { .. }),
        "{created:?}"
    );
    let held = engine.group_for(&id);
    let other = (held + 1) % 4;
    engine.set_remote_groups(Arc::new(Fake {
        held: vec![0, held],
        answer: None,
        asked: Mutex::default(),
    }));
    let json = engine
        .answer_here::<BucketUsage>(held, &acme())
        .await
        .unwrap();
    let usage: Option<strand::BucketUsageSnapshot> = rmp_serde::from_slice(&json).unwrap();
    assert_eq!(usage.unwrap().bucket_id, "acme");
    let json = engine
        .answer_here::<BucketExists>(0, &acme())
        .await
        .unwrap();
    assert_eq!(json, msgpack(&true));
    if other != 0 {
        let not_held = engine.answer_here::<BucketExists>(other, &acme()).await;
        assert!(
            matches!(not_held, Err(AnswerError::NotHeld(g)) if g == other),
            "{not_held:?}"
        );
    }
    let missing = engine.answer_here::<BucketExists>(4, &acme()).await;
    assert!(
        matches!(missing, Err(AnswerError::NoSuchGroup(4))),
        "{missing:?}"
    );
    let malformed = engine.answer_here::<BucketExists>(0, b"\xc0").await;
    assert!(
        matches!(
            malformed,
            Err(AnswerError::Malformed {
                kind: "bucket-exists",
                ..
            })
        ),
        "{malformed:?}"
    );
    engine.shutdown().await;
}
