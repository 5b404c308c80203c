package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newHealthCmd is `timemachine health`: a probe for container HEALTHCHECKs,
// systemd and scripts. It exists because the Docker image has no shell, curl
// or wget, so the binary itself has to ask the node. It GETs /healthz (or
// /readyz with --ready), which stay open when --auth-file is on, so the probe
// needs no token. Exit 0 on 200, 1 otherwise with the reason on stderr.
func newHealthCmd() *cobra.Command {
	var (
		addr     string
		ready    bool
		timeout  time.Duration
		caCert   string
		insecure bool
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if the node at --addr is alive (/healthz), or ready with --ready (/readyz)",
		Long: `Ask a node whether it is alive (GET /healthz: the process serves HTTP) or,
with --ready, ready (GET /readyz: in the cluster, meta state current, every
slot led). Exit 0 on 200, 1 otherwise. Used by the Docker image's HEALTHCHECK;
it needs no token. --addr is host:port or a URL (https://host:port).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/healthz"
			if ready {
				path = "/readyz"
			}
			u, err := probeURL(addr, path)
			if err != nil {
				return err
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.Proxy = nil // a probe of this node must not go through HTTP_PROXY
			if caCert != "" || insecure {
				// InsecureSkipVerify only on request: a probe over loopback
				// reaches the node by an address its certificate rarely names.
				tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
				if caCert != "" {
					pem, err := os.ReadFile(caCert)
					if err != nil {
						return fmt.Errorf("--ca-cert: %w", err)
					}
					pool := x509.NewCertPool()
					if !pool.AppendCertsFromPEM(pem) {
						return fmt.Errorf("--ca-cert %s: no PEM certificate in it", caCert)
					}
					tc.RootCAs = pool
				}
				tr.TLSClientConfig = tc
			}
			hc := &http.Client{Transport: tr, Timeout: timeout}
			defer hc.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%s: %w", u, err)}
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			if resp.StatusCode != http.StatusOK {
				return &exitError{code: 1, err: fmt.Errorf("%s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", u, resp.Status)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", localHTTPAddr(os.Getenv("TIMEMACHINE_HTTP_ADDR")), "HTTP address of the node: host:port or http(s)://host:port (default: this machine's TIMEMACHINE_HTTP_ADDR, over loopback when it is a wildcard)")
	f.BoolVar(&ready, "ready", false, "ask /readyz (ready to serve) instead of /healthz (alive)")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	f.StringVar(&caCert, "ca-cert", "", "PEM CA certificate to verify an https node with")
	f.BoolVar(&insecure, "insecure-skip-verify", false, "do not verify an https node's certificate (for probes over loopback)")
	return cmd
}

// localHTTPAddr is where a probe on the node's own machine (or container)
// reaches a server started with --http-addr httpAddr: so the image's
// HEALTHCHECK follows TIMEMACHINE_HTTP_ADDR when a user changes the port.
// A wildcard host becomes loopback; empty means the server's default.
func localHTTPAddr(httpAddr string) string {
	host, port, err := net.SplitHostPort(strings.TrimSpace(httpAddr))
	if err != nil || port == "" {
		return "127.0.0.1:8080"
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

// probeURL turns --addr (host:port or a URL) into the URL of path.
func probeURL(addr, path string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", fmt.Errorf("--addr is empty")
	}
	if i := strings.Index(addr, "://"); i >= 0 {
		scheme := strings.ToLower(addr[:i])
		if scheme != "http" && scheme != "https" {
			return "", fmt.Errorf("--addr %q: use host:port, http://host:port or https://host:port", addr)
		}
		return strings.TrimRight(addr, "/") + path, nil
	}
	if strings.Contains(addr, "/") {
		return "", fmt.Errorf("--addr %q: use host:port, http://host:port or https://host:port", addr)
	}
	return "http://" + addr + path, nil
}
