package deploylint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mutation is a broken variant of a good file: old replaced by new (old ""
// appends new) must bring rule up.
type mutation struct {
	name, old, new, rule string
}

func mutate(t *testing.T, good []byte, m mutation) []byte {
	t.Helper()
	if m.old == "" {
		return append(append([]byte(nil), good...), m.new...)
	}
	s := string(good)
	if !strings.Contains(s, m.old) {
		t.Fatalf("%s: the good file has no %q to replace", m.name, m.old)
	}
	return []byte(strings.Replace(s, m.old, m.new, 1))
}

func expectRule(t *testing.T, m mutation, fs []Finding) {
	t.Helper()
	if !slices.Contains(Rules(fs), m.rule) {
		t.Errorf("%s: want rule %s, got:\n%s", m.name, m.rule, Format(fs))
	}
}

// Every Dockerfile rule fires on a file that breaks it.
func TestDockerfileRulesFire(t *testing.T) {
	good := read(t, "Dockerfile")
	goVer := goModVersion(t)
	const builderRun = "RUN mkdir -p /rootfs/etc"
	for _, m := range []mutation{
		{"BuildKit check", "AS build", "AS Build", "buildkit/StageNameCasing"},
		{"BuildKit shell-form CMD", "", "\nCMD echo hi\n", "buildkit/JSONArgsRecommended"},
		{"BuildKit secret in ENV", "", "\nENV API_TOKEN=x\n", "buildkit/SecretsUsedInArgOrEnv"},
		{"no tag", "golang:${GO_VERSION}-bookworm", "golang", "DL3006"},
		{"latest", "golang:${GO_VERSION}-bookworm", "golang:latest", "DL3007"},
		{"tag without a version", "FROM scratch", "FROM gcr.io/distroless/static-debian12:nonroot", "TM-pin"},
		{"another Go", "ARG GO_VERSION=" + goVer, "ARG GO_VERSION=1.20.1", "TM-go"},
		{"ADD", "COPY go.mod go.sum ./", "ADD go.mod go.sum ./", "DL3020"},
		{"root user", "USER 65532:65532", "USER root", "DL3002"},
		{"no user", "USER 65532:65532\n", "", "DL3002"},
		{"no healthcheck", "HEALTHCHECK --interval", "# HEALTHCHECK --interval", "DL3057"},
		{"two healthchecks", "", "\nHEALTHCHECK CMD [\"/usr/local/bin/timemachine\", \"health\"]\n", "DL3012"},
		{"shell-form healthcheck", `CMD ["/usr/local/bin/timemachine", "health", "--timeout", "4s"]`, "CMD /usr/local/bin/timemachine health", "TM-health"},
		{"healthcheck none", "", "\nHEALTHCHECK NONE\n", "DL3057"},
		{"shell-form entrypoint", `ENTRYPOINT ["/usr/local/bin/timemachine", "server"]`, "ENTRYPOINT /usr/local/bin/timemachine server", "TM-entrypoint"},
		{"entrypoint not server", `ENTRYPOINT ["/usr/local/bin/timemachine", "server"]`, `ENTRYPOINT ["/usr/local/bin/timemachine"]`, "TM-entrypoint"},
		{"sudo", builderRun, "RUN sudo true\n" + builderRun, "DL3004"},
		{"cd", builderRun, "RUN cd /tmp && true\n" + builderRun, "DL3003"},
		{"apt", builderRun, "RUN apt install -y curl\n" + builderRun, "DL3027"},
		{"apt recommends", builderRun, "RUN apt-get update && apt-get install -y curl=8.0 && rm -rf /var/lib/apt/lists/*\n" + builderRun, "DL3015"},
		{"apt unpinned", builderRun, "RUN apt-get update && apt-get install -y --no-install-recommends curl && rm -rf /var/lib/apt/lists/*\n" + builderRun, "DL3008"},
		{"apt lists kept", builderRun, "RUN apt-get update && apt-get install -y --no-install-recommends curl=8.0\n" + builderRun, "DL3009"},
		{"apk unpinned", builderRun, "RUN apk add --no-cache curl\n" + builderRun, "DL3018"},
		{"apk cache", builderRun, "RUN apk add curl=8.0-r0\n" + builderRun, "DL3019"},
		{"pipe without pipefail", builderRun, "RUN go version | grep go\n" + builderRun, "DL4006"},
		{"copy from an unknown stage", "COPY --from=build /out/timemachine", "COPY --from=builder /out/timemachine", "DL3022"},
		{"several sources to a file", "/rootfs/etc/group /etc/", "/rootfs/etc/group /etc", "DL3021"},
		{"bad port", "EXPOSE 8080/tcp", "EXPOSE 80800/tcp", "DL3011"},
		{"cgo", "CGO_ENABLED=0 GOOS", "GOOS", "TM-static"},
		{"no trimpath", "go build -trimpath", "go build", "TM-static"},
		{"no build cache", "    --mount=type=cache,target=/root/.cache/go-build \\\n", "", "TM-cache"},
		{"no module cache", "RUN --mount=type=cache,target=/go/pkg/mod \\\n    go mod download", "RUN go mod download", "TM-cache"},
		{"no volume", `VOLUME ["/data"]`, `VOLUME ["/var/lib/tm"]`, "TM-volume"},
		{"no data dir", "TIMEMACHINE_DATA_DIR=/data \\\n    ", "", "TM-volume"},
		{"udp gossip not exposed", " 7946/udp", "", "TM-expose"},
	} {
		fs, err := LintDockerfile("Dockerfile", mutate(t, good, m), DockerfileOptions{GoVersion: goVer})
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		expectRule(t, m, fs)
	}
}

func TestDockerignoreRulesFire(t *testing.T) {
	good := read(t, ".dockerignore")
	files := []string{"go.mod", "go.sum", "cmd/timemachine/main.go", "cmd/timemachine/main_test.go", "rpc/httpapi/ui/index.html", "rpc/httpapi/server.go"}
	for _, m := range []mutation{
		{"history sent", ".git\n", "", "TM-context"},
		{"root binary sent", "/timemachine\n", "", "TM-context"},
		{"go.sum ignored", "", "go.sum\n", "TM-context"},
		{"embedded asset ignored", "", "**/*.html\n", "TM-context"},
	} {
		fs, err := CheckDockerignore(".dockerignore", mutate(t, good, m), files)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		expectRule(t, m, fs)
	}
}

func TestComposeRulesFire(t *testing.T) {
	good := read(t, "deploy/compose.yaml")
	dir := filepath.Join(t.TempDir(), "deploy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range []mutation{
		{"not YAML", "services:", "services: [", "compose/load"},
		{"schema", "stop_grace_period: 60s", "stop_grace_period: 60s\n  restart_policy: always", "compose/load"},
		{"undeclared volume", "  tm3-data:\n", "", "compose/load"},
		{"two nodes", "  tm3:\n", "  tm3:\n    profiles: [off]\n", "TM-nodes"},
		{"duplicate id", "--node-id=tm2", "--node-id=tm1", "TM-node-id"},
		{"wildcard bind", "--bind-addr=172.28.0.11:7000", "--bind-addr=0.0.0.0:7000", "TM-advertise"},
		{"serf by name", "--serf-addr=172.28.0.12:7946", "--serf-addr=tm2:7946", "TM-advertise"},
		{"wrong IP", "--serf-addr=172.28.0.13:7946", "--serf-addr=172.28.0.14:7946", "TM-advertise"},
		{"outside subnet", "ipv4_address: 172.28.0.13", "ipv4_address: 172.29.0.13", "TM-ip"},
		{"join nobody", "--join=172.28.0.11:7946,172.28.0.13:7946", "--join=172.28.0.99:7946", "TM-join"},
		{"bootstrap 1", "--bootstrap-expect=3\n    networks:\n      timemachine:\n        ipv4_address: 172.28.0.12", "--bootstrap-expect=1\n    networks:\n      timemachine:\n        ipv4_address: 172.28.0.12", "TM-bootstrap"},
		{"bind mount", "tm1-data:/data", "./data:/data", "TM-volume"},
		{"open port", `"127.0.0.1:8081:8080"`, `"8081:8080"`, "TM-ports"},
		{"raft port published", `"127.0.0.1:8082:8080"`, `"127.0.0.1:8082:8080"` + "\n      - \"7000:7000\"", "TM-ports"},
		{"short grace", "stop_grace_period: 60s", "stop_grace_period: 10s", "TM-stop"},
	} {
		path := filepath.Join(dir, "compose.yaml")
		if err := os.WriteFile(path, mutate(t, good, m), 0o644); err != nil {
			t.Fatal(err)
		}
		fs, err := CheckCompose(path)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		expectRule(t, m, fs)
	}
}

func TestUnitRulesFire(t *testing.T) {
	good := read(t, "deploy/timemachine.service")
	for _, m := range []mutation{
		{"not the server", "timemachine server", "timemachine", "TM-unit-exec"},
		{"no reload", "ExecReload=/bin/kill -HUP $MAINPID\n", "", "TM-unit-reload"},
		{"root", "User=timemachine", "User=root", "TM-unit-user"},
		{"no user", "User=timemachine\n", "", "TM-unit-user"},
		{"protect full", "ProtectSystem=strict", "ProtectSystem=full", "TM-unit-harden"},
		{"new privileges", "NoNewPrivileges=yes", "NoNewPrivileges=no", "TM-unit-harden"},
		{"shared tmp", "PrivateTmp=yes\n", "", "TM-unit-harden"},
		{"home", "ProtectHome=yes", "ProtectHome=no", "TM-unit-harden"},
		{"restart", "Restart=on-failure", "Restart=no", "TM-unit-harden"},
		{"capabilities", "CapabilityBoundingSet=\n", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n", "TM-unit-harden"},
		{"families", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "RestrictAddressFamilies=~AF_PACKET", "TM-unit-harden"},
		{"files", "LimitNOFILE=65536", "LimitNOFILE=1024", "TM-unit-limits"},
		{"short stop", "TimeoutStopSec=90s", "TimeoutStopSec=5s", "TM-unit-stop"},
		{"kill signal", "KillSignal=SIGTERM", "KillSignal=SIGKILL", "TM-unit-stop"},
		{"data not writable", "ReadWritePaths=/var/lib/timemachine", "ReadWritePaths=/srv/other", "TM-unit-data"},
		{"no install", "WantedBy=multi-user.target", "", "TM-unit"},
		{"syntax", "[Install]", "[Install", "TM-unit-syntax"},
	} {
		expectRule(t, m, CheckUnit("timemachine.service", mutate(t, good, m)))
	}
}

func TestSystemdAnalyzeFires(t *testing.T) {
	standIn, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	good := read(t, "deploy/timemachine.service")
	for _, m := range []mutation{
		{"unknown setting", "ProtectSystem=strict", "ProtectSystem=strict\nProtectSystm=strict", "systemd-analyze/verify"},
		{"bad value", "ProtectSystem=strict", "ProtectSystem=bogus", "systemd-analyze/verify"},
		{"exposed", "SystemCallErrorNumber=EPERM", "NoNewPrivileges=no\nPrivateUsers=no\nPrivateDevices=no\nProtectKernelTunables=no\nProtectKernelModules=no\nCapabilityBoundingSet=CAP_SYS_ADMIN\nSystemCallFilter=\nRestrictNamespaces=no\nProtectSystem=no\nProtectHome=no\nUser=", "systemd-analyze/security"},
	} {
		path := filepath.Join(t.TempDir(), "timemachine.service")
		if err := os.WriteFile(path, mutate(t, good, m), 0o644); err != nil {
			t.Fatal(err)
		}
		fs, ran, err := SystemdAnalyze(path, standIn, 2.5)
		if err != nil {
			t.Fatal(err)
		}
		if !ran {
			t.Skip("systemd-analyze not installed")
		}
		expectRule(t, m, fs)
	}
}

func TestEnvFileRulesFire(t *testing.T) {
	good := read(t, "deploy/timemachine.env")
	for _, m := range []mutation{
		{"not a flag variable", "", "HTTP_ADDR=1.2.3.4:80\n", "TM-env"},
		{"set twice", "", "TIMEMACHINE_NODE_ID=b\n", "TM-env"},
		{"lower case", "", "timemachine_node_id=b\n", "TM-env"},
	} {
		fs, _ := CheckEnvFile("timemachine.env", mutate(t, good, m))
		expectRule(t, m, fs)
	}
}

func TestParseSystemdTime(t *testing.T) {
	for in, want := range map[string]string{"90": "1m30s", "90s": "1m30s", "1min 30s": "1m30s", "2min": "2m0s", "500ms": "500ms"} {
		d, err := parseSystemdTime(in)
		if err != nil || d.String() != want {
			t.Errorf("parseSystemdTime(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	if _, err := parseSystemdTime("soon"); err == nil {
		t.Error("parseSystemdTime(\"soon\") succeeded")
	}
}
