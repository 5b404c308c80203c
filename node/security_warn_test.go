package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A --callback-deny given on the command line replaces the default list;
// when the list given lets callbacks reach the cloud metadata address,
// the server says so at start. The default list and a list that keeps
// it out say nothing.
func TestCallbackDenyWithoutMetadataWarns(t *testing.T) {
	for _, c := range []struct {
		name string
		deny []string
		warn bool
	}{
		{"the default list", nil, false},
		{"a list without link-local", []string{"10.0.0.0/8"}, true},
		{"a list with it", []string{"10.0.0.0/8", "169.254.0.0/16"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			cfg := &Config{HTTPAddr: "127.0.0.1:0", BindAddr: "127.0.0.1:0", SerfAddr: "127.0.0.1:0", CallbackDeny: c.deny}
			if _, err := loadSecurity(cfg, log); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(buf.String(), "callbacks may reach the cloud metadata service"); got != c.warn {
				t.Errorf("warned %v, want %v; log:\n%s", got, c.warn, buf.String())
			}
		})
	}
}
