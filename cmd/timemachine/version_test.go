package main

import (
	"bytes"
	"regexp"
	"testing"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// `timemachine --version` and `timemachine version` print the same line.
func TestVersionFlagAndCommandAgree(t *testing.T) {
	for _, stamped := range []string{"dev", "v1.2.3-4-g1a2b3c4-dirty"} {
		t.Run(stamped, func(t *testing.T) {
			old := version
			version = stamped
			t.Cleanup(func() { version = old })
			flag, err := runRoot(t, "--version")
			if err != nil {
				t.Fatalf("--version: %v", err)
			}
			cmd, err := runRoot(t, "version")
			if err != nil {
				t.Fatalf("version: %v", err)
			}
			if flag != cmd {
				t.Fatalf("--version printed %q, version printed %q", flag, cmd)
			}
			if !regexp.MustCompile(`^timemachine \S+\n$`).MatchString(flag) {
				t.Fatalf("--version printed %q, want one line \"timemachine VERSION\"", flag)
			}
			if stamped != "dev" && flag != "timemachine "+stamped+"\n" {
				t.Fatalf("--version printed %q, want the stamped %q", flag, stamped)
			}
		})
	}
}

// `version -o json` prints the same version as one JSON object, and an
// unknown format is a usage error.
func TestVersionJSON(t *testing.T) {
	old := version
	version = "v1.2.3"
	t.Cleanup(func() { version = old })
	out, err := runRoot(t, "version", "-o", "json")
	if err != nil || out != "{\n  \"version\": \"v1.2.3\"\n}\n" {
		t.Fatalf("version -o json: %q, %v", out, err)
	}
	if _, err := runRoot(t, "version", "-o", "yaml"); err == nil {
		t.Fatal("version -o yaml: no error")
	}
}
