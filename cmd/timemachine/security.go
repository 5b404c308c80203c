package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/timemachine-db/timemachine/client"
	"github.com/timemachine-db/timemachine/node"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
	"github.com/timemachine-db/timemachine/rpc/webhook"
	"github.com/timemachine-db/timemachine/service"
)

// addSecurityFlags registers the server's security flags (API.md §6,
// docs/threat-model.md).
func addSecurityFlags(f *pflag.FlagSet, cfg *node.Config) {
	f.StringVar(&cfg.AuthFile, "auth-file", "", "require API tokens: a JSON file of token digests and roles (re-read on SIGHUP; 'timemachine token new' makes entries)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS on --http-addr with this PEM certificate (reloaded on SIGHUP)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "the PEM key of --tls-cert")
	f.StringVar(&cfg.PeerTLSCert, "peer-tls-cert", "", "mutual TLS on --bind-addr: this node's PEM certificate, signed by --peer-tls-ca (reloaded on SIGHUP)")
	f.StringVar(&cfg.PeerTLSKey, "peer-tls-key", "", "the PEM key of --peer-tls-cert")
	f.StringVar(&cfg.PeerTLSCA, "peer-tls-ca", "", "the cluster's CA: only peers with a certificate it signed may connect to --bind-addr")
	f.StringVar(&cfg.GossipKey, "gossip-key", "", "encrypt and authenticate gossip: base64 of 16, 24 or 32 random bytes (openssl rand -base64 32); prefer TIMEMACHINE_GOSSIP_KEY")
	f.StringSliceVar(&cfg.CallbackDeny, "callback-deny", webhook.DefaultDeny, "callbacks may not reach these CIDRs (replaces the default list; include it when adding)")
	f.StringSliceVar(&cfg.CallbackAllow, "callback-allow", nil, "when set, callbacks may reach only these CIDRs")
	f.StringSliceVar(&cfg.AllowedOrigins, "allowed-origins", nil, "browser origins allowed to call the API cross-site, like https://console.example.com")
	f.IntVar(&cfg.MaxBodyBytes, "max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest request body, in bytes (413 beyond, before it is read)")
	f.IntVar(&cfg.MaxConns, "max-conns", 0, "most open HTTP API connections (default: sized from the file descriptor limit)")
	f.IntVar(&cfg.MaxConnsPerIP, "max-conns-per-ip", 0, "most open HTTP API connections per client address (0: no limit; mind load balancers and NAT)")
	f.IntVar(&cfg.MaxCollections, "max-collections", service.DefaultMaxCollections, "most collections in the cluster (negative: no limit)")
	f.IntVar(&cfg.MaxRoutes, "max-routes", service.DefaultMaxRoutes, "most routes in the cluster (negative: no limit)")
	f.StringVar(&cfg.SecretsKeyFile, "secrets-key-file", "", "encrypt signing secrets and sensitive route headers at rest with the keys in this file (one base64 32-byte key per line, the first seals; mode 600; re-read on SIGHUP)")
}

// raiseFileLimit lifts the soft file-descriptor limit to the hard one:
// every open connection is a descriptor, and the API's connection cap is
// sized from this limit (node.DefaultMaxConns).
func raiseFileLimit(log *slog.Logger) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return
	}
	if rl.Cur < rl.Max {
		old := rl.Cur
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			log.Warn("could not raise the file descriptor limit", "soft", old, "hard", rl.Max, "error", err)
			return
		}
		log.Debug("raised the file descriptor limit", "from", old, "to", rl.Max)
	}
}

// reloadOnSIGHUP re-reads the auth file, certificates and secrets key on
// every SIGHUP until the returned function is called.
func reloadOnSIGHUP(n *node.Node, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				log.Info("SIGHUP: reloading the auth file, certificates and secrets key")
				if err := n.Reload(); err != nil {
					log.Error("reload incomplete", "error", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// registerAuthFlags adds --token and --ca-cert to a client command; like
// every flag they also read TIMEMACHINE_TOKEN and TIMEMACHINE_CA_CERT.
func registerAuthFlags(cmd *cobra.Command, token, caCert *string) {
	cmd.PersistentFlags().StringVar(token, "token", "", "API token (Authorization: Bearer), for servers with --auth-file; prefer TIMEMACHINE_TOKEN")
	cmd.PersistentFlags().StringVar(caCert, "ca-cert", "", "trust this CA (PEM) for HTTPS; host:port addresses then use https")
}

// authOptions are the client options of --token and --ca-cert.
func authOptions(token, caCert string) []client.Option {
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	if caCert != "" {
		opts = append(opts, client.WithCAFile(caCert))
	}
	return opts
}
