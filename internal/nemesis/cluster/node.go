package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one server process with its own data directory, addresses and
// log file, kept across restarts. Node i has the id "n<i+1>".
type Node struct {
	Index    int
	ID       string
	Host     string // the address it binds (127.0.0.1 or its namespace's)
	HTTPAddr string
	BindAddr string
	SerfAddr string
	DataDir  string
	LogPath  string
	// Args are the extra server arguments (--join, --bootstrap-expect, ...).
	Args []string

	start func(n *Node) (*exec.Cmd, error)

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	paused  bool
	removed bool
	starts  int
}

// Start starts the process (it does not wait for readiness).
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("%s already running", n.ID)
		}
	}
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(f, "=== nemesis: start #%d at %s ===\n", n.starts, time.Now().Format(time.RFC3339Nano))
	cmd, err := n.start(n)
	if err != nil {
		f.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Never outlive the runner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.waitErr, n.paused = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		fmt.Fprintf(f, "=== nemesis: process exited at %s: %v ===\n", time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		close(done)
	}()
	return nil
}

// Running reports whether the process is alive (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Paused reports whether the process is stopped by SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Removed reports whether the node was taken out of the cluster for good.
func (n *Node) Removed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.removed
}

// MarkRemoved records that the node left the cluster (admin remove).
func (n *Node) MarkRemoved() {
	n.mu.Lock()
	n.removed = true
	n.mu.Unlock()
}

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s never started", n.ID)
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v to %s: %w", sig, n.ID, err)
	}
	return nil
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 when a signal ended it).
func (n *Node) Wait(timeout time.Duration) (int, error) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return 0, fmt.Errorf("%s never started", n.ID)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s (pid %d) still running after %v", n.ID, cmd.Process.Pid, timeout)
	}
	return cmd.ProcessState.ExitCode(), nil
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (n *Node) Kill() error {
	if !n.Running() {
		return nil
	}
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	_, err := n.Wait(10 * time.Second)
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return err
}

// Wipe deletes the data directory of a node that is not running: its next
// Start comes up empty under the same id, as a node whose disk was
// replaced. A node started without --join (the first one) gets join
// (the others' serf addresses) for that start and the ones after, since
// with its gossip state gone it would otherwise find nobody.
func (n *Node) Wipe(join []string) error {
	if n.Running() {
		return fmt.Errorf("%s is running: kill it before wiping its data", n.ID)
	}
	if err := os.RemoveAll(n.DataDir); err != nil {
		return fmt.Errorf("wipe %s: %w", n.ID, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.Args, "--join") && len(join) > 0 {
		n.Args = append(n.Args, "--join", strings.Join(join, ","))
	}
	return nil
}

// Terminate sends SIGTERM (a clean stop: leaderships handed off first) and
// waits up to timeout; past it the process is killed and an error
// returned. It returns the exit code.
func (n *Node) Terminate(timeout time.Duration) (int, error) {
	if !n.Running() {
		return 0, fmt.Errorf("%s not running", n.ID)
	}
	if err := n.signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	code, err := n.Wait(timeout)
	if err != nil {
		// SIGQUIT first: the Go runtime writes every goroutine's stack
		// to stderr (the node's server.log) and exits, which shows where
		// the stop hung.
		if n.signal(syscall.SIGQUIT) == nil {
			_, _ = n.Wait(5 * time.Second)
		}
		_ = n.Kill()
		return code, fmt.Errorf("no exit after SIGTERM (goroutine dump in its server.log): %w", err)
	}
	return code, nil
}

// Pause stops the process with SIGSTOP.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	return nil
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error {
	if err := n.signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// ExitError is how the last run of the process ended (nil while running).
func (n *Node) ExitError() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}
