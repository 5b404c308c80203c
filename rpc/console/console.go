package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"path"
)

//go:embed static
var static embed.FS

// files is static/ as the root.
var files, _ = fs.Sub(static, "static")

// Index is the console's page.
const Index = "index.html"

// File returns the named file (a flat name such as "app.js") and its
// content type; ok is false when there is no such file.
func File(name string) (body []byte, contentType string, ok bool) {
	if name == "" || name != path.Base(name) || name[0] == '.' {
		return nil, "", false
	}
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return nil, "", false
	}
	return b, typeOf(name), true
}

// etags are the files' entity tags (a digest of the content), so a
// browser revalidating a file it has gets 304 instead of the file.
var etags = func() map[string]string {
	out := map[string]string{}
	for _, name := range Names() {
		b, _ := fs.ReadFile(files, name)
		sum := sha256.Sum256(b)
		out[name] = `"` + hex.EncodeToString(sum[:12]) + `"`
	}
	return out
}()

// ETag returns the entity tag of the named file ("" when there is none).
func ETag(name string) string { return etags[name] }

// Names lists the console's files.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func typeOf(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return "application/octet-stream"
}
