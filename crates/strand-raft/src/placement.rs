//! Placement: which members vote in which group.
//!
//! A cluster's groups each have `--replication-factor` voters (every
//! member when there are fewer), spread so that no member votes in more
//! than one group more than another. The placement is not stored
//! anywhere of its own: each group's voters are its Raft membership,
//! replicated in its log, and [`plan`] is a pure function of those
//! memberships that every node computes alike. A group's leader moves its
//! group towards the plan (`crate::balance`), one change at a time; the
//! plan changes as little as it can (a voter that may stay stays), so a
//! balanced cluster is a fixed point.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::types::NodeId;

/// The default replication factor: three voters per group.
pub const DEFAULT_REPLICATION_FACTOR: usize = 3;

/// The largest replication factor a node takes.
pub const MAX_REPLICATION_FACTOR: usize = 9;

/// A group as the planner sees it: its voters and its leader now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placed {
    /// The group's voters.
    pub voters: BTreeSet<NodeId>,
    /// The group's leader, whose vote a plan keeps where it can.
    pub leader: Option<NodeId>,
}

/// The voters each group should have: `factor` of `nodes` (all of them
/// when there are fewer), keeping each group's current voters that are
/// still members where that leaves the spread even (the voters per member
/// differ by at most one), and always a group's leader while it is a
/// member (the spread evens out once leaderships have moved).
/// Deterministic: the same groups, members and factor give the same plan.
pub fn plan(groups: &[Placed], nodes: &BTreeSet<NodeId>, factor: usize) -> Vec<BTreeSet<NodeId>> {
    if nodes.is_empty() {
        return groups.iter().map(|g| g.voters.clone()).collect();
    }
    let want = factor.clamp(1, nodes.len());
    let mut out: Vec<BTreeSet<NodeId>> = groups
        .iter()
        .map(|g| g.voters.intersection(nodes).copied().collect())
        .collect();
    let mut load: BTreeMap<NodeId, usize> = nodes.iter().map(|&n| (n, 0)).collect();
    for voters in &out {
        for n in voters {
            *load.entry(*n).or_default() += 1;
        }
    }
    // Too many voters: the most loaded one goes, never the leader.
    for (voters, group) in out.iter_mut().zip(groups) {
        while voters.len() > want {
            let Some(&gone) = voters
                .iter()
                .filter(|&&n| Some(n) != group.leader)
                .max_by_key(|&&n| (load[&n], n))
            else {
                break;
            };
            voters.remove(&gone);
            *load.entry(gone).or_default() -= 1;
        }
    }
    // Too few: the least loaded member joins.
    for voters in &mut out {
        while voters.len() < want {
            let Some(&added) = nodes
                .iter()
                .filter(|n| !voters.contains(n))
                .min_by_key(|&&n| (load[&n], n))
            else {
                break;
            };
            voters.insert(added);
            *load.entry(added).or_default() += 1;
        }
    }
    // Even out: a vote moves from a member to one voting in at least two
    // fewer groups (the widest such gap first) until every two differ by
    // at most one. A leader's vote never moves: leadership balancing
    // moves the leadership first, and the plan then moves the vote. Each
    // move lowers the spread's sum of squares, so this ends; the bound is
    // a guard.
    for _ in 0..out.len().saturating_mul(want).saturating_add(1) {
        let mut best: Option<(Reverse<usize>, usize, NodeId, NodeId)> = None;
        for (at, voters) in out.iter().enumerate() {
            for &from in voters {
                if groups[at].leader == Some(from) {
                    continue;
                }
                for &to in nodes {
                    if voters.contains(&to) || load[&from] < load[&to] + 2 {
                        continue;
                    }
                    let key = (Reverse(load[&from] - load[&to]), at, from, to);
                    if best.as_ref().is_none_or(|b| key < *b) {
                        best = Some(key);
                    }
                }
            }
        }
        let Some((_, at, from, to)) = best else {
            break;
        };
        out[at].remove(&from);
        out[at].insert(to);
        *load.entry(from).or_default() -= 1;
        *load.entry(to).or_default() += 1;
    }
    out
}

/// The voters of each of `groups` groups of a new cluster of `nodes`:
/// [`plan`] from nothing.
pub fn initial(groups: usize, nodes: &BTreeSet<NodeId>, factor: usize) -> Vec<BTreeSet<NodeId>> {
    plan(&vec![Placed::default(); groups], nodes, factor)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ids(range: std::ops::RangeInclusive<NodeId>) -> BTreeSet<NodeId> {
        range.collect()
    }

    fn loads(plan: &[BTreeSet<NodeId>]) -> BTreeMap<NodeId, usize> {
        let mut load = BTreeMap::new();
        for voters in plan {
            for n in voters {
                *load.entry(*n).or_insert(0) += 1;
            }
        }
        load
    }

    fn spread(plan: &[BTreeSet<NodeId>], nodes: &BTreeSet<NodeId>) -> usize {
        let load = loads(plan);
        let counts: Vec<usize> = nodes
            .iter()
            .map(|n| load.get(n).copied().unwrap_or(0))
            .collect();
        counts.iter().max().unwrap() - counts.iter().min().unwrap()
    }

    /// Groups with the planned voters, led by their first, second or
    /// third voter in turn (leaderships spread, as balancing leaves them).
    fn placed(plan: &[BTreeSet<NodeId>]) -> Vec<Placed> {
        plan.iter()
            .enumerate()
            .map(|(g, v)| Placed {
                voters: v.clone(),
                leader: v.iter().nth(g % v.len().max(1)).copied(),
            })
            .collect()
    }

    #[test]
    fn a_new_cluster_is_spread_evenly() {
        for nodes in 1..=9u64 {
            for groups in [1, 4, 16, 31] {
                for factor in [1, 3, 5] {
                    let members = ids(1..=nodes);
                    let p = initial(groups, &members, factor);
                    let want = factor.min(nodes as usize);
                    assert!(
                        p.iter().all(|v| v.len() == want),
                        "{nodes} {groups} {factor}"
                    );
                    assert!(
                        spread(&p, &members) <= 1,
                        "{nodes} {groups} {factor}: {p:?}"
                    );
                    // A balanced placement is a fixed point.
                    assert_eq!(plan(&placed(&p), &members, factor), p);
                }
            }
        }
    }

    #[test]
    fn five_nodes_sixteen_groups() {
        let members = ids(1..=5);
        let p = initial(16, &members, 3);
        let load = loads(&p);
        assert_eq!(load.values().sum::<usize>(), 48);
        assert!(load.values().all(|&l| l == 9 || l == 10), "{load:?}");
    }

    #[test]
    fn a_new_member_takes_votes_and_few_move() {
        let five = ids(1..=5);
        let before = initial(16, &five, 3);
        let six = ids(1..=6);
        let after = plan(&placed(&before), &six, 3);
        assert!(after.iter().all(|v| v.len() == 3));
        assert!(spread(&after, &six) <= 1, "{after:?}");
        // Node 6 takes its share (8 of 48 votes); only those votes move.
        let moved: usize = before
            .iter()
            .zip(&after)
            .map(|(b, a)| a.difference(b).count())
            .sum();
        assert_eq!(loads(&after)[&6], 8);
        assert_eq!(moved, 8);
    }

    #[test]
    fn a_gone_member_is_replaced_and_leaders_keep_their_votes() {
        let five = ids(1..=5);
        let before = placed(&initial(16, &five, 3));
        let four: BTreeSet<NodeId> = [1, 2, 3, 5].into();
        let after = plan(&before, &four, 3);
        assert!(after.iter().all(|v| v.len() == 3 && !v.contains(&4)));
        assert!(spread(&after, &four) <= 1, "{after:?}");
        for (g, a) in before.iter().zip(&after) {
            if let Some(leader) = g.leader.filter(|l| *l != 4) {
                assert!(a.contains(&leader), "{g:?} → {a:?}");
            }
        }
    }

    #[test]
    fn a_lower_factor_drops_voters_but_not_the_leader() {
        let five = ids(1..=5);
        let all: Vec<Placed> = (0..8)
            .map(|g| Placed {
                voters: five.clone(),
                leader: Some(1 + g % 5),
            })
            .collect();
        let after = plan(&all, &five, 3);
        for (g, a) in all.iter().zip(&after) {
            assert_eq!(a.len(), 3);
            assert!(a.contains(&g.leader.unwrap()));
        }
        assert!(spread(&after, &five) <= 1, "{after:?}");
    }

    #[test]
    fn no_members_changes_nothing() {
        let groups = placed(&initial(3, &ids(1..=3), 3));
        let same: Vec<_> = groups.iter().map(|g| g.voters.clone()).collect();
        assert_eq!(plan(&groups, &BTreeSet::new(), 3), same);
    }

    #[test]
    fn a_leader_keeps_its_vote_until_its_leadership_moves() {
        // A cluster grown from node 1: it leads every group, alone.
        let alone: Vec<Placed> = (0..4)
            .map(|_| Placed {
                voters: [1].into(),
                leader: Some(1),
            })
            .collect();
        let five = ids(1..=5);
        let p = plan(&alone, &five, 3);
        assert!(p.iter().all(|v| v.len() == 3 && v.contains(&1)), "{p:?}");
        // Once two leaderships moved, the plan evens the votes out.
        let moved: Vec<Placed> = p
            .iter()
            .enumerate()
            .map(|(g, v)| Placed {
                voters: v.clone(),
                leader: if g < 2 {
                    v.iter().nth(1).copied()
                } else {
                    Some(1)
                },
            })
            .collect();
        let q = plan(&moved, &five, 3);
        assert!(spread(&q, &five) <= 1, "{q:?}");
    }
}
