package deploylint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	digest "github.com/opencontainers/go-digest"
)

// DockerfileOptions are the facts about the repository a Dockerfile is
// checked against.
type DockerfileOptions struct {
	// GoVersion is go.mod's go directive; the golang builder image must be
	// that version. Empty skips the check.
	GoVersion string
}

// LintDockerfile checks a Dockerfile: BuildKit's build checks, then the
// hadolint-style and project rules (package doc). An error means the file
// could not be parsed at all.
func LintDockerfile(file string, dt []byte, opt DockerfileOptions) ([]Finding, error) {
	c := &collector{file: file}
	if err := buildkitChecks(c, dt); err != nil {
		return nil, err
	}
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(stages) == 0 {
		c.add(0, "TM-stages", "no FROM: nothing to build")
		return c.out, nil
	}
	lex := shell.NewLex(res.EscapeToken)
	global := envMap{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				v, _, _ := lex.ProcessWord(*kv.Value, global)
				global[kv.Key] = v
			} else {
				global[kv.Key] = ""
			}
		}
	}
	d := &dockerfileLint{collector: c, opt: opt, lex: lex, global: global, stages: stages}
	for i := range stages {
		d.stage(i)
	}
	d.final()
	return c.out, nil
}

// buildkitChecks runs the checks of `docker build --check`: BuildKit's
// Dockerfile frontend converts the file for every stage with lint warnings on.
// Base images are resolved by offlineResolver, so this needs no registry.
func buildkitChecks(c *collector, dt []byte) error {
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		MetaResolver: offlineResolver{},
		SourceMap:    &llb.SourceMap{Filename: c.file, Data: dt, Definition: &llb.Definition{}},
	})
	if err != nil {
		return fmt.Errorf("%s: buildkit: %w", c.file, err)
	}
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		c.add(line, "buildkit/"+w.RuleName, "%s", w.Detail)
	}
	if res.Error != nil {
		line := 0
		if len(res.Error.Location.Ranges) > 0 {
			line = int(res.Error.Location.Ranges[0].Start.Line)
		}
		c.add(line, "buildkit/BuildError", "%s", res.Error.Message)
	}
	return nil
}

// offlineResolver stands in for a registry: every base image resolves to an
// image of the platform asked for, so the checks that need a base image's
// config run and none depends on the network.
type offlineResolver struct{}

func (offlineResolver) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	img := map[string]any{
		"os":           "linux",
		"architecture": "amd64",
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digest.FromString(ref).String()}},
		"config":       map[string]any{"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
	}
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		img["os"], img["architecture"] = opt.ImageOpt.Platform.OS, opt.ImageOpt.Platform.Architecture
		if v := opt.ImageOpt.Platform.Variant; v != "" {
			img["variant"] = v
		}
	}
	dt, err := json.Marshal(img)
	return ref, "", dt, err
}

type envMap map[string]string

func (e envMap) Get(k string) (string, bool) { v, ok := e[k]; return v, ok }
func (e envMap) Keys() []string {
	var ks []string
	for k := range e {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

type dockerfileLint struct {
	*collector
	opt    DockerfileOptions
	lex    *shell.Lex
	global envMap
	stages []instructions.Stage
}

func line(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

var (
	versionish = regexp.MustCompile(`\d`)
	goVersion  = regexp.MustCompile(`^(\d+\.\d+(?:\.\d+)?)(?:$|-)`)
)

// stage checks one stage: its base image and its instructions.
func (d *dockerfileLint) stage(i int) {
	st := d.stages[i]
	at := line(st.Location)
	base, _, err := d.lex.ProcessWord(st.BaseName, d.global)
	if err != nil {
		d.add(at, "TM-from", "cannot expand %q: %v", st.BaseName, err)
		return
	}
	isStage := false
	for _, prev := range d.stages[:i] {
		if prev.Name != "" && strings.EqualFold(prev.Name, base) {
			isStage = true
		}
	}
	if !isStage && base != "scratch" {
		d.checkBase(at, base)
	}

	var shellCmd []string
	for _, cmd := range st.Commands {
		at := line(cmd.Location())
		switch c := cmd.(type) {
		case *instructions.AddCommand:
			d.add(at, "DL3020", "use COPY, not ADD (ADD fetches URLs and unpacks archives implicitly)")
		case *instructions.ShellCommand:
			shellCmd = c.Shell
		case *instructions.RunCommand:
			d.run(at, c, shellCmd)
		case *instructions.CopyCommand:
			d.copyCmd(at, i, c)
		case *instructions.ExposeCommand:
			for _, p := range c.Ports {
				if _, _, err := parsePort(p); err != nil {
					d.add(at, "DL3011", "EXPOSE %s: %v", p, err)
				}
			}
		}
	}
}

// checkBase: a base image names a version (a tag with a number in it, or a
// digest) so that a rebuild gets the same toolchain and userland, and the
// golang builder is the Go of go.mod.
func (d *dockerfileLint) checkBase(at int, base string) {
	named, err := reference.ParseNormalizedNamed(base)
	if err != nil {
		d.add(at, "TM-from", "base image %q: %v", base, err)
		return
	}
	tagged, hasTag := named.(reference.Tagged)
	_, hasDigest := named.(reference.Digested)
	switch {
	case !hasTag && !hasDigest:
		d.add(at, "DL3006", "base image %q has no tag: pin a version", base)
	case hasTag && tagged.Tag() == "latest":
		d.add(at, "DL3007", "base image %q uses latest: pin a version", base)
	case hasTag && !hasDigest && !versionish.MatchString(tagged.Tag()):
		d.add(at, "TM-pin", "base image %q: tag %q names no version (use a versioned tag or a digest)", base, tagged.Tag())
	}
	if reference.FamiliarName(named) == "golang" && d.opt.GoVersion != "" {
		if !hasTag {
			d.add(at, "TM-go", "golang builder %q: tag it with go.mod's Go version %s", base, d.opt.GoVersion)
			return
		}
		m := goVersion.FindStringSubmatch(tagged.Tag())
		if m == nil || m[1] != d.opt.GoVersion {
			d.add(at, "TM-go", "golang builder %q: go.mod says go %s; build with the same Go", base, d.opt.GoVersion)
		}
	}
}

var (
	aptGetInstall = regexp.MustCompile(`\bapt-get\s+(?:-\S+\s+)*install\b([^;&|]*)`)
	apkAdd        = regexp.MustCompile(`\bapk\s+(?:-\S+\s+)*add\b([^;&|]*)`)
	goBuild       = regexp.MustCompile(`\bgo\s+build\b`)
	goModDownload = regexp.MustCompile(`\bgo\s+mod\s+download\b`)
	cdCmd         = regexp.MustCompile(`(?:^|[;&|]\s*|\s)cd\s`)
)

// run checks a RUN instruction's command line (hadolint's shell rules, on the
// text with quoted strings taken out) and the project's build rules.
func (d *dockerfileLint) run(at int, c *instructions.RunCommand, shellCmd []string) {
	text := strings.Join(c.CmdLine, " ")
	bare := unquote(text)
	words := strings.Fields(bare)
	if slices.Contains(words, "sudo") {
		d.add(at, "DL3004", "do not use sudo in RUN: it has unpredictable TTY and signal behaviour; RUN is root until USER")
	}
	if cdCmd.MatchString(bare) {
		d.add(at, "DL3003", "use WORKDIR to change directory, not cd")
	}
	if slices.Contains(words, "apt") {
		d.add(at, "DL3027", "use apt-get (stable CLI), not apt")
	}
	// Mount options are read when the command is expanded (at build time in
	// BuildKit); expand with the global ARGs to read them here.
	if err := c.Expand(func(w string) (string, error) {
		v, _, err := d.lex.ProcessWord(w, d.global)
		return v, err
	}); err != nil {
		d.add(at, "TM-run", "RUN: %v", err)
	}
	mounts := instructions.GetMounts(c)
	cached := func(target string) bool {
		return slices.ContainsFunc(mounts, func(m *instructions.Mount) bool {
			return m.Type == instructions.MountTypeCache && strings.TrimRight(m.Target, "/") == target
		})
	}
	if m := aptGetInstall.FindStringSubmatch(bare); m != nil {
		if !strings.Contains(m[0], "--no-install-recommends") {
			d.add(at, "DL3015", "apt-get install without --no-install-recommends")
		}
		for _, p := range packages(m[1]) {
			if !strings.Contains(p, "=") {
				d.add(at, "DL3008", "apt-get install %s: pin its version (%s=<version>)", p, p)
			}
		}
		if !strings.Contains(bare, "/var/lib/apt/lists") && !cached("/var/lib/apt/lists") {
			d.add(at, "DL3009", "apt-get install leaves /var/lib/apt/lists in the layer: remove it, or use a cache mount")
		}
	}
	if m := apkAdd.FindStringSubmatch(bare); m != nil {
		if !strings.Contains(m[0], "--no-cache") && !cached("/var/cache/apk") {
			d.add(at, "DL3019", "apk add without --no-cache (or a cache mount)")
		}
		for _, p := range packages(m[1]) {
			if !strings.Contains(p, "=") {
				d.add(at, "DL3018", "apk add %s: pin its version (%s=<version>)", p, p)
			}
		}
	}
	if c.PrependShell && hasPipe(bare) && !pipefail(shellCmd) {
		d.add(at, "DL4006", "RUN with a pipe: set SHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"] first, or a failing stage is hidden")
	}
	if goBuild.MatchString(bare) {
		if !regexp.MustCompile(`\bCGO_ENABLED=0\b`).MatchString(bare) {
			d.add(at, "TM-static", "go build without CGO_ENABLED=0: the image needs a static binary")
		}
		if !strings.Contains(bare, "-trimpath") {
			d.add(at, "TM-static", "go build without -trimpath (reproducible builds, as make release)")
		}
		if !cached("/go/pkg/mod") || !cached("/root/.cache/go-build") {
			d.add(at, "TM-cache", "go build without cache mounts on /go/pkg/mod and /root/.cache/go-build")
		}
	}
	if goModDownload.MatchString(bare) && !cached("/go/pkg/mod") {
		d.add(at, "TM-cache", "go mod download without a cache mount on /go/pkg/mod")
	}
}

// copyCmd: --from names an earlier stage, several sources go to a directory.
func (d *dockerfileLint) copyCmd(at, stage int, c *instructions.CopyCommand) {
	if c.From != "" {
		known := false
		if n, err := strconv.Atoi(c.From); err == nil {
			known = n >= 0 && n < stage
		}
		for _, prev := range d.stages[:stage] {
			if prev.Name != "" && strings.EqualFold(prev.Name, c.From) {
				known = true
			}
		}
		if !known {
			d.add(at, "DL3022", "COPY --from=%s names no earlier stage (alias an image with FROM … AS)", c.From)
		}
	}
	if len(c.SourcePaths)+len(c.SourceContents) > 1 && !strings.HasSuffix(c.DestPath, "/") {
		d.add(at, "DL3021", "COPY with several sources: the destination %q must end with /", c.DestPath)
	}
}

// final checks the stage that becomes the image.
func (d *dockerfileLint) final() {
	st := d.stages[len(d.stages)-1]
	at := line(st.Location)
	lex := d.lex
	env := envMap{}
	var (
		user             string
		userAt           int
		health           []*instructions.HealthCheckCommand
		entry            *instructions.EntrypointCommand
		volumes, exposed []string
	)
	for _, cmd := range st.Commands {
		switch c := cmd.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				v, _, _ := lex.ProcessWord(kv.Value, env)
				env[kv.Key] = v
			}
		case *instructions.UserCommand:
			user, userAt = c.User, line(c.Location())
		case *instructions.HealthCheckCommand:
			health = append(health, c)
		case *instructions.EntrypointCommand:
			entry = c
		case *instructions.VolumeCommand:
			volumes = append(volumes, c.Volumes...)
		case *instructions.ExposeCommand:
			for _, p := range c.Ports {
				if port, proto, err := parsePort(p); err == nil {
					exposed = append(exposed, fmt.Sprintf("%d/%s", port, proto))
				}
			}
		}
	}

	switch name, _, _ := strings.Cut(user, ":"); {
	case user == "":
		d.add(at, "DL3002", "the image runs as root: add a USER with an unprivileged user")
	case name == "root" || name == "0":
		d.add(userAt, "DL3002", "the last USER is root: run as an unprivileged user")
	}

	switch {
	case len(health) == 0:
		d.add(at, "DL3057", "no HEALTHCHECK in the image")
	case len(health) > 1:
		d.add(line(health[1].Location()), "DL3012", "more than one HEALTHCHECK: only the last counts")
	}
	if len(health) > 0 {
		h := health[len(health)-1]
		if len(h.Health.Test) == 0 || h.Health.Test[0] == "NONE" {
			d.add(line(h.Location()), "DL3057", "HEALTHCHECK NONE: the image has no health check")
		} else if h.Health.Test[0] != "CMD" {
			d.add(line(h.Location()), "TM-health", "HEALTHCHECK in shell form needs a shell in the image: use the exec form CMD [\"…\"]")
		}
	}

	if entry == nil {
		d.add(at, "TM-entrypoint", "no ENTRYPOINT: the image must run `timemachine server`")
	} else {
		eat := line(entry.Location())
		args := entry.CmdLine
		switch {
		case entry.PrependShell:
			d.add(eat, "TM-entrypoint", "ENTRYPOINT in shell form: signals go to /bin/sh, not the server; use the exec form")
		case len(args) < 2 || !strings.HasPrefix(args[0], "/") || !strings.HasSuffix(args[0], "/timemachine") || args[1] != "server":
			d.add(eat, "TM-entrypoint", "ENTRYPOINT %q: want [\"/…/timemachine\", \"server\"]", args)
		}
	}

	dataDir, ok := env["TIMEMACHINE_DATA_DIR"]
	switch {
	case !ok:
		d.add(at, "TM-volume", "ENV TIMEMACHINE_DATA_DIR is not set: the server would keep its data in ./data")
	case !strings.HasPrefix(dataDir, "/"):
		d.add(at, "TM-volume", "TIMEMACHINE_DATA_DIR=%s is not absolute", dataDir)
	case !slices.Contains(volumes, dataDir):
		d.add(at, "TM-volume", "the data directory %s is not a VOLUME: its data would live in the container's writable layer", dataDir)
	}

	want := []string{
		portOf(env["TIMEMACHINE_HTTP_ADDR"], 8080) + "/tcp",
		portOf(env["TIMEMACHINE_BIND_ADDR"], 7000) + "/tcp",
		portOf(env["TIMEMACHINE_SERF_ADDR"], 7946) + "/tcp",
		portOf(env["TIMEMACHINE_SERF_ADDR"], 7946) + "/udp",
	}
	for _, p := range want {
		if !slices.Contains(exposed, p) {
			d.add(at, "TM-expose", "EXPOSE lacks %s (HTTP API, raft/RPC and gossip over TCP and UDP)", p)
		}
	}
}

// parsePort reads an EXPOSE entry: PORT or PORT/PROTO (a range is not used
// here and counts as an error).
func parsePort(s string) (int, string, error) {
	p, proto, _ := strings.Cut(s, "/")
	if proto == "" {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return 0, "", fmt.Errorf("protocol %q", proto)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, "", fmt.Errorf("port %q is not in 1-65535", p)
	}
	return n, proto, nil
}

// portOf is the port of a host:port address, or def.
func portOf(addr string, def int) string {
	if _, p, err := net.SplitHostPort(addr); err == nil && p != "" {
		return p
	}
	return strconv.Itoa(def)
}

// unquote blanks quoted strings, so that their content (an echo's text) is
// not read as commands.
func unquote(s string) string {
	var b strings.Builder
	var q rune
	for _, r := range s {
		switch {
		case q != 0 && r == q:
			q = 0
			b.WriteRune(' ')
		case q != 0:
		case r == '\'' || r == '"':
			q = r
			b.WriteRune(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// packages are the package arguments of an install command: its words that
// are not options.
func packages(args string) []string {
	var out []string
	for _, w := range strings.Fields(args) {
		if !strings.HasPrefix(w, "-") && w != "\\" {
			out = append(out, w)
		}
	}
	return out
}

func hasPipe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '|' {
			continue
		}
		if i+1 < len(s) && s[i+1] == '|' {
			i++
			continue
		}
		return true
	}
	return false
}

func pipefail(shellCmd []string) bool {
	for i, w := range shellCmd {
		if w == "-o" && i+1 < len(shellCmd) && shellCmd[i+1] == "pipefail" {
			return true
		}
	}
	return false
}
