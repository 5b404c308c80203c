package e2e

// The harness: the binary, server processes, a webhook receiver, and HTTP
// helpers for exact-contract checks. Everything waits on conditions with a
// deadline; the only fixed waits are the short "nothing arrives in this
// window" checks, which cannot be written any other way.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

// Bounds shared by the tests. Lateness is generous (CI has 2 cores and the
// tests run side by side); earliness is never tolerated.
const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	lateBound    = 2 * time.Second // a callback arrives within this of its trigger_time
	quietWindow  = 1500 * time.Millisecond
	waitSlack    = 10 * time.Second // added to every "wait for a delivery" deadline
)

var (
	binPath string
	// serverBin is a symlink to binPath under another name, used to run
	// servers: on a shared machine, someone's `pkill timemachine` or
	// `killall timemachine` aimed at their own servers must not stop ours
	// in the middle of a test.
	serverBin string

	sharedOnce sync.Once
	sharedSrv  *Server
	sharedErr  error
	sharedDir  string

	secureOnce sync.Once
	secureErr  error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// Real processes, kill -9 and waits for callbacks: minutes. The
		// fast loop (go test -short ./...) leaves them to make test.
		fmt.Fprintln(os.Stderr, "e2e: skipped with -short (make test runs it)")
		return 0
	}
	if p := os.Getenv("TIMEMACHINE_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: TIMEMACHINE_BIN=%q: %v (run `make build` or unset it)\n", p, err)
			return 1
		}
		binPath = abs
	} else {
		dir, err := os.MkdirTemp("", "tm-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		binPath = filepath.Join(dir, "timemachine")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/timemachine")
		cmd.Dir = ".." // the module root: this package is <root>/e2e
		out, err := cmd.CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/timemachine: %v\n%s", err, out)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: built %s in %v\n", binPath, time.Since(start).Round(time.Millisecond))
	}

	linkDir, err := os.MkdirTemp("", "tm-e2e-link-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(linkDir)
	serverBin = filepath.Join(linkDir, "tm-e2e-server")
	if err := os.Symlink(binPath, serverBin); err != nil {
		serverBin = binPath
	}

	if secureMode {
		if _, err := secureMaterial(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: secure mode:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "e2e: secure mode: every server runs with HTTPS, tokens, peer mTLS, a gossip key and sealed secrets")
	}
	defer func() {
		if secure != nil {
			os.RemoveAll(secure.dir)
		}
	}()

	code := m.Run()

	if sharedSrv != nil {
		exit, err := sharedSrv.Stop(stopTimeout)
		if err != nil || exit != 0 {
			fmt.Fprintf(os.Stderr, "e2e: the shared server did not stop cleanly on SIGTERM (exit %d, %v); its log:\n%s\n",
				exit, err, sharedSrv.LogTail(0, 64<<10))
			if code == 0 {
				code = 1
			}
		}
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	return code
}

// ---------------------------------------------------------------------------
// Unique names: the shared server lives for the whole run (also across
// -count=N), so every test names its collections and jobs afresh.

var seq atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, seq.Add(1))
}

// ---------------------------------------------------------------------------
// Ports

// givenPorts are the addresses freePort handed out in this process: the
// kernel may offer a port again as soon as its probe closes, and one
// server got the same port for --http-addr and --bind-addr (and could not
// start) that way.
var (
	givenMu    sync.Mutex
	givenPorts = map[string]bool{}
)

// freePort returns a loopback address that was free a moment ago and that
// it never returned before. The small window before the server binds it
// is accepted.
func freePort() (string, error) {
	givenMu.Lock()
	defer givenMu.Unlock()
	var held []net.Listener // kept open so the kernel offers another port
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		held = append(held, ln)
		if addr := ln.Addr().String(); !givenPorts[addr] {
			givenPorts[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("no loopback port this process has not handed out already")
}

// ---------------------------------------------------------------------------
// Server processes

// Server is one timemachine server process (a single-node cluster) with its
// own data directory and ports. It keeps them across restarts.
type Server struct {
	DataDir  string
	HTTPAddr string
	BindAddr string
	SerfAddr string
	LogPath  string
	// Extra arguments for `timemachine server`.
	Args []string
	// Secure: the server runs with the secure setup (HTTPS, tokens…);
	// Token goes with every request unless the request sets its own
	// Authorization (an empty one: none).
	Secure bool
	Token  string

	client *http.Client

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	waitErr error
	logF    *os.File
	starts  int
}

// newServerIn prepares (does not start) a server whose data directory and
// log live under dir.
func newServerIn(dir string) (*Server, error) {
	s := &Server{
		DataDir: filepath.Join(dir, "data"),
		LogPath: filepath.Join(dir, "server.log"),
		client:  harnessClient(15*time.Second, false),
	}
	var err error
	for _, p := range []*string{&s.HTTPAddr, &s.BindAddr, &s.SerfAddr} {
		if *p, err = freePort(); err != nil {
			return nil, err
		}
	}
	if secureMode {
		s.makeSecure()
	}
	return s, nil
}

// startServer starts a dedicated server for one test and waits until it is
// ready. It is killed when the test ends, and its log is printed if the
// test failed.
func startServer(t *testing.T, extraArgs ...string) *Server {
	t.Helper()
	s, err := newServerIn(t.TempDir())
	if err != nil {
		t.Fatalf("prepare server: %v", err)
	}
	s.Args = append(s.Args, extraArgs...)
	t.Cleanup(func() {
		if s.Running() {
			_ = s.Kill()
		}
		if t.Failed() {
			t.Logf("log of the server on %s (%s):\n%s", s.HTTPAddr, s.LogPath, s.LogTail(0, 64<<10))
		}
		s.client.CloseIdleConnections()
	})
	if err := s.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	if err := s.WaitReady(readyTimeout); err != nil {
		t.Fatalf("server not ready: %v", err)
	}
	return s
}

// shared returns the server shared by every test that does not need a
// fresh one (they use distinct collections and ids). On failure the test
// prints the part of its log written while the test ran.
func shared(t *testing.T) *Server {
	t.Helper()
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tm-e2e-shared-")
		if err != nil {
			sharedErr = err
			return
		}
		sharedDir = dir
		s, err := newServerIn(dir)
		if err != nil {
			sharedErr = err
			return
		}
		if err := s.Start(); err != nil {
			sharedErr = err
			return
		}
		sharedSrv = s
		if err := s.WaitReady(readyTimeout); err != nil {
			sharedErr = fmt.Errorf("%w; log:\n%s", err, s.LogTail(0, 32<<10))
		}
	})
	if sharedErr != nil {
		t.Fatalf("shared server: %v", sharedErr)
	}
	off := sharedSrv.LogSize()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared server log (%s) while %s ran:\n%s", sharedSrv.LogPath, t.Name(), sharedSrv.LogTail(off, 32<<10))
		}
	})
	return sharedSrv
}

// Start starts the process on the server's data directory and ports. It
// does not wait for readiness.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.done:
		default:
			return errors.New("server already running")
		}
	}
	f, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.starts++
	fmt.Fprintf(f, "=== e2e: start #%d at %s ===\n", s.starts, time.Now().Format(time.RFC3339Nano))
	args := append([]string{"server",
		"--data-dir", s.DataDir,
		"--http-addr", s.HTTPAddr,
		"--bind-addr", s.BindAddr,
		"--serf-addr", s.SerfAddr,
	}, s.Args...)
	cmd := exec.Command(serverBin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	// Never outlive the test process (e.g. when go test kills it on timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	s.cmd, s.done, s.logF, s.waitErr = cmd, done, f, nil
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		fmt.Fprintf(f, "=== e2e: process exited at %s: %v ===\n", time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		close(done)
	}()
	return nil
}

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// WaitReady polls GET /readyz until it answers 200, the process exits, or
// the timeout passes.
func (s *Server) WaitReady(timeout time.Duration) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	c := harnessClient(time.Second, s.Secure)
	defer c.CloseIdleConnections()
	var last string
	for {
		resp, err := c.Get(s.url("/readyz"))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
		} else {
			last = err.Error()
		}
		select {
		case <-done:
			return fmt.Errorf("server process exited before it was ready (%v); last /readyz: %s", s.exitErr(), last)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET /readyz not 200 after %v; last answer: %s", timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitErr
}

// Wait waits for the process to exit and returns its exit code (-1 when a
// signal killed it).
func (s *Server) Wait(timeout time.Duration) (int, error) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return 0, errors.New("server never started")
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("process %d still running after %v", cmd.Process.Pid, timeout)
	}
	return cmd.ProcessState.ExitCode(), nil
}

// Stop sends SIGTERM and waits for the exit; it returns the exit code. If
// the process does not exit in time it is killed and an error returned.
func (s *Server) Stop(timeout time.Duration) (int, error) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || !s.Running() {
		return 0, errors.New("server not running")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	code, err := s.Wait(timeout)
	if err != nil {
		_ = s.Kill()
		return code, fmt.Errorf("no exit after SIGTERM: %w", err)
	}
	return code, nil
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("server never started")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	_, err := s.Wait(10 * time.Second)
	return err
}

// Restart starts the process again on the same data directory and ports
// and waits until it is ready.
func (s *Server) Restart() error {
	if err := s.Start(); err != nil {
		return err
	}
	return s.WaitReady(readyTimeout)
}

// LogSize is the current size of the log file.
func (s *Server) LogSize() int64 {
	fi, err := os.Stat(s.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogTail returns the log from offset from on, at most limit bytes (the
// last ones).
func (s *Server) LogTail(from int64, limit int) string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if from > 0 && from <= int64(len(b)) {
		b = b[from:]
	}
	if len(b) > limit {
		b = append([]byte("…(cut)…\n"), b[len(b)-limit:]...)
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Raw HTTP against the server

// Resp is an HTTP answer.
type Resp struct {
	Status int
	Body   []byte
	Header http.Header
}

func (r Resp) String() string {
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
}

// Do sends a request. body is nil (none), []byte or string (sent as is), or
// anything else (JSON-encoded). headers are name, value pairs.
func (s *Server) Do(t testing.TB, method, path string, body any, headers ...string) Resp {
	t.Helper()
	r, err := s.TryDo(method, path, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// TryDo is Do that returns transport errors instead of failing the test.
func (s *Server) TryDo(method, path string, body any, headers ...string) (Resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return Resp{}, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, s.url(path), rd)
	if err != nil {
		return Resp{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Resp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Resp{}, err
	}
	return Resp{Status: resp.StatusCode, Body: b, Header: resp.Header}, nil
}

// mustStatus fails the test unless r has the status.
func mustStatus(t testing.TB, what string, r Resp, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: got %s, want status %d", what, r, want)
	}
}

// apiError is the contract's error body.
type apiError struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkError reports (as a string, "" when fine) whether r is the error
// status with the contract's body {"error":{"code","message"}}, the code
// as given (any code when code is "") and a non-empty message.
func checkError(r Resp, status int, code string) string {
	if r.Status != status {
		return fmt.Sprintf("got %s, want status %d (%s)", r, status, code)
	}
	var e apiError
	if err := json.Unmarshal(r.Body, &e); err != nil || e.Error == nil {
		return fmt.Sprintf("status %d but the body is not {\"error\":{\"code\",\"message\"}}: %q", r.Status, r.Body)
	}
	if code != "" && e.Error.Code != code {
		return fmt.Sprintf("error code %q, want %q (body %s)", e.Error.Code, code, r.Body)
	}
	if e.Error.Code == "" || strings.TrimSpace(e.Error.Message) == "" {
		return fmt.Sprintf("error body with an empty code or message: %s", r.Body)
	}
	return ""
}

func mustError(t testing.TB, what string, r Resp, status int, code string) {
	t.Helper()
	if msg := checkError(r, status, code); msg != "" {
		t.Fatalf("%s: %s", what, msg)
	}
}

// Job is the job object as the API renders it (the fields the tests read).
type Job struct {
	ID          string          `json:"id"`
	Collection  string          `json:"collection"`
	TriggerTime int64           `json:"trigger_time"`
	CallbackURL string          `json:"callback_url"`
	Route       string          `json:"route"`
	Meta        json.RawMessage `json:"meta"`
	// CallbackTimeout is the effective one (API.md §3).
	CallbackTimeout string `json:"callback_timeout"`
	Status          string `json:"status"`
	Attempts        int    `json:"attempts"`
	LastError       string `json:"last_error"`
	Version         int64  `json:"version"`
	CreatedAt       int64  `json:"created_at"`
	UpdatedAt       int64  `json:"updated_at"`
	FinishedAt      int64  `json:"finished_at"`
}

func decodeJSON[T any](t testing.TB, what string, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: decode %q: %v", what, b, err)
	}
	return v
}

func jobPath(coll, id string) string { return "/v1/collections/" + coll + "/jobs/" + id }
func jobsPath(coll string) string    { return "/v1/collections/" + coll + "/jobs" }

// createJob POSTs one job and requires 201.
func (s *Server) createJob(t testing.TB, coll string, job map[string]any) Job {
	t.Helper()
	r := s.Do(t, "POST", jobsPath(coll), job)
	mustStatus(t, "POST "+jobsPath(coll), r, http.StatusCreated)
	return decodeJSON[Job](t, "created job", r.Body)
}

// batchResult is one entry of a batch create's answer.
type batchResult struct {
	ID     string          `json:"id"`
	Status int             `json:"status"`
	Job    *Job            `json:"job"`
	Error  json.RawMessage `json:"error"`
}

// createBatch POSTs an array of jobs and requires 200 and a result per job
// in input order.
func (s *Server) createBatch(t testing.TB, coll string, jobs []map[string]any) []batchResult {
	t.Helper()
	r := s.Do(t, "POST", jobsPath(coll), jobs)
	mustStatus(t, "batch POST "+jobsPath(coll), r, http.StatusOK)
	out := decodeJSON[struct {
		Results []batchResult `json:"results"`
	}](t, "batch answer", r.Body)
	if len(out.Results) != len(jobs) {
		t.Fatalf("batch of %d answered with %d results", len(jobs), len(out.Results))
	}
	return out.Results
}

// getJob GETs a job; ok is false on 404 (with the contract's error body).
func (s *Server) getJob(t testing.TB, coll, id string) (Job, bool) {
	t.Helper()
	r := s.Do(t, "GET", jobPath(coll, id), nil)
	if r.Status == http.StatusNotFound {
		mustError(t, "GET "+jobPath(coll, id), r, http.StatusNotFound, "not_found")
		return Job{}, false
	}
	mustStatus(t, "GET "+jobPath(coll, id), r, http.StatusOK)
	return decodeJSON[Job](t, "job", r.Body), true
}

func (s *Server) mustGetJob(t testing.TB, coll, id string) Job {
	t.Helper()
	j, ok := s.getJob(t, coll, id)
	if !ok {
		t.Fatalf("GET %s: 404, want the job", jobPath(coll, id))
	}
	return j
}

// waitJob polls the job until cond holds or timeout passes.
func (s *Server) waitJob(t testing.TB, coll, id string, timeout time.Duration, what string, cond func(Job) bool) Job {
	t.Helper()
	var j Job
	var ok bool
	err := testutil.Poll(timeout, func() error {
		if j, ok = s.getJob(t, coll, id); ok && cond(j) {
			return nil
		}
		return fmt.Errorf("last: %+v (found %v)", j, ok)
	})
	if err != nil {
		t.Fatalf("job %s/%s: not %s after %v; %v", coll, id, what, timeout, err)
	}
	return j
}

// waitStatus waits until the job has the status.
func (s *Server) waitStatus(t testing.TB, coll, id, status string, timeout time.Duration) Job {
	t.Helper()
	return s.waitJob(t, coll, id, timeout, status, func(j Job) bool { return j.Status == status })
}

// listAll lists a collection's jobs, following cursors (at most 50 pages).
func (s *Server) listAll(t testing.TB, coll, query string) []Job {
	t.Helper()
	var all []Job
	cursor := ""
	for page := 0; page < 50; page++ {
		q := "limit=1000"
		if query != "" {
			q += "&" + query
		}
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := s.Do(t, "GET", jobsPath(coll)+"?"+q, nil)
		mustStatus(t, "list "+coll, r, http.StatusOK)
		out := decodeJSON[struct {
			Jobs       []Job   `json:"jobs"`
			NextCursor *string `json:"next_cursor"`
		}](t, "list answer", r.Body)
		if out.NextCursor == nil {
			t.Fatalf("list answer without next_cursor: %.300s", r.Body)
		}
		all = append(all, out.Jobs...)
		if *out.NextCursor == "" {
			return all
		}
		cursor = *out.NextCursor
	}
	t.Fatalf("list %s: more than 50 pages", coll)
	return nil
}

// putCollection creates (201) or updates (200) a collection.
func (s *Server) putCollection(t testing.TB, name string, cfg map[string]any) Resp {
	t.Helper()
	if cfg == nil {
		cfg = map[string]any{}
	}
	r := s.Do(t, "PUT", "/v1/collections/"+name, cfg)
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("PUT /v1/collections/%s: %s", name, r)
	}
	return r
}

// newCollection creates a fresh, uniquely named collection.
func (s *Server) newCollection(t testing.TB, prefix string, cfg map[string]any) string {
	t.Helper()
	name := uniq(prefix)
	r := s.putCollection(t, name, cfg)
	mustStatus(t, "PUT new collection "+name, r, http.StatusCreated)
	return name
}

// ---------------------------------------------------------------------------
// The webhook receiver

// Payload is the callback body (docs/api.md#the-callback).
type Payload struct {
	ID          string          `json:"id"`
	Collection  string          `json:"collection"`
	TriggerTime int64           `json:"trigger_time"`
	Attempt     int             `json:"attempt"`
	Meta        json.RawMessage `json:"meta"`
}

// Delivery is one callback the receiver got.
type Delivery struct {
	At      time.Time // time.Now() when the handler started
	Path    string
	Header  http.Header
	Body    []byte
	Payload Payload
	Key     string // collection + "/" + id
	N       int    // 1-based: the how-manyth delivery of Key this is
}

// AtMs is the receive time in Unix milliseconds.
func (d *Delivery) AtMs() int64 { return d.At.UnixMilli() }

// Reply is how the receiver answers one delivery.
type Reply struct {
	Status int // 200 when zero
	Header map[string]string
	Body   string
	Delay  time.Duration // wait this long before answering
}

// Script decides the answer to a delivery.
type Script func(d *Delivery) Reply

// Receiver is a webhook receiver in the test process that records every
// delivery and answers as scripted per job.
type Receiver struct {
	URL string // http://127.0.0.1:port

	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	byKey   map[string][]*Delivery
	all     []*Delivery
	scripts map[string]Script
	notify  chan struct{} // closed and replaced on every delivery
}

func newReceiver(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("receiver: %v", err)
	}
	r := &Receiver{
		URL:     "http://" + ln.Addr().String(),
		ln:      ln,
		byKey:   map[string][]*Delivery{},
		scripts: map[string]Script{},
		notify:  make(chan struct{}),
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func key(coll, id string) string { return coll + "/" + id }

// Script sets the answers for the job coll/id.
func (r *Receiver) Script(coll, id string, s Script) {
	r.mu.Lock()
	r.scripts[key(coll, id)] = s
	r.mu.Unlock()
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	d := &Delivery{At: at, Path: req.URL.Path, Header: req.Header.Clone(), Body: body}
	if err := json.Unmarshal(body, &d.Payload); err == nil {
		d.Key = key(d.Payload.Collection, d.Payload.ID)
	} else {
		d.Key = "?undecodable"
	}
	r.mu.Lock()
	r.byKey[d.Key] = append(r.byKey[d.Key], d)
	d.N = len(r.byKey[d.Key])
	r.all = append(r.all, d)
	script := r.scripts[d.Key]
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()

	reply := Reply{}
	if script != nil {
		reply = script(d)
	}
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-req.Context().Done():
			return
		}
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if reply.Body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	st := reply.Status
	if st == 0 {
		st = http.StatusOK
	}
	w.WriteHeader(st)
	_, _ = io.WriteString(w, reply.Body)
}

// Of returns the deliveries of coll/id so far.
func (r *Receiver) Of(coll, id string) []*Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Delivery(nil), r.byKey[key(coll, id)]...)
}

// All returns every delivery so far.
func (r *Receiver) All() []*Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Delivery(nil), r.all...)
}

// waitUntil waits until cond (called under the lock) holds or the timeout
// passes; it reports whether cond held.
func (r *Receiver) waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond()
		ch := r.notify
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			r.mu.Lock()
			ok = cond()
			r.mu.Unlock()
			return ok
		}
	}
}

// WaitN waits until coll/id has at least n deliveries and returns them.
func (r *Receiver) WaitN(t testing.TB, coll, id string, n int, timeout time.Duration) []*Delivery {
	t.Helper()
	k := key(coll, id)
	if !r.waitUntil(timeout, func() bool { return len(r.byKey[k]) >= n }) {
		got := r.Of(coll, id)
		t.Fatalf("%s: %d deliveries after %v, want %d%s", k, len(got), timeout, n, describe(got))
	}
	return r.Of(coll, id)
}

// WaitKeys waits until at least n distinct jobs of the collection have
// been delivered at least once; it returns how many have.
func (r *Receiver) WaitKeys(coll string, n int, timeout time.Duration) int {
	prefix := coll + "/"
	count := func() int {
		c := 0
		for k := range r.byKey {
			if strings.HasPrefix(k, prefix) {
				c++
			}
		}
		return c
	}
	r.waitUntil(timeout, func() bool { return count() >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	return count()
}

// ExpectNoMore fails the test if coll/id gets more than have deliveries
// within window. It necessarily waits the whole window when all is well.
func (r *Receiver) ExpectNoMore(t testing.TB, coll, id string, have int, window time.Duration) {
	t.Helper()
	k := key(coll, id)
	if r.waitUntil(window, func() bool { return len(r.byKey[k]) > have }) {
		got := r.Of(coll, id)
		t.Fatalf("%s: %d deliveries, want %d%s", k, len(got), have, describe(got))
	}
}

// ExpectNone fails the test if coll/id is delivered within window.
func (r *Receiver) ExpectNone(t testing.TB, coll, id string, window time.Duration) {
	t.Helper()
	r.ExpectNoMore(t, coll, id, 0, window)
}

func describe(ds []*Delivery) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  #%d at %d (%s) path %s attempt %s key %s body %.200s",
			d.N, d.AtMs(), d.At.Format("15:04:05.000"), d.Path,
			d.Header.Get("X-Timemachine-Attempt"), d.Header.Get("Idempotency-Key"), d.Body)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Small helpers

func nowMs() int64 { return time.Now().UnixMilli() }

// checkOnTime reports whether d arrived at or after trigger (strict: never
// early) and within lateBound of it.
func checkOnTime(d *Delivery, trigger int64) string {
	at := d.AtMs()
	if at < trigger {
		return fmt.Sprintf("%s delivered EARLY: received at %d, trigger_time %d (%d ms early)", d.Key, at, trigger, trigger-at)
	}
	if late := time.Duration(at-trigger) * time.Millisecond; late > lateBound {
		return fmt.Sprintf("%s delivered late: received at %d, trigger_time %d (%v late, bound %v)", d.Key, at, trigger, late, lateBound)
	}
	return ""
}

func attemptHeader(d *Delivery) int {
	n, err := strconv.Atoi(d.Header.Get("X-Timemachine-Attempt"))
	if err != nil {
		return -1
	}
	return n
}

func idemKey(coll, id string, trigger int64) string {
	return coll + ":" + id + ":" + strconv.FormatInt(trigger, 10)
}

// job builds a job body for the receiver: trigger is Unix ms.
func (r *Receiver) job(id string, trigger int64) map[string]any {
	return map[string]any{"id": id, "trigger_time": trigger, "callback_url": r.URL + "/hook/" + id}
}
