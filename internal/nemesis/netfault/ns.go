package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NamePrefix starts the name of every network namespace the harness makes
// ("tmnem<pid>-hub", "tmnem<pid>-n1", ...): the pid names the run that owns
// it, so a later run can remove what a killed run left behind.
const NamePrefix = "tmnem"

// netnsDir is where `ip netns` keeps named namespaces.
const netnsDir = "/var/run/netns"

// Namespace is a named network namespace (ip netns).
type Namespace struct {
	Name string
}

func run(name string, args ...string) error {
	return runInput(nil, name, args...)
}

func runInput(stdin []byte, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newNamespace creates a namespace with its loopback up.
func newNamespace(name string) (*Namespace, error) {
	if err := run("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	ns := &Namespace{Name: name}
	if err := ns.IP("link", "set", "lo", "up"); err != nil {
		_ = ns.Delete()
		return nil, err
	}
	return ns, nil
}

// IP runs `ip -n <ns> args...`.
func (ns *Namespace) IP(args ...string) error {
	return run("ip", append([]string{"-n", ns.Name}, args...)...)
}

// Exec runs a command inside the namespace and waits for it.
func (ns *Namespace) Exec(stdin []byte, name string, args ...string) error {
	return runInput(stdin, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Command prepares a long-running process inside the namespace. `ip netns
// exec` execs the program in place, so the process's pid is the program's
// and signals reach it directly.
func (ns *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Do runs f on an OS thread switched into the namespace: sockets f creates
// (listeners, connections) belong to the namespace for their whole life,
// whichever thread uses them later. The thread is switched back before it
// is released; if that fails it stays locked, and the runtime retires it
// when the goroutine ends.
func (ns *Namespace) Do(f func() error) error {
	target, err := os.Open(netnsDir + "/" + ns.Name)
	if err != nil {
		return fmt.Errorf("netns %s: %w", ns.Name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: current namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: enter %s: %w", ns.Name, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it must not run anything else.
		return errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", ns.Name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Pids lists the processes running in the namespace.
func (ns *Namespace) Pids() []int {
	out, err := exec.Command("ip", "netns", "pids", ns.Name).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// Delete removes the namespace's name. Processes still inside keep it
// alive: stop them first.
func (ns *Namespace) Delete() error {
	return run("ip", "netns", "del", ns.Name)
}

// Available reports why namespaces cannot be used here (nil: they can):
// not root, `ip` or `iptables` missing, or creating one fails.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("not root: network namespaces and iptables need root")
	}
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (apt-get install iproute2 iptables)", tool)
		}
	}
	name := fmt.Sprintf("%s%d-probe", NamePrefix, os.Getpid())
	ns, err := newNamespace(name)
	if err != nil {
		return fmt.Errorf("cannot create a network namespace: %w", err)
	}
	defer ns.Delete()
	if err := ns.Exec(nil, "iptables", "-w", "-t", "nat", "-S"); err != nil {
		return fmt.Errorf("iptables (nat) unusable in a namespace: %w", err)
	}
	return nil
}

// CleanupStale removes the namespaces that runs no longer alive left
// behind, after killing the processes still inside them (servers started
// by those runs). It returns the names it removed.
func CleanupStale() []string {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, NamePrefix) {
			continue
		}
		rest := strings.TrimPrefix(name, NamePrefix)
		i := strings.IndexByte(rest, '-')
		if i <= 0 {
			continue
		}
		pid, err := strconv.Atoi(rest[:i])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue // ours, or the run is alive
		}
		ns := &Namespace{Name: name}
		for _, p := range ns.Pids() {
			_ = syscall.Kill(p, syscall.SIGCONT)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
		if ns.Delete() == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
