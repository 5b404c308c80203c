package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const resource = "openapi.json"

func parse(t *testing.T) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSON()))
	if err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		t.Fatal("openapi.json is not an object")
	}
	return doc
}

// compiler resolves "#/components/…" references against the document.
func compiler(t *testing.T, doc map[string]any) *jsonschema.Compiler {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(resource, doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// example is one example next to its schema: a media type object or a
// parameter.
type example struct {
	at    string // JSON pointer of the object holding both
	value any
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func examples(v any, at string, out *[]example) {
	switch x := v.(type) {
	case map[string]any:
		if ex, ok := x["example"]; ok {
			if _, ok := x["schema"]; ok {
				*out = append(*out, example{at, ex})
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "example" {
				continue
			}
			examples(x[k], at+"/"+escape(k), out)
		}
	case []any:
		for i, e := range x {
			examples(e, fmt.Sprintf("%s/%d", at, i), out)
		}
	}
}

// Every example in the document validates against the schema beside it.
func TestExamplesValidate(t *testing.T) {
	doc := parse(t)
	c := compiler(t, doc)
	var exs []example
	examples(doc, "", &exs)
	if len(exs) < 30 {
		t.Fatalf("found only %d examples; the walk is broken or examples were dropped", len(exs))
	}
	for _, ex := range exs {
		sch, err := c.Compile(resource + "#" + ex.at + "/schema")
		if err != nil {
			t.Errorf("%s/schema does not compile: %v", ex.at, err)
			continue
		}
		if err := sch.Validate(ex.value); err != nil {
			t.Errorf("the example at %s does not match its schema:\n%v", ex.at, err)
		}
	}
}

// The validator does catch a bad example (the test above can fail).
func TestBadExamplesAreCaught(t *testing.T) {
	doc := parse(t)
	c := compiler(t, doc)
	for _, tc := range []struct{ schema, value string }{
		{"Job", `{"id":"a","collection":"c","trigger_time":1,"status":"bogus","attempts":0,"version":1}`},
		{"Job", `{"id":"a b","collection":"c","trigger_time":1,"status":"failed","attempts":0,"version":1}`},
		{"JobSpec", `{"id":"a","callback_url":"https://x","unknown":1}`},
		{"Error", `{"error":{"code":"nope","message":"m"}}`},
		{"Duration", `"5 minutes"`},
		{"RetryPolicy", `{"max_attempts":0}`},
		{"RetryPolicy", `{"max_attempts":1001}`},
		{"RetryPolicy", `{"multiplier":101}`},
		// Exactly one of trigger_time / delay, and of callback_url / route.
		{"JobSpec", `{"id":"a","callback_url":"https://x"}`},
		{"JobSpec", `{"id":"a","callback_url":"https://x","trigger_time":1,"delay":"1s"}`},
		{"JobSpec", `{"id":"a","trigger_time":1}`},
		{"JobSpec", `{"id":"a","trigger_time":1,"callback_url":"https://x","route":"r"}`},
		// Redrive by ids or by a range, not both, not neither.
		{"RedriveRequest", `{}`},
		{"RedriveRequest", `{"ids":[]}`},
		{"RedriveRequest", `{"ids":["a"],"from":1}`},
	} {
		if validate(t, c, tc.schema, tc.value) == nil {
			t.Errorf("%s accepted %s", tc.schema, tc.value)
		}
	}
}

// validate checks value (JSON) against the named component schema.
func validate(t *testing.T, c *jsonschema.Compiler, schema, value string) error {
	t.Helper()
	sch, err := c.Compile(resource + "#/components/schemas/" + schema)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

// The document's shape: OpenAPI 3.1, every operation with an id, a
// summary, a tag and at least one success answer, ids unique, and every
// path parameter declared.
func TestDocumentShape(t *testing.T) {
	doc := parse(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	paths, _ := doc["paths"].(map[string]any)
	ids := map[string]string{}
	for p, item := range paths {
		pi := item.(map[string]any)
		for method, o := range pi {
			if method == "parameters" {
				continue
			}
			op, ok := o.(map[string]any)
			if !ok {
				t.Errorf("%s %s is not an operation object", method, p)
				continue
			}
			where := strings.ToUpper(method) + " " + p
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s has no operationId", where)
			} else if prev, dup := ids[id]; dup {
				t.Errorf("operationId %q is used by %s and %s", id, prev, where)
			}
			ids[id] = where
			if s, _ := op["summary"].(string); s == "" {
				t.Errorf("%s has no summary", where)
			}
			if tags, _ := op["tags"].([]any); len(tags) == 0 {
				t.Errorf("%s has no tag", where)
			}
			ok2xx := false
			for code := range op["responses"].(map[string]any) {
				ok2xx = ok2xx || code[0] == '2' || code[0] == '3'
			}
			if !ok2xx {
				t.Errorf("%s has no success answer", where)
			}
			declared := map[string]bool{}
			for _, list := range []any{pi["parameters"], op["parameters"]} {
				ps, _ := list.([]any)
				for _, prm := range ps {
					m := resolve(doc, prm.(map[string]any))
					if m["in"] == "path" {
						declared[m["name"].(string)] = true
					}
				}
			}
			for _, seg := range strings.Split(p, "/") {
				if strings.HasPrefix(seg, "{") {
					name := strings.Trim(seg, "{}")
					if !declared[name] {
						t.Errorf("%s: path parameter %q is not declared", where, name)
					}
					delete(declared, name)
				}
			}
			for name := range declared {
				t.Errorf("%s: declares path parameter %q, which the path does not have", where, name)
			}
		}
	}
}

func resolve(doc map[string]any, m map[string]any) map[string]any {
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var cur any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		cur = cur.(map[string]any)[part]
	}
	return cur.(map[string]any)
}

// docs/openapi.json is a copy of the embedded document (`make openapi`
// refreshes it).
func TestDocsCopy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, JSON()) {
		t.Error("docs/openapi.json differs from rpc/openapi/openapi.json: run `make openapi` (cp rpc/openapi/openapi.json docs/openapi.json)")
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
}

// planned.json holds the API.md endpoints the server does not serve yet,
// ready to move into openapi.json. Its examples validate against its
// schemas and the document's, and none of its paths is served already.
func TestPlannedExamplesValidate(t *testing.T) {
	doc := parse(t)
	b, err := os.ReadFile("planned.json")
	if err != nil {
		t.Fatal(err)
	}
	pv, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("planned.json: %v", err)
	}
	planned := pv.(map[string]any)
	paths := doc["paths"].(map[string]any)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for p, item := range planned["paths"].(map[string]any) {
		if _, dup := paths[p]; dup {
			t.Errorf("%s is in both openapi.json and planned.json: remove it from planned.json", p)
		}
		paths[p] = item
	}
	for name, s := range planned["components"].(map[string]any)["schemas"].(map[string]any) {
		if _, dup := schemas[name]; dup {
			t.Errorf("schema %s is in both openapi.json and planned.json", name)
		}
		schemas[name] = s
	}
	c := compiler(t, doc)
	var exs []example
	for p, item := range planned["paths"].(map[string]any) {
		examples(item, "/paths/"+escape(p), &exs)
	}
	if n := len(planned["paths"].(map[string]any)); n > 0 && len(exs) < 5 {
		t.Fatalf("only %d examples in planned.json", len(exs))
	} else if n == 0 {
		t.Skip("nothing is planned: every endpoint of API.md is served")
	}
	for _, ex := range exs {
		sch, err := c.Compile(resource + "#" + ex.at + "/schema")
		if err != nil {
			t.Errorf("%s/schema does not compile: %v", ex.at, err)
			continue
		}
		if err := sch.Validate(ex.value); err != nil {
			t.Errorf("the example at %s (planned.json) does not match its schema:\n%v", ex.at, err)
		}
	}
}

// Bodies the server accepts validate: a job as GET returns it can be sent
// back (its read-only fields are accepted and ignored), and a redrive by a
// range may leave out either bound.
func TestAcceptedBodiesValidate(t *testing.T) {
	doc := parse(t)
	c := compiler(t, doc)
	for _, tc := range []struct{ schema, value string }{
		{"JobSpec", `{"id":"a","callback_url":"https://x","delay":"90s"}`},
		{"JobSpec", `{"id":"a","route":"r","trigger_time":1767225600000,"collection":"c","status":"succeeded","attempts":1,"last_error":"","version":3,"created_at":1,"updated_at":2,"finished_at":3}`},
		{"RedriveRequest", `{"ids":["a","b"]}`},
		{"RedriveRequest", `{"from":1}`},
		{"RedriveRequest", `{"from":1,"to":2}`},
		{"RetryPolicy", `{"max_attempts":1000,"multiplier":100}`},
		{"RouteConfig", `{"webhook_url":"https://x","max_in_flight":4,"pipeline":true}`},
	} {
		if err := validate(t, c, tc.schema, tc.value); err != nil {
			t.Errorf("%s rejected %s: %v", tc.schema, tc.value, err)
		}
	}
}
