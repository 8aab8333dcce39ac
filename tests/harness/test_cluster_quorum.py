"""The cluster fault tests find the KRaft quorum leader in the nodes' logs (tests/cluster.py)."""

from __future__ import annotations

import pytest

from tests.cluster import quorum_leader_in

pytestmark = pytest.mark.timeout(10)

RAFT = "INFO [RaftManager id={n}] Completed transition to "
SUFFIX = " (org.apache.kafka.raft.QuorumState)"


def follower(n: int, epoch: int, leader: int, came_from: str) -> str:
    return (
        RAFT.format(n=n)
        + f"FollowerState(fetchTimeoutMs=2000, epoch={epoch}, leader={leader}, voters=[1, 2, 3]) "
        + f"from {came_from}"
        + SUFFIX
    )


def leader(n: int, epoch: int) -> str:
    return (
        RAFT.format(n=n)
        + f"Leader(localVoterNode=VoterNode(voterKey=ReplicaKey(id={n}, directoryId=x)), "
        + f"epoch={epoch}, epochStartOffset=103) from CandidateState(localId={n}, epoch={epoch})"
        + SUFFIX
    )


def unattached(n: int, epoch: int, came_from: str) -> str:
    return (
        RAFT.format(n=n)
        + f"UnattachedState(epoch={epoch}, leaderId=OptionalInt.empty, votedKey=Optional.empty) "
        + f"from {came_from}"
        + SUFFIX
    )


def test_the_leader_of_the_highest_epoch_wins() -> None:
    logs = {
        1: [leader(1, 1)],
        2: [
            follower(2, 1, 1, "UnattachedState(epoch=1)"),
            follower(2, 3, 3, "UnattachedState(epoch=3)"),
        ],
        3: [follower(3, 1, 1, "UnattachedState(epoch=1)"), leader(3, 3)],
    }
    assert quorum_leader_in(logs) == 3


def test_the_leader_of_a_state_a_node_left_is_not_taken_for_the_new_epochs() -> None:
    # node 1 leaves following node 3 for a new epoch before it learns who won it: the line
    # names the old leader, but only in the state node 1 left
    logs = {
        1: [
            follower(1, 4, 3, "UnattachedState(epoch=4)"),
            unattached(1, 5, "FollowerState(fetchTimeoutMs=2000, epoch=4, leader=3)"),
            follower(1, 5, 2, "UnattachedState(epoch=5)"),
        ],
        2: [leader(2, 5)],
        3: [leader(3, 4)],
    }
    assert quorum_leader_in(logs) == 2


def test_logs_with_no_leader_yet_name_none() -> None:
    logs = {1: [unattached(1, 0, "null")], 2: ["some other line"], 3: []}
    assert quorum_leader_in(logs) is None
