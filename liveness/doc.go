// Package liveness is the node-level liveness protocol: every node pings
// every other member five times a second (rpc/peer's ping frame, answered
// by the peer's transport itself; at once, out of turn, when its
// connection to the peer broke: ConnLost), and keeps per peer when it
// last answered and how far its clock is from ours. Three things rest on
// it (docs/reliability.md#liveness-fencing-and-clocks):
//
//   - fencing: a slot leader starts a callback only while it holds a
//     lease, a majority of the slot's voters having answered a ping sent
//     less than Lease ago (LeaseHeld); a leader that was paused, cut off or
//     deposed meanwhile has no fresh answers and sends nothing;
//   - failover: a peer that answers nothing for DeadAfter, or refuses the
//     connection, is dead (Dead, OnChange), and the node makes the
//     followers of the raft groups it led elect a new leader at once
//     rather than after raft's conservative timeout;
//   - clocks: each ping carries the sender's wall time and each answer the
//     peer's, so every round trip measures the peer's offset (NTP's
//     formula: offset = t2 - (t1+t3)/2, uncertainty = rtt/2; the sample
//     with the smallest round trip of the last few wins). The median over
//     the reachable members, this node counting as 0, is this node's
//     offset to the majority; outside --max-clock-offset the node gives up
//     its slot leaderships, and FireNow holds callbacks back by a clock
//     that runs ahead and by the uncertainty, so nothing fires early on
//     the majority's clock.
//
// Only monotonic time measures durations; wall time is only compared
// across nodes. A step of the wall clock (seen as a jump between wall and
// monotonic time) voids the offsets measured before it.
package liveness
