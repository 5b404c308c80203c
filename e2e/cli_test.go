package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cli runs `timemachine args...` and returns its exit code, stdout and stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = cliEnv() // secure mode: the token and the CA (nil: inherit)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("timemachine %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, args...)
	if code != 0 {
		t.Fatalf("timemachine %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// TestCLI: job create/get/list/delete, admin status and version against a
// running server.
func TestCLI(t *testing.T) {
	t.Parallel()
	s := shared(t)
	rcv := newReceiver(t)
	coll := s.newCollection(t, "cli", nil)
	addr := "--addr=" + s.HTTPAddr

	out := mustCLI(t, "version")
	if !strings.HasPrefix(out, "timemachine ") || len(strings.TrimSpace(out)) <= len("timemachine") {
		t.Errorf("version printed %q", out)
	}

	before := nowMs()
	out = mustCLI(t, "job", "create", addr, "-o", "json", "-c", coll, "--id", "cli-1", "--delay", "1s", "--url", rcv.URL+"/cli", "--meta", `{"k":"v"}`)
	var created Job
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("job create printed %q: %v", out, err)
	}
	if created.ID != "cli-1" || created.Collection != coll || created.Status != "scheduled" ||
		created.TriggerTime < before+1000 || created.TriggerTime > nowMs()+1000 || !sameJSON(created.Meta, []byte(`{"k":"v"}`)) {
		t.Errorf("job create printed %+v", created)
	}

	out = mustCLI(t, "job", "create", addr, "-o", "json", "-c", coll, "--delay", "1h", "--url", rcv.URL+"/cli")
	var anon Job
	if err := json.Unmarshal([]byte(out), &anon); err != nil || anon.ID == "" {
		t.Fatalf("job create without --id printed %q (%v)", out, err)
	}

	out = mustCLI(t, "job", "get", addr, "-o", "json", "-c", coll, "cli-1")
	var got Job
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.ID != "cli-1" || got.TriggerTime != created.TriggerTime {
		t.Errorf("job get printed %q (%v)", out, err)
	}

	out = mustCLI(t, "job", "list", addr, "-o", "json", "-c", coll)
	var page struct {
		Jobs []Job `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Jobs) != 2 {
		t.Errorf("job list -o json printed %q (%v), want a page of 2 jobs", out, err)
	}
	for _, j := range page.Jobs {
		if j.ID != "cli-1" && j.ID != anon.ID {
			t.Errorf("job list: job %q", j.ID)
		}
	}
	out = mustCLI(t, "job", "list", addr, "-c", coll) // a table
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") {
		t.Errorf("job list printed %q, want a header and 2 rows", out)
	}

	out = mustCLI(t, "job", "delete", addr, "-c", coll, anon.ID)
	if !strings.Contains(out, anon.ID) {
		t.Errorf("job delete printed %q", out)
	}
	code, out, errs := cli(t, "job", "get", addr, "-c", coll, anon.ID)
	if code == 0 {
		t.Errorf("job get of a deleted job: exit 0, printed %q", out)
	}
	if !strings.Contains(errs, "not_found") && !strings.Contains(errs, "404") && !strings.Contains(strings.ToLower(errs), "not found") && !strings.Contains(strings.ToLower(errs), "does not exist") {
		t.Errorf("job get of a deleted job: stderr %q does not say it is not found", errs)
	}
	if code, _, errs := cli(t, "job", "create", addr, "-c", coll, "--url", rcv.URL); code == 0 || errs == "" {
		t.Errorf("job create without a time: exit %d, stderr %q", code, errs)
	}
	if code, _, _ := cli(t, "job", "get", "--addr=127.0.0.1:1", "--timeout=2s", "x"); code == 0 {
		t.Errorf("job get against nothing: exit 0")
	}

	out = mustCLI(t, "admin", "status", addr)
	if !strings.Contains(out, "slots: 12") || !strings.Contains(out, s.HTTPAddr) {
		t.Errorf("admin status printed %q", out)
	}

	// The CLI-made job fires.
	d := rcv.WaitN(t, coll, "cli-1", 1, time.Until(time.UnixMilli(created.TriggerTime))+lateBound+waitSlack)[0]
	if msg := checkOnTime(d, created.TriggerTime); msg != "" {
		t.Error(msg)
	}
	if !sameJSON(d.Payload.Meta, []byte(`{"k":"v"}`)) {
		t.Errorf("meta %s", d.Payload.Meta)
	}
	s.waitStatus(t, coll, "cli-1", "succeeded", 5*time.Second)
	out = mustCLI(t, "job", "list", addr, "-o", "json", "-c", coll, "--status", "succeeded")
	if !strings.Contains(out, `"cli-1"`) {
		t.Errorf("job list --status succeeded: %q", out)
	}
}

// TestCLIBodyGoesToTheAPIAsGiven: --body is sent as it is, so the API
// judges it: a misspelt field is the API's 400 naming it (the CLI decoded
// the file first and dropped such fields without a word), and a time may
// be RFC 3339.
func TestCLIBodyGoesToTheAPIAsGiven(t *testing.T) {
	t.Parallel()
	s := shared(t)
	coll := s.newCollection(t, "clibody", nil)
	addr := "--addr=" + s.HTTPAddr
	file := func(body string) string {
		p := filepath.Join(t.TempDir(), "body.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name  string
		args  []string
		body  string
		field string
	}{
		{"job", []string{"job", "create", "-c", coll}, `{"id":"typo","delay":"1h","callback_url":"http://127.0.0.1:9/h","mta":{"x":1}}`, "mta"},
		{"collection", []string{"collection", "put", coll + "-x"}, `{"retenton":"1h"}`, "retenton"},
		{"route", []string{"route", "put", coll + "-r"}, `{"webhook_url":"http://127.0.0.1:9/h","timout":"1s"}`, "timout"},
		{"schedule", []string{"schedule", "put", "-c", coll, "s"}, `{"every":"5s","callback_url":"http://127.0.0.1:9/h","pausd":true}`, "pausd"},
	} {
		code, out, errs := cli(t, append(c.args, addr, "--body", file(c.body))...)
		if code == 0 || !strings.Contains(errs, "invalid_argument") || !strings.Contains(errs, c.field) || out != "" {
			t.Errorf("%s --body with %q: exit %d\nstdout: %s\nstderr: %s", c.name, c.field, code, out, errs)
		}
	}
	if _, ok := s.getJob(t, coll, "typo"); ok {
		t.Error("the job with a misspelt field was created")
	}
	out := mustCLI(t, "job", "create", "-c", coll, addr, "-o", "json", "--body",
		file(`{"id":"rfc","trigger_time":"2030-05-01T00:00:00Z","callback_url":"http://127.0.0.1:9/h"}`))
	var j Job
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.ID != "rfc" || j.TriggerTime != time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli() {
		t.Errorf("job create --body with an RFC 3339 trigger_time printed %q (%v)", out, err)
	}
	out = mustCLI(t, "schedule", "put", "-c", coll, "rfc", addr, "-o", "json", "--body",
		file(`{"every":"1h","callback_url":"http://127.0.0.1:9/h","start_at":"2030-05-01T00:00:00Z"}`))
	if want := fmt.Sprintf(`"start_at": %d`, time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()); !strings.Contains(out, want) {
		t.Errorf("schedule put --body with an RFC 3339 start_at printed %s", out)
	}
}
