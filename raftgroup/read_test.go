package raftgroup

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// nopFSM applies nothing.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.EOF }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// tcpStream is a plain TCP raft.StreamLayer.
type tcpStream struct{ net.Listener }

func (s tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// ReadReady turns true only on the leader, once its barrier of the term
// finished (OnLeader starts after it); a follower is never ready.
func TestReadReadyAfterTheBarrier(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sawReady := make(chan bool, 1)
	var g *Group
	g, err = Open(Config{Name: "slot-0", NodeID: "n1", Dir: filepath.Join(t.TempDir(), "g"), Stream: tcpStream{ln}, FSM: nopFSM{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Timing: Timing{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond},
		OnLeader: func(ctx context.Context) {
			sawReady <- g.ReadReady()
			<-ctx.Done()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.ReadReady() {
		t.Fatal("ready before any leadership")
	}
	if err := g.Bootstrap([]raft.Server{{ID: "n1", Address: raft.ServerAddress(ln.Addr().String())}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "ready once leading", testutil.True(g.ReadReady))
	if !g.IsLeader() {
		t.Fatal("ready but not leader")
	}
	select {
	case ok := <-sawReady:
		if !ok {
			t.Fatal("OnLeader ran before the replica was ready for reads")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLeader did not run")
	}
}
