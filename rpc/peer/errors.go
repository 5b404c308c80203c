package peer

import (
	"errors"
	"fmt"
)

// ErrUnreachable marks a call that failed because the peer could not be
// reached: the dial failed, or the connection broke or went silent while the
// call was outstanding. The error also wraps the underlying dial or I/O error.
// A request that was already written may or may not have been executed.
var ErrUnreachable = errors.New("peer unreachable")

// ErrDropped marks a call failed because this node closed the connection
// itself (Client.Drop: its liveness check declared the peer dead). It says
// nothing new about the peer: whoever judges the peer's health must not
// count it as the peer failing (the verdict would feed itself), and a
// caller must not take it as a reason to reach the peer another way.
var ErrDropped = errors.New("connection dropped by this node")

// ErrClosed is returned by calls on a closed Client, including calls that
// were in flight when it closed.
var ErrClosed = errors.New("peer: client closed")

// ErrFrameTooLarge is returned by Call for a body over MaxBodySize (nothing is
// sent and the connection stays usable), and reported when a peer announces a
// frame over MaxFrameSize (the connection is dropped: the stream cannot be
// resynchronised).
var ErrFrameTooLarge = errors.New("peer: frame too large")

// Codes the transport itself puts in a RemoteError. Handlers choose their own
// codes; these are kept short and prefixed so they do not collide.
const (
	// CodeInternal: the handler panicked.
	CodeInternal = "peer.internal"
	// CodeResponseTooLarge: the handler's answer was over MaxBodySize.
	CodeResponseTooLarge = "peer.response_too_large"
	// CodeUnknownMethod: no handler is registered for the method (a peer
	// running an older or newer version).
	CodeUnknownMethod = "peer.unknown_method"
)

// RemoteError is a handler's error as the caller receives it. A handler sets
// Code by returning a *RemoteError (possibly wrapped); any other error
// arrives with an empty Code and its Error() text as Message.
type RemoteError struct {
	Code    string
	Message string
}

func (e *RemoteError) Error() string {
	if e.Code == "" {
		return "remote error: " + e.Message
	}
	return fmt.Sprintf("remote error %s: %s", e.Code, e.Message)
}

// remoteErrorFrom turns a handler's error into what goes on the wire.
func remoteErrorFrom(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		if re == err {
			return re
		}
		// Wrapped: keep the code, and the wrapping context in the message.
		return &RemoteError{Code: re.Code, Message: err.Error()}
	}
	return &RemoteError{Message: err.Error()}
}

// unreachable wraps err (a dial or I/O error) so that both
// errors.Is(_, ErrUnreachable) and errors.Is(_, err) hold. Call adds the
// address and method.
func unreachable(err error) error {
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}
