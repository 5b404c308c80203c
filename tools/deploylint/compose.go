package deploylint

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// minStopGrace is how long `docker stop` must wait before SIGKILL: callbacks
// in flight get up to 15 s, then leadership is handed off.
const minStopGrace = 30 * time.Second

// CheckCompose loads a compose file the way docker compose does (compose-go:
// schema validation, interpolation with an empty environment, anchors and
// merge keys, references between services, networks and volumes) and checks
// that it describes a working timemachine cluster (package doc).
func CheckCompose(file string) ([]Finding, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	c := &collector{file: file}
	project, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SkipResolveEnvironment = true
		// The file's own name: wins; this is the fallback compose derives
		// from the directory.
		o.SetProjectName("timemachine", false)
	})
	if err != nil {
		c.add(0, "compose/load", "%v", err)
		return c.out, nil
	}
	checkCluster(c, project)
	return c.out, nil
}

type composeNode struct {
	name  string
	svc   types.ServiceConfig
	flags map[string]string
	ip    netip.Addr
}

// flag is a server flag from the command (--k=v or --k v), else from the
// environment (TIMEMACHINE_K), as the server reads them.
func (n *composeNode) flag(name string) (string, bool) {
	if v, ok := n.flags[name]; ok {
		return v, true
	}
	env := "TIMEMACHINE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	if v, ok := n.svc.Environment[env]; ok && v != nil {
		return *v, true
	}
	return "", false
}

func parseFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		k, v, hasEq := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasEq && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			v = args[i+1]
			i++
		}
		out[k] = v
	}
	return out
}

func checkCluster(c *collector, p *types.Project) {
	var nodes []*composeNode
	names := make([]string, 0, len(p.Services))
	for name := range p.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := p.Services[name]
		if svc.Build == nil && !strings.Contains(svc.Image, "timemachine") {
			continue
		}
		n := &composeNode{name: name, svc: svc, flags: parseFlags(svc.Command)}
		for _, nc := range svc.Networks {
			if nc != nil && nc.Ipv4Address != "" {
				if ip, err := netip.ParseAddr(nc.Ipv4Address); err == nil {
					n.ip = ip
				}
			}
		}
		nodes = append(nodes, n)
	}
	if len(nodes) < 3 {
		c.add(0, "TM-nodes", "%d timemachine services; a cluster that survives a node's loss needs 3", len(nodes))
	}

	serfAddrs := map[string]string{} // serf address -> service
	ids := map[string]string{}
	for _, n := range nodes {
		id, ok := n.flag("node-id")
		switch {
		case !ok || id == "":
			c.add(0, "TM-node-id", "%s: no --node-id (the default comes from the container's random hostname)", n.name)
		case ids[id] != "":
			c.add(0, "TM-node-id", "%s and %s both have --node-id %s", ids[id], n.name, id)
		default:
			ids[id] = n.name
		}
		if !n.ip.IsValid() {
			c.add(0, "TM-ip", "%s: no fixed ipv4_address on its network: --bind-addr and --serf-addr need the node's own IP", n.name)
		} else if !inSubnet(p, n) {
			c.add(0, "TM-ip", "%s: ipv4_address %s is in no subnet of its network's ipam config", n.name, n.ip)
		}
		for _, f := range []string{"bind-addr", "serf-addr"} {
			v, _ := n.flag(f)
			host, _, err := net.SplitHostPort(v)
			ip, perr := netip.ParseAddr(host)
			switch {
			case v == "" || err != nil:
				c.add(0, "TM-advertise", "%s: --%s %q: set it to the node's own IP:port (peers dial it as given)", n.name, f, v)
			case perr != nil:
				c.add(0, "TM-advertise", "%s: --%s %s: use a literal IP (gossip cannot advertise a host name)", n.name, f, v)
			case ip.IsUnspecified() || ip.IsLoopback():
				c.add(0, "TM-advertise", "%s: --%s %s: peers cannot reach a node at %s", n.name, f, v, ip)
			case n.ip.IsValid() && ip != n.ip:
				c.add(0, "TM-advertise", "%s: --%s %s is not the node's ipv4_address %s", n.name, f, v, n.ip)
			}
		}
		if v, _ := n.flag("serf-addr"); v != "" {
			serfAddrs[v] = n.name
		}
	}

	for _, n := range nodes {
		own, _ := n.flag("serf-addr")
		join, _ := n.flag("join")
		var targets []string
		for _, j := range strings.Split(join, ",") {
			if j = strings.TrimSpace(j); j != "" {
				targets = append(targets, j)
			}
		}
		if len(targets) == 0 {
			c.add(0, "TM-join", "%s: no --join: it would form a cluster of its own", n.name)
		}
		for _, j := range targets {
			switch {
			case j == own:
				c.add(0, "TM-join", "%s: --join names its own serf address %s", n.name, j)
			case serfAddrs[j] == "":
				c.add(0, "TM-join", "%s: --join %s is no other node's --serf-addr", n.name, j)
			}
		}
		be, ok := n.flag("bootstrap-expect")
		if got, err := strconv.Atoi(be); !ok || err != nil || got != len(nodes) {
			c.add(0, "TM-bootstrap", "%s: --bootstrap-expect %q, want %d (the nodes in this file)", n.name, be, len(nodes))
		}

		dataDir := "/data"
		if v, ok := n.flag("data-dir"); ok {
			dataDir = v
		}
		if !slices.ContainsFunc(n.svc.Volumes, func(v types.ServiceVolumeConfig) bool {
			_, declared := p.Volumes[v.Source]
			return v.Type == types.VolumeTypeVolume && declared && filepath.Clean(v.Target) == dataDir
		}) {
			c.add(0, "TM-volume", "%s: no named volume at its data directory %s (data would die with the container)", n.name, dataDir)
		}

		httpPort := 8080
		if v, ok := n.flag("http-addr"); ok {
			if _, ps, err := net.SplitHostPort(v); err == nil {
				httpPort, _ = strconv.Atoi(ps)
			}
		}
		_, auth := n.flag("auth-file")
		for _, port := range n.svc.Ports {
			if port.Published == "" {
				continue
			}
			if int(port.Target) != httpPort {
				c.add(0, "TM-ports", "%s: publishes port %d: only the HTTP API (%d) is for clients; peers talk over the compose network", n.name, port.Target, httpPort)
				continue
			}
			if ip, err := netip.ParseAddr(port.HostIP); !auth && (err != nil || !ip.IsLoopback()) {
				c.add(0, "TM-ports", "%s: publishes the HTTP API on %q without --auth-file: anyone who reaches the host can use it (publish on 127.0.0.1, or add --auth-file)", n.name, port.HostIP)
			}
		}
		if g := n.svc.StopGracePeriod; g == nil || time.Duration(*g) < minStopGrace {
			c.add(0, "TM-stop", "%s: stop_grace_period under %s: docker stop would SIGKILL before the leadership hand-off", n.name, minStopGrace)
		}
	}
}

// inSubnet tells whether the node's IP lies in a subnet of the network it
// has it on.
func inSubnet(p *types.Project, n *composeNode) bool {
	for netName, nc := range n.svc.Networks {
		if nc == nil || nc.Ipv4Address == "" {
			continue
		}
		for _, pool := range p.Networks[netName].Ipam.Config {
			if pool == nil {
				continue
			}
			if pfx, err := netip.ParsePrefix(pool.Subnet); err == nil && pfx.Contains(n.ip) {
				return true
			}
		}
	}
	return false
}
