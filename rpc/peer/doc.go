// Package peer is the node-to-node request/response protocol (mux.ProtoRPC,
// group 0) on the node's single internal port: forwarding a client write to
// a slot's leader, reads from a leader, and control calls.
//
// # Why this shape
//
// Calls are many (hundreds in flight to one peer), mostly small and
// latency-sensitive, sometimes a few MiB. Dialing per call would cost a
// handshake and a mux header each time, and one call per connection would let
// a slow handler hold up everything behind it. So a Client keeps a few
// persistent connections per peer (ClientOptions.ConnsPerPeer) and
// multiplexes calls on them by request id; the Server runs every call on its
// own goroutine and writes answers in whatever order they finish. A slow call
// only ever delays itself.
//
// # Wire format
//
// After the 4-byte mux header (protocol, version, group), both directions
// carry frames, all integers big-endian:
//
//	u32 length   bytes that follow this field: 10 + len(payload), at most MaxFrameSize
//	u64 id       request id, chosen by the client, unique per connection
//	u8  kind     1 request, 2 response-ok, 3 response-error, 4 ping, 5 pong
//	u8  method   the Method of a request (echoed in its answer; 0 for ping/pong)
//	payload      request or answer body; for response-error:
//	             u16 len(code) | code | message
//
// Ping and pong are the transport's own liveness check (see
// ClientOptions.DeadPeerTimeout); handlers never see them. The protocol is
// versioned by the mux header's version byte, so there is no handshake.
//
// # Methods
//
// The Server knows no methods itself: each package that owns a protocol
// registers its handlers (Server.Handle) — forward the proposals and reads
// it sends to leaders, cluster the status, transfer, compaction and
// formation calls. A method is registered once (a second registration
// panics at start), and a call of an unregistered method is answered with
// CodeUnknownMethod, so two packages can never both answer one number.
//
// # Errors
//
// Call tells three outcomes apart, because the caller reacts differently to
// each: errors.As(err, **RemoteError) — the peer ran the handler and it
// failed (the peer is up; Code is the handler's, such as a model error kind
// or not_leader, or the transport's own peer.* codes); errors.Is(err, ErrUnreachable) — the peer could
// not be reached or the connection broke (down, restarting or partitioned;
// a request already sent may or may not have run); or the caller's ctx ended
// (the error wraps ctx.Err()).
package peer
