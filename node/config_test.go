package node

import (
	"strings"
	"testing"

	"github.com/timemachine-db/timemachine/model"
)

// What can be checked before touching the disk is, with a message naming
// the flag.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		msg  string // "" valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"node id", func(c *Config) { c.NodeID = "-bad" }, "--node-id"},
		{"slots", func(c *Config) { c.Slots = -1 }, "--slots"},
		{"4096 slots", func(c *Config) { c.Slots = 4096 }, ""},
		{"slots beyond the key encoding", func(c *Config) { c.Slots = 1 << 16 }, "--slots"},
		{"replicas", func(c *Config) { c.Replicas = 8 }, "--replicas"},
		{"largest meta", func(c *Config) { c.MaxMetaBytes = model.MaxMetaBytesLimit }, ""},
		{"meta larger than the log format decodes", func(c *Config) { c.MaxMetaBytes = model.MaxMetaBytesLimit + 1 }, "--max-meta-bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			tc.edit(&c)
			c.setDefaults()
			err := c.validate()
			if (tc.msg == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("validate: %v, want %q", err, tc.msg)
			}
		})
	}
}
