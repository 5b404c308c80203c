package deploylint

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// unit is a parsed systemd unit file: section -> key -> every value in order
// (an empty value resets a list setting, as in systemd).
type unit map[string]map[string][]string

type unitLine struct {
	section, key, value string
	line                int
}

func parseUnit(c *collector, dt []byte) (unit, []unitLine) {
	u := unit{}
	var lines []unitLine
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(dt))
	n := 0
	var cont strings.Builder
	contStart := 0
	for sc.Scan() {
		n++
		raw := sc.Text()
		text := strings.TrimSpace(raw)
		if cont.Len() == 0 && (text == "" || text[0] == '#' || text[0] == ';') {
			continue
		}
		if strings.HasSuffix(text, "\\") {
			if cont.Len() == 0 {
				contStart = n
			}
			cont.WriteString(strings.TrimSuffix(text, "\\"))
			cont.WriteByte(' ')
			continue
		}
		at := n
		if cont.Len() > 0 {
			cont.WriteString(text)
			text, at = cont.String(), contStart
			cont.Reset()
		}
		if strings.HasPrefix(text, "[") {
			if !strings.HasSuffix(text, "]") {
				c.add(at, "TM-unit-syntax", "bad section header %q", text)
				continue
			}
			section = strings.Trim(text, "[]")
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(text, "=")
		if !ok || section == "" {
			c.add(at, "TM-unit-syntax", "not KEY=VALUE in a section: %q", text)
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		u[section][k] = append(u[section][k], v)
		lines = append(lines, unitLine{section, k, v, at})
	}
	return u, lines
}

// last is a setting's effective value (the last assignment).
func (u unit) last(section, key string) (string, bool) {
	vs := u[section][key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// list is a list setting's effective items: assignments accumulate, an
// empty one clears.
func (u unit) list(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		if v == "" {
			out = nil
			continue
		}
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "yes", "true", "on":
		return true
	}
	return false
}

// parseSystemdTime reads a systemd time span ("90", "90s", "1min 30s",
// "infinity"); infinity is a very long duration.
func parseSystemdTime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "infinity" {
		return 1<<63 - 1, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	units := map[string]time.Duration{
		"ms": time.Millisecond, "s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	}
	re := regexp.MustCompile(`^\s*(\d+)\s*([a-z]+)`)
	var total time.Duration
	for rest := s; strings.TrimSpace(rest) != ""; {
		m := re.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("time span %q", s)
		}
		u, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("time span %q: unit %q", s, m[2])
		}
		n, _ := strconv.Atoi(m[1])
		total += time.Duration(n) * u
		rest = rest[len(m[0]):]
	}
	return total, nil
}

var killHUP = regexp.MustCompile(`^(/usr)?/bin/kill\s+(-HUP|-s\s+HUP|-SIGHUP|-s\s+SIGHUP)\s+\$MAINPID$`)

// CheckUnit checks a systemd service unit for timemachine: how it starts,
// reloads and stops, and the hardening it must have.
func CheckUnit(file string, dt []byte) []Finding {
	c := &collector{file: file}
	u, lines := parseUnit(c, dt)
	at := func(key string) int {
		for i := len(lines) - 1; i >= 0; i-- {
			if lines[i].section == "Service" && lines[i].key == key {
				return lines[i].line
			}
		}
		return 0
	}
	if _, ok := u.last("Unit", "Description"); !ok {
		c.add(0, "TM-unit", "[Unit] has no Description")
	}
	if _, ok := u["Service"]; !ok {
		c.add(0, "TM-unit", "no [Service] section")
		return c.out
	}
	if _, ok := u.last("Install", "WantedBy"); !ok {
		c.add(0, "TM-unit", "[Install] has no WantedBy: systemctl enable would not start it at boot")
	}

	exec, _ := u.last("Service", "ExecStart")
	argv := strings.Fields(strings.TrimLeft(exec, "-@:+!"))
	if len(argv) < 2 || !strings.HasPrefix(argv[0], "/") || filepath.Base(argv[0]) != "timemachine" || argv[1] != "server" {
		c.add(at("ExecStart"), "TM-unit-exec", "ExecStart=%s: want /…/timemachine server", exec)
	}
	if v, _ := u.last("Service", "ExecReload"); !killHUP.MatchString(v) {
		c.add(at("ExecReload"), "TM-unit-reload", "ExecReload=%s: want /bin/kill -HUP $MAINPID (the server re-reads --auth-file on SIGHUP)", v)
	}

	user, _ := u.last("Service", "User")
	dyn, _ := u.last("Service", "DynamicUser")
	switch {
	case user == "root" || user == "0":
		c.add(at("User"), "TM-unit-user", "User=%s: run as an unprivileged user", user)
	case user == "" && !isTrue(dyn):
		c.add(0, "TM-unit-user", "neither User= nor DynamicUser=yes: the node would run as root")
	}

	want := map[string]func(string) bool{
		"ProtectSystem":   func(v string) bool { return v == "strict" },
		"NoNewPrivileges": isTrue,
		"PrivateTmp":      isTrue,
		"ProtectHome":     func(v string) bool { return isTrue(v) || v == "read-only" || v == "tmpfs" },
		"Restart":         func(v string) bool { return v == "on-failure" || v == "always" },
	}
	for _, k := range []string{"ProtectSystem", "NoNewPrivileges", "PrivateTmp", "ProtectHome", "Restart"} {
		if v, ok := u.last("Service", k); !ok || !want[k](v) {
			c.add(at(k), "TM-unit-harden", "%s=%s: not set as required", k, v)
		}
	}
	if vs, ok := u["Service"]["CapabilityBoundingSet"]; !ok || len(u.list("Service", "CapabilityBoundingSet")) != 0 || len(vs) == 0 {
		c.add(at("CapabilityBoundingSet"), "TM-unit-harden", "CapabilityBoundingSet= must be set and empty: the node needs no capability")
	}
	fams := u.list("Service", "RestrictAddressFamilies")
	if len(fams) == 0 || strings.HasPrefix(fams[0], "~") || !contains(fams, "AF_INET") || !contains(fams, "AF_INET6") {
		c.add(at("RestrictAddressFamilies"), "TM-unit-harden", "RestrictAddressFamilies=%s: allow exactly what is needed (AF_INET AF_INET6 …)", strings.Join(fams, " "))
	}
	if v, ok := u.last("Service", "LimitNOFILE"); !ok {
		c.add(0, "TM-unit-limits", "no LimitNOFILE: the default soft limit (1024) is too low for raft, Pebble and callbacks")
	} else if soft, _, _ := strings.Cut(v, ":"); soft != "infinity" {
		if n, err := strconv.Atoi(soft); err != nil || n < 16384 {
			c.add(at("LimitNOFILE"), "TM-unit-limits", "LimitNOFILE=%s: want at least 16384", v)
		}
	}
	if v, ok := u.last("Service", "TimeoutStopSec"); !ok {
		c.add(0, "TM-unit-stop", "no TimeoutStopSec: the default (90 s, or DefaultTimeoutStopSec) is not stated")
	} else if d, err := parseSystemdTime(v); err != nil || d < minStopGrace {
		c.add(at("TimeoutStopSec"), "TM-unit-stop", "TimeoutStopSec=%s: under %s, systemd would SIGKILL before the leadership hand-off", v, minStopGrace)
	}
	if v, ok := u.last("Service", "KillSignal"); ok && v != "SIGTERM" && v != "TERM" && v != "15" {
		c.add(at("KillSignal"), "TM-unit-stop", "KillSignal=%s: the clean stop is SIGTERM", v)
	}

	// The data directory must be writable under ProtectSystem=strict.
	dataDir := ""
	for _, e := range u["Service"]["Environment"] {
		for _, kv := range strings.Fields(e) {
			if v, ok := strings.CutPrefix(strings.Trim(kv, `"`), "TIMEMACHINE_DATA_DIR="); ok {
				dataDir = v
			}
		}
	}
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			dataDir = v
		} else if a == "--data-dir" && i+1 < len(argv) {
			dataDir = argv[i+1]
		}
	}
	if dataDir == "" || !strings.HasPrefix(dataDir, "/") {
		c.add(0, "TM-unit-data", "data directory %q: set TIMEMACHINE_DATA_DIR (or --data-dir) to an absolute path", dataDir)
	} else {
		writable := false
		for _, p := range u.list("Service", "ReadWritePaths") {
			p = strings.TrimLeft(p, "-+")
			if dataDir == p || strings.HasPrefix(dataDir, strings.TrimRight(p, "/")+"/") {
				writable = true
			}
		}
		if !writable {
			c.add(0, "TM-unit-data", "the data directory %s is not in ReadWritePaths: ProtectSystem=strict makes it read-only", dataDir)
		}
	}
	return c.out
}

// SystemdAnalyze runs `systemd-analyze verify` and `security --offline` on a
// unit when systemd-analyze is installed (ran is false otherwise). verify
// needs ExecStart's program to exist, so it checks a copy whose
// /usr/local/bin/timemachine is replaced by an existing executable
// (stand-in). Any message from verify is a finding, as is an exposure score
// above maxExposure.
func SystemdAnalyze(unitPath, standIn string, maxExposure float64) (fs []Finding, ran bool, err error) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		return nil, false, nil
	}
	dt, err := os.ReadFile(unitPath)
	if err != nil {
		return nil, true, err
	}
	dir, err := os.MkdirTemp("", "deploylint")
	if err != nil {
		return nil, true, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, filepath.Base(unitPath))
	if err := os.WriteFile(tmp, bytes.ReplaceAll(dt, []byte("/usr/local/bin/timemachine"), []byte(standIn)), 0o644); err != nil {
		return nil, true, err
	}
	c := &collector{file: unitPath}
	out, err := exec.Command(bin, "verify", "--man=no", tmp).CombinedOutput()
	if msg := strings.TrimSpace(strings.ReplaceAll(string(out), tmp, unitPath)); err != nil || msg != "" {
		c.add(0, "systemd-analyze/verify", "%s (exit: %v)", msg, err)
	}
	out, _ = exec.Command(bin, "security", "--offline=true", tmp).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`).FindSubmatch(out)
	switch {
	case m == nil:
		c.add(0, "systemd-analyze/security", "no exposure level in: %s", strings.TrimSpace(string(out)))
	default:
		if score, _ := strconv.ParseFloat(string(m[1]), 64); score > maxExposure {
			c.add(0, "systemd-analyze/security", "exposure level %.1f, want at most %.1f", score, maxExposure)
		}
	}
	return c.out, true, nil
}

var envKey = regexp.MustCompile(`^(TIMEMACHINE_[A-Z0-9_]+|GO[A-Z]+)$`)

// CheckEnvFile checks an EnvironmentFile: KEY=VALUE lines with
// TIMEMACHINE_<FLAG> (or Go runtime) keys, each once; commented-out examples
// ("#KEY=…") are held to the same key shape. It returns the keys set.
func CheckEnvFile(file string, dt []byte) ([]Finding, []string) {
	c := &collector{file: file}
	seen := map[string]int{}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(dt))
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		commented := strings.HasPrefix(text, "#")
		body := strings.TrimSpace(strings.TrimPrefix(text, "#"))
		k, _, ok := strings.Cut(body, "=")
		if text == "" || (commented && (!ok || strings.ContainsAny(k, " \t"))) {
			continue // blank, or a prose comment
		}
		if !ok || !envKey.MatchString(k) {
			c.add(n, "TM-env", "%q: want TIMEMACHINE_<FLAG>=value", text)
			continue
		}
		if commented {
			continue
		}
		if prev, dup := seen[k]; dup {
			c.add(n, "TM-env", "%s set again (first on line %d)", k, prev)
		}
		seen[k] = n
		keys = append(keys, k)
	}
	return c.out, keys
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
