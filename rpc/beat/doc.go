// Package beat carries raft heartbeats between two nodes coalesced: every
// slot group on a node, and the meta group (WrapAlwaysOpen), sends its
// heartbeats to a peer node through one Coalescer, which gathers those of all groups for up to 20 ms and sends them
// as one node-to-node call (rpc/peer, MethodHeartbeats); the peer hands each
// heartbeat to its own group's raft and answers all of them in one reply.
//
// # Why
//
// hashicorp/raft's leader sends each follower of each group a heartbeat
// every HeartbeatTimeout/10 to /5 (100-200 ms with the library's 1 s) as
// its own RPC: with 1,024 slots on 3 nodes that is ~14,000 RPCs a second,
// each a msgpack encode, a write, a read and a goroutine wake-up on both
// sides, for nothing but
// "still here". Coalesced, the same heartbeats are ~200 calls a second
// (one per peer direction per flush), the rest being a function call per
// group on the receiver.
//
// # Failure detection is not weakened
//
// An answer still comes only from the group itself: the receiver calls the
// heartbeat handler raft registered for that group (the fast path stock
// NetworkTransport uses too) and returns exactly what it answered. A group
// that is not open on the peer (or is shutting down) fails the heartbeat,
// as the peer's mux would have refused the stock connection; so does one
// its group is still handling after 100 ms (a term being persisted), so
// that it does not delay the rest of the batch. An unreachable peer or a
// timeout fail every heartbeat of the batch — the failure raft would have
// seen on the stock path, which goes to the same port (it is not retried
// there: each retry would dial a connection per group, and an election
// storm's memory was mostly those). Only a peer that does not know the
// method (an older binary) gets heartbeats the stock way, for a minute
// before it is asked again — and, for the meta group alone
// (WrapAlwaysOpen), a peer that answers that the group is not open there:
// every running node has it open, so that peer predates the meta group's
// move onto the node connection. The coalescing delay (Options.Flush: the node
// sets a tenth of the slots' raft lease, 500 ms against their 5 s lease
// and 10 s heartbeat timeout) is small against those, but not against a
// read: a GET confirms its leader with a heartbeat round
// (raftgroup VerifyLeader), so the group is marked urgent for 50 ms
// (Transport.Urgent) and its heartbeats go out at once, taking along those
// already waiting for that peer (a GET on an idle cluster: ~17 ms with the
// delay, ~2 ms without).
//
// Only heartbeats are coalesced (AppendEntries with no entries, no previous
// entry and no commit index: raft's heartbeat(), the same test
// NetworkTransport's fast path applies).
//
// # Held answers and parked heartbeats (held.go)
//
// With Options.HoldAnswers set (the node: half the slots' heartbeat
// timeout), a group's heartbeat to a follower that answered its previous
// one recently, at the same term, is answered with that answer at once and
// sent in the background; with Options.Park (a tenth of the timeout) the
// call then stays with the transport until a tick shared by every group
// on the node. raft's heartbeat goroutine wakes once per heartbeat instead
// of twice, on shared ticks, and its own random timer fires about half as
// often; the follower still hears every heartbeat raft sends. A held
// answer never confirms a leadership: Confirm sends at once and returns
// the follower's own answer (raftgroup's VerifyLeader counts only those),
// and a group marked Urgent neither holds nor parks.
//
// # Other raft RPCs: carried on the node connection
//
// Votes, pre-votes, timeout-now and AppendEntries sent outside a pipeline
// go as one node-to-node call each (MethodRaft, carry.go) rather than on
// the group's own NetworkTransport connection. With the stock transport
// every election dialed: at 1,024 slots thousands of connections through
// the internal port, two 256 KiB buffers on each side of each, and the
// CPU of dialing starved the liveness pings until peers were declared
// dead (docs/scaling.md). The receiver hands each RPC to its group's raft
// through the transport's consumer channel (merged with the stock one's,
// which still serves pipelined appends, snapshots and older peers) and
// returns the group's answer; a group not open there fails the RPC, as
// the peer's mux would have refused the stock connection — except a vote
// or pre-vote, which waits up to 4 s for the group to open (voteOpenWait:
// a new group's first candidate campaigns before its peers have opened it,
// and a refused candidate sits out its whole election timeout). A carried
// TimeoutNow (a leadership transfer to this replica) goes in after a
// pre-vote request in term 0, which wakes raft's main loop out of a
// refused campaign's wait so that the TimeoutNow starts an election
// (wakeRaft; raftgroup's wakeMainLoop has the details). Transport.Inject
// hands an RPC to the group's own raft the same way; raftgroup uses it
// for a TimeoutNow (campaign at once). A leader's
// pipeline is lazy (pipeline.go): it sends synchronously on the node
// connection, and dials the stock pipeline only once appends carrying
// entries come often. InstallSnapshot keeps the stock transport. A peer
// that answers that it does not know MethodRaft (an older binary) is sent
// the stock way for a minute before it is asked again.
//
// A carried append that failed because its peer is unreachable is held
// until the node's liveness check hears the peer again, then sent once
// more, or until Options.FailHold (1 s) passes (holdFailed): raft backs
// off its replication to a follower after every failed append, up to
// 10 s, and does not cut that sleep short when the follower comes back.
// A vote or pre-vote request that failed that way is held the same way
// and sent again, as often as that happens within 3 s (carryVote): raft
// asks each voter once per election, and a request lost with a
// connection the liveness check dropped left the group without a leader
// until the candidate's election timeout (5-10 s) ended.
//
// MethodRaft body: u16 group | u8 kind (1 append, 2 vote, 3 pre-vote, 4
// timeout-now) | the request in msgpack, as NetworkTransport encodes it;
// the answer is the group's response in msgpack.
//
// # Wire format (MethodHeartbeats body)
//
// Request: uvarint n, then n items: u16 group | uvarint term | uvarint
// protocol version | bytes id | bytes addr | bytes leader. Answer: uvarint
// n, then per item in request order: u8 0 | uvarint term | uvarint last log
// | u8 flags (1 success, 2 no-retry-backoff) | uvarint protocol version |
// bytes id | bytes addr; or u8 1 | bytes message (this item failed).
// bytes is uvarint length then the bytes.
package beat
