package e2e

// The web console (/ui/) in a real browser: Debian's headless Chromium,
// driven over the DevTools protocol (chromedp), against a 3-node cluster
// with an auth file. It checks that every page renders and the main flows
// work — the token prompt, the cluster map, collections and routes, job
// search with cursor paging, create → see it fire, a dead letter →
// redrive — and saves the screenshots the docs use.
//
//	make test-ui     # TIMEMACHINE_UI=1, screenshots into docs/img/
//
// Chromium talks to loopback only: the servers and the receiver listen on
// 127.0.0.1, every host name resolves to nothing (--host-resolver-rules),
// and the background services that would phone home are off.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/timemachine-db/timemachine/auth"
)

const consoleToken = "tm_ui_admin_0123456789abcdefghijklmnopqrstuvwxyz"

// chromiumPath finds the browser: $CHROMIUM, else chromium on PATH.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a fresh headless Chromium (its own profile directory) and
// returns a tab's context. Page errors and CSP refusals are collected.
func browser(t *testing.T, insecureTLS bool) (context.Context, *pageProblems) {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("TIMEMACHINE_UI") == "1" {
			t.Fatal("chromium is not installed (apt-get install chromium; .ci/run does it)")
		}
		t.Skip("chromium is not installed; make test-ui runs this test")
	}
	// The profile is not a t.TempDir: Chromium's helper processes can
	// still be writing to it for a moment after the browser is cancelled,
	// and TempDir's cleanup then fails the test ("directory not empty",
	// once in a make test run). It is removed after the browser, with a
	// few tries.
	profile, err := os.MkdirTemp("", "tm-console-profile-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 800),
	}
	if insecureTLS {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors", true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp reports DOM events of newer Chromiums it does not model
	// ("unhandled node event"); anything else goes to the test log.
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		for try := 0; ; try++ {
			err := os.RemoveAll(profile)
			if err == nil {
				return
			}
			if try == 20 {
				t.Logf("leaving the browser profile %s: %v", profile, err)
				return
			}
			time.Sleep(100 * time.Millisecond) // Chromium's helpers are still exiting
		}
	})
	pp := &pageProblems{}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			pp.add("uncaught exception: " + e.ExceptionDetails.Error())
		case *log.EventEntryAdded:
			// A refused resource or script (CSP) and JS errors; the 401s
			// the token prompt answers are expected network errors.
			if e.Entry.Source == log.SourceSecurity || strings.Contains(e.Entry.Text, "Content Security Policy") || (e.Entry.Source == log.SourceJavascript && e.Entry.Level == log.LevelError) {
				pp.add(fmt.Sprintf("%s %s: %s", e.Entry.Source, e.Entry.Level, e.Entry.Text))
			}
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), emulation.SetDeviceMetricsOverride(1280, 800, 1, false)); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx, pp
}

type pageProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *pageProblems) add(s string) { p.mu.Lock(); p.list = append(p.list, s); p.mu.Unlock() }
func (p *pageProblems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// shots saves screenshots into $TIMEMACHINE_UI_SHOTS (make test-ui:
// docs/img), else into the test's temporary directory.
type shots struct {
	t   *testing.T
	dir string
}

func (s shots) take(ctx context.Context, name string) {
	s.t.Helper()
	var png []byte
	// Let the page finish drawing (fonts, the last poll) before the shot.
	if err := chromedp.Run(ctx, chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png)); err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, name), png, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// step runs actions with a deadline and names the step on failure.
func step(t *testing.T, ctx context.Context, what string, timeout time.Duration, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		var body, url string
		var png []byte
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		_ = chromedp.Run(dctx, chromedp.Location(&url), chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body), chromedp.CaptureScreenshot(&png))
		dcancel()
		if len(png) > 0 {
			f := filepath.Join(t.TempDir(), "failure.png")
			if os.WriteFile(f, png, 0o644) == nil {
				body += "\n(screenshot: " + f + ")"
			}
		}
		body = "at " + url + "\n" + body
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("not done within %v", timeout)
		}
		t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, body)
	}
}

// until waits for a JavaScript condition to become true.
func until(js string, timeout time.Duration) chromedp.Action {
	var ok bool
	return chromedp.Poll(js, &ok, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))
}

func TestConsole(t *testing.T) {
	if os.Getenv("TIMEMACHINE_UI") != "1" && os.Getenv("TIMEMACHINE_UI") != "auto" {
		t.Skip("the browser test runs with TIMEMACHINE_UI=1 (make test-ui)")
	}
	start := time.Now()
	ctx, problems := browser(t, secureMode)

	// A 3-node cluster with an auth file (in secure mode: the secure
	// setup's, over HTTPS).
	c := newCluster(t, 3)
	token := e2eAdminToken
	if !secureMode {
		token = consoleToken
		f := auth.File{Tokens: []auth.Entry{auth.NewEntry("console", auth.RoleAdmin, nil, consoleToken)}}
		b, _ := json.Marshal(f)
		authFile := filepath.Join(t.TempDir(), "auth.json")
		if err := os.WriteFile(authFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Nodes {
			s.Args = append(s.Args, "--auth-file", authFile)
			s.Token = consoleToken
		}
	}
	for i, s := range c.Nodes {
		if err := s.Start(); err != nil {
			t.Fatalf("start %s: %v", c.IDs[i], err)
		}
	}
	c.waitAllReady(formTimeout)
	c.waitCluster(formTimeout, "formed", c.allIdx(), checkHealthy(c.IDs))
	t.Logf("cluster formed in %v", time.Since(start).Round(time.Millisecond))

	dir := os.Getenv("TIMEMACHINE_UI_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := shots{t, dir}
	n1 := c.Nodes[0]
	base := n1.url("")
	rcv := newReceiver(t)

	// Data to look at: a collection whose jobs give up after one attempt,
	// a route, and 25 jobs due in an hour (two pages of 10 and one of 5).
	const coll = "notifications"
	n1.putCollection(t, coll, map[string]any{"retry_policy": map[string]any{"max_attempts": 1}, "retention": "1h", "signing_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if r := n1.Do(t, "PUT", "/v1/routes/billing", map[string]any{"webhook_url": rcv.URL + "/billing", "headers": map[string]string{"X-Team": "payments"}, "timeout": "5s"}); r.Status != 201 {
		t.Fatalf("PUT route: %s", r)
	}
	var later []map[string]any
	for i := range 25 {
		later = append(later, map[string]any{"id": fmt.Sprintf("reminder-%02d", i), "delay": "1h", "callback_url": rcv.URL + "/later", "meta": map[string]any{"user": i}})
	}
	n1.createBatch(t, coll, later)
	laterFrom := strconv.FormatInt(time.Now().Add(30*time.Minute).UnixMilli(), 10)

	// 1. The token prompt: the API answers 401, the console asks.
	step(t, ctx, "the console asks for a token", 20*time.Second,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#token-dialog[open]", chromedp.ByQuery))
	var loc string
	step(t, ctx, "GET / leads to /ui/", 5*time.Second, chromedp.Location(&loc))
	if !strings.HasPrefix(loc, base+"/ui/") {
		t.Errorf("GET / landed on %s, want %s/ui/", loc, base)
	}
	shot.take(ctx, "console-token.png")
	step(t, ctx, "entering the token", 10*time.Second,
		chromedp.SendKeys("#token-input", token, chromedp.ByQuery),
		chromedp.Click("#token-submit", chromedp.ByQuery),
		chromedp.WaitNotPresent("#token-dialog[open]", chromedp.ByQuery))
	var stored string
	step(t, ctx, "the token is in sessionStorage", 5*time.Second, chromedp.Evaluate(`sessionStorage.getItem("timemachine.token")`, &stored))
	if stored != token {
		t.Errorf("sessionStorage holds %q, want the token", stored)
	}

	// 2. The cluster map: 3 nodes, 12 slots, every slot led.
	step(t, ctx, "the cluster map", 20*time.Second,
		until(`document.querySelectorAll('[data-testid=slot]').length === 12 &&
			document.querySelectorAll('[data-testid=nodes] tbody tr').length === 3 &&
			document.querySelector('[data-testid=card-leaderless] .card-value').textContent === '0'`, 20*time.Second))
	shot.take(ctx, "console-cluster.png")

	// 3. Collections and routes.
	step(t, ctx, "collections and routes", 15*time.Second,
		chromedp.Navigate(base+"/ui/#/collections"),
		until(`!!document.querySelector('[data-testid=collections]') && document.querySelector('[data-testid=collections]').textContent.includes('`+coll+`') &&
			!!document.querySelector('[data-testid=routes]') && document.querySelector('[data-testid=routes]').textContent.includes('billing')`, 15*time.Second))
	shot.take(ctx, "console-collections.png")

	// The footer's OpenAPI link: under --auth-file a plain link would get
	// a 401; the console fetches the document with its token and opens it.
	var opened bool
	step(t, ctx, "the OpenAPI link fetches with the token", 15*time.Second,
		chromedp.Evaluate(`window.__opened = ""; window.__blob = null;
			URL.createObjectURL = (b) => { window.__blob = b; return "blob:test"; };
			window.open = (u) => { window.__opened = u; return null; }; true`, nil),
		chromedp.Click("[data-testid=link-openapi]", chromedp.ByQuery),
		until(`window.__opened === "blob:test" && !!window.__blob`, 10*time.Second),
		chromedp.Evaluate(`window.__blob.text().then(t => JSON.parse(t).openapi === "3.1.0")`, &opened,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if !opened {
		t.Error("the OpenAPI link did not open the document")
	}

	// 4. Job search: status filter and cursor paging (25 = 10 + 10 + 5).
	step(t, ctx, "job search, first page", 15*time.Second,
		chromedp.Navigate(base+"/ui/#/jobs?c="+coll+"&status=scheduled&limit=10&from="+laterFrom),
		until(`document.querySelectorAll('[data-testid=jobs] tbody tr').length === 10 && !!document.querySelector('[data-testid=next-page]')`, 15*time.Second))
	var first string
	step(t, ctx, "read the first page", 5*time.Second, chromedp.Text("[data-testid=jobs] tbody tr td a", &first, chromedp.ByQuery))
	shot.take(ctx, "console-jobs.png")
	pages := []int{10}
	for range 2 {
		step(t, ctx, "the next page", 15*time.Second,
			chromedp.Click("[data-testid=next-page]", chromedp.ByQuery),
			until(`(() => { const a = document.querySelector('[data-testid=jobs] tbody tr td a'); return !!a && a.textContent !== `+jsString(first)+`; })()`, 15*time.Second))
		var n int
		step(t, ctx, "count the rows", 5*time.Second,
			chromedp.Evaluate(`document.querySelectorAll('[data-testid=jobs] tbody tr').length`, &n),
			chromedp.Text("[data-testid=jobs] tbody tr td a", &first, chromedp.ByQuery))
		pages = append(pages, n)
	}
	if fmt.Sprint(pages) != "[10 10 5]" {
		t.Errorf("pages of scheduled jobs: %v, want [10 10 5]", pages)
	}
	var hasNext bool
	step(t, ctx, "the last page", 5*time.Second, chromedp.Evaluate(`!!document.querySelector('[data-testid=next-page]')`, &hasNext))
	if hasNext {
		t.Error("the last page offers a next page")
	}

	// 5. Create a job in the console → see it fire.
	rcv.Script(coll, "hello-console", func(*Delivery) Reply { return Reply{Status: 200} })
	createJob(t, ctx, base, coll, "hello-console", rcv.URL+"/hook", "")
	step(t, ctx, "the job fires and the detail page shows it succeeded", 30*time.Second,
		until(`(() => { const v = document.querySelector('[data-testid=card-status] .card-value'); return !!v && v.textContent === 'succeeded'; })()`, 30*time.Second))
	if ds := rcv.Of(coll, "hello-console"); len(ds) != 1 {
		t.Errorf("the receiver got %d deliveries of hello-console, want 1", len(ds))
	}
	shot.take(ctx, "console-job.png")

	// 6. A dead letter (the receiver refuses the first attempt) → redrive.
	var mu sync.Mutex
	refused := false
	rcv.Script(coll, "invoice-7", func(*Delivery) Reply {
		mu.Lock()
		defer mu.Unlock()
		if !refused {
			refused = true
			return Reply{Status: 422, Body: "unknown customer"}
		}
		return Reply{Status: 200}
	})
	createJob(t, ctx, base, coll, "invoice-7", rcv.URL+"/invoices", `{"invoice": 7}`)
	step(t, ctx, "the job fails and shows its last error", 30*time.Second,
		until(`(() => { const v = document.querySelector('[data-testid=card-status] .card-value'); return !!v && v.textContent === 'failed' && !!document.querySelector('[data-testid=last-error]'); })()`, 30*time.Second))
	step(t, ctx, "the dead letters page lists it", 15*time.Second,
		chromedp.Navigate(base+"/ui/#/dead?c="+coll),
		until(`!!document.querySelector('[data-testid=dead]') && document.querySelector('[data-testid=dead]').textContent.includes('invoice-7')`, 15*time.Second))
	shot.take(ctx, "console-dead-letters.png")
	step(t, ctx, "redrive the dead letter", 15*time.Second,
		chromedp.Click(`input.pick[data-id="invoice-7"]`, chromedp.ByQuery),
		chromedp.Click("[data-testid=redrive-selected]", chromedp.ByQuery),
		chromedp.WaitVisible("[data-testid=redrive-done]", chromedp.ByQuery))
	// Redrive goes through POST …/redrive where the server has it, else one
	// PUT per job; the console says which.
	var fallback bool
	step(t, ctx, "which redrive", 5*time.Second, chromedp.Evaluate(`!!document.querySelector('[data-testid=redrive-fallback]')`, &fallback))
	bulk := n1.Do(t, "POST", "/v1/collections/"+coll+"/redrive", map[string]any{"ids": []string{}})
	if served := !(bulk.Status == 404 && strings.Contains(string(bulk.Body), "no such endpoint")); fallback == served {
		t.Errorf("bulk redrive served: %v (%s), but the console's fallback notice shown: %v", served, bulk, fallback)
	}
	rcv.WaitN(t, coll, "invoice-7", 2, 30*time.Second)
	j := n1.waitStatus(t, coll, "invoice-7", "succeeded", 30*time.Second)
	if j.Attempts != 1 {
		t.Errorf("the redriven job has %d attempts, want 1 (reset by the redrive)", j.Attempts)
	}
	step(t, ctx, "the dead letters page empties", 15*time.Second,
		chromedp.Navigate(base+"/ui/#/dead?c="+coll),
		until(`!!document.querySelector('[data-testid=dead-empty]')`, 15*time.Second))

	// 7. Schedules: listed, or a clear notice when the server has none.
	step(t, ctx, "the schedules page", 15*time.Second,
		chromedp.Navigate(base+"/ui/#/schedules?c="+coll),
		until(`!!document.querySelector('[data-testid=schedules-unavailable], [data-testid=schedules], [data-testid=schedules-empty]')`, 15*time.Second))
	shot.take(ctx, "console-schedules.png")

	// 8. Fire rate and lateness from /metrics while jobs fire: 90 jobs
	// due over the next few seconds, spread over every slot (each node's
	// /metrics counts the slots it leads).
	step(t, ctx, "the metrics page", 15*time.Second,
		chromedp.Navigate(base+"/ui/#/metrics"),
		chromedp.WaitVisible("[data-testid=card-fire-rate]", chromedp.ByQuery))
	// The node may lead no slot the burst lands in while it fires
	// (leaderships move while a new cluster evens them out): then another
	// burst, at most three.
	metricsShown := `(() => { const v = document.querySelector('[data-testid=card-p99] .card-value'); return !!v && v.textContent !== '—' && /\d/.test(document.querySelector('[data-testid=card-fire-rate] .card-value').textContent); })()`
	shown := false
	for round := 0; round < 3 && !shown; round++ {
		var burst []map[string]any
		for i := range 90 {
			burst = append(burst, map[string]any{"id": fmt.Sprintf("tick-%d-%02d", round, i), "delay": fmt.Sprintf("%dms", 1000+i*40), "route": "billing"})
		}
		n1.createBatch(t, coll, burst)
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		shown = chromedp.Run(wctx, until(metricsShown, 15*time.Second)) == nil
		cancel()
	}
	step(t, ctx, "fire rate and lateness", 5*time.Second, until(metricsShown, 5*time.Second))
	// A few scrapes so the chart has a line.
	step(t, ctx, "a few scrapes", 10*time.Second, chromedp.Sleep(4500*time.Millisecond))
	shot.take(ctx, "console-metrics.png")

	// The Prometheus parser and quantiles, in the page itself.
	checks := map[string]string{
		`prom.quantile(0.5, [{le:0.1,count:0},{le:0.2,count:10},{le:Infinity,count:10}]).toFixed(6)`:   "0.150000",
		`prom.quantile(0.99, [{le:0.1,count:0},{le:Infinity,count:0}])`:                                "null",
		`prom.quantile(0.9, [{le:1,count:5},{le:Infinity,count:10}])`:                                  "1",
		`prom.sum(prom.parse('a_total{x="1"} 3\na_total{x="2"} 4\n# HELP a\nb 1e3'), 'a_total')`:       "7",
		`prom.sum(prom.parse('m{path="/v1/\\"q\\"",k="v"} 2'), 'm', {k: 'v'})`:                         "2",
		`prom.parse('b 1e3')[0].value`:                                                                 "1000",
		`prom.rate(10, 4, 2)`:                                                                          "3",
		`prom.rate(3, 40, 1)`:                                                                          "3",
		`JSON.stringify(prom.delta([{le:1,count:5},{le:2,count:9}], [{le:1,count:2},{le:2,count:3}]))`: `[{"le":1,"count":3},{"le":2,"count":6}]`,
		`JSON.stringify(prom.buckets(prom.parse('h_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 2'), 'h'))`: `[{"le":0.5,"count":1},{"le":null,"count":2}]`,
	}
	for expr, want := range checks {
		var got any
		step(t, ctx, "evaluate "+expr, 5*time.Second, chromedp.Evaluate(`(() => { const prom = window.timemachineConsole.prom; return String(`+expr+`); })()`, &got))
		if fmt.Sprint(got) != want {
			t.Errorf("%s = %v, want %s", expr, got, want)
		}
	}

	// 9. A drain starts a round of slot moves: the cluster map shows its
	// progress (GET /v1/cluster "moves"; its counts stay after the round,
	// so a fast drain cannot be missed) and, while a slot moves, where it
	// goes. Last, because the cluster then has two nodes holding slots.
	drained := c.IDs[2]
	if r := n1.Do(t, "POST", "/v1/admin/nodes/"+drained+"/drain", nil); r.Status != http.StatusOK {
		t.Fatalf("drain %s: %d %s", drained, r.Status, r.Body)
	}
	step(t, ctx, "the moves of a drain on the cluster map", 30*time.Second,
		chromedp.Navigate(base+"/ui/#/cluster"),
		until(`(() => { const p = document.querySelector('[data-testid=moves-progress]');
			return !!p && Number(p.max) > 0 && /of \d+/.test(document.querySelector('[data-testid=moves]').textContent); })()`, 30*time.Second))
	shot.take(ctx, "console-moves.png")

	// Without an auth file the console asks for nothing.
	if !secureMode {
		open := startServer(t)
		step(t, ctx, "an open server: no token prompt", 20*time.Second,
			chromedp.Evaluate(`sessionStorage.clear()`, nil),
			chromedp.Navigate(open.url("/ui/")),
			until(`document.querySelectorAll('[data-testid=slot]').length > 0 && !document.querySelector('#token-dialog[open]')`, 20*time.Second))
	}

	// The security headers the browser saw, and nothing refused.
	r := n1.Do(t, "GET", "/ui/", nil, "Authorization", "")
	if r.Status != http.StatusOK || !strings.Contains(r.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("GET /ui/ without a token: %d, CSP %q", r.Status, r.Header.Get("Content-Security-Policy"))
	}
	for _, p := range problems.all() {
		t.Errorf("the page reported: %s", p)
	}
	t.Logf("console test done in %v; screenshots in %s", time.Since(start).Round(time.Millisecond), dir)
}

// createJob fills the console's "create a job" form on the jobs page and
// waits for the job's detail page.
func createJob(t *testing.T, ctx context.Context, base, coll, id, target, meta string) {
	t.Helper()
	// A fresh document (the query differs per job): a hash change alone
	// leaves the previous page on screen until the new one has loaded its
	// collections, and the old form found there was typed into and then
	// replaced under the test ("Element is not focusable", or a submit of
	// the new, empty form that never came back). The token is kept in
	// sessionStorage, so the reload keeps it.
	actions := []chromedp.Action{
		chromedp.Navigate(base + "/ui/?new=" + url.QueryEscape(id) + "#/jobs?c=" + coll),
		chromedp.WaitVisible("[data-testid=new-job] summary", chromedp.ByQuery),
		chromedp.Click("[data-testid=new-job] summary", chromedp.ByQuery),
		chromedp.WaitVisible("[data-testid=new-id]", chromedp.ByQuery),
		chromedp.SendKeys("[data-testid=new-id]", id, chromedp.ByQuery),
		chromedp.SetValue("[data-testid=new-delay]", "1s", chromedp.ByQuery),
		chromedp.SendKeys("[data-testid=new-target]", target, chromedp.ByQuery),
	}
	if meta != "" {
		actions = append(actions, chromedp.SendKeys("[data-testid=new-meta]", meta, chromedp.ByQuery))
	}
	actions = append(actions,
		chromedp.Click("[data-testid=create-job]", chromedp.ByQuery),
		until(`location.hash.startsWith('#/job/`+coll+`/`+id+`') && !!document.querySelector('[data-testid=job-spec]')`, 15*time.Second))
	step(t, ctx, "create "+id+" in the console", 20*time.Second, actions...)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
