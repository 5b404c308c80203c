package model

import (
	"strings"
	"testing"
)

func TestCheckNameAndID(t *testing.T) {
	for _, tc := range []struct {
		s          string
		name, id   bool // valid as a name, as an id
		msgOnError string
	}{
		{"billing", true, true, ""},
		{"a.b_c-d", true, true, ""},
		{"user:42@x~y=z+w", false, true, "not allowed"},
		{"", false, false, "1 to"},
		{".", false, false, `"." and ".."`},
		{"..", false, false, `"." and ".."`},
		{"a/b", false, false, `'/' at byte 1`},
		{"é", false, false, "byte 0xc3"},
		{strings.Repeat("n", MaxNameLen), true, true, ""},
		{strings.Repeat("n", MaxNameLen+1), false, true, "64"},
		{strings.Repeat("i", MaxIDLen), false, true, "64"},
		{strings.Repeat("i", MaxIDLen+1), false, false, "64"},
	} {
		ne, ie := CheckName("collection name", tc.s), CheckID(tc.s)
		if (ne == nil) != tc.name || (ie == nil) != tc.id || ValidID(tc.s) != tc.id {
			t.Errorf("%q: name err %v, id err %v; want valid name %v, id %v", Clip(tc.s), ne, ie, tc.name, tc.id)
		}
		if ne != nil && (ne.Kind != KindInvalidArgument || !strings.Contains(ne.Message, tc.msgOnError)) {
			t.Errorf("%q: %v, want a message with %q", Clip(tc.s), ne, tc.msgOnError)
		}
		if ie != nil && ie.Kind != KindInvalidArgument {
			t.Errorf("%q: %v", Clip(tc.s), ie)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url, msg string // msg "" means valid
	}{
		{"https://example.com/hook", ""},
		{"http://127.0.0.1:9000/h?x=1", ""},
		{"", "empty"},
		{"/hook", "absolute"},
		{"ftp://x/", "http or https"},
		{"http:///x", "host"},
		{"http:x", "host"},
		{"http://x/#f", "fragment"},
		{"http://x:0/", "port"},
		{"http://x/a b", "whitespace"},
		{"http://x/" + strings.Repeat("a", MaxURLLen), "at most"},
	} {
		e := CheckURL("callback_url", tc.url)
		switch {
		case tc.msg == "" && e != nil:
			t.Errorf("%q: %v", Clip(tc.url), e)
		case tc.msg != "" && (e == nil || !strings.Contains(e.Message, tc.msg) || !strings.HasPrefix(e.Message, "callback_url: ")):
			t.Errorf("%q: got %v, want a message with %q", Clip(tc.url), e, tc.msg)
		}
	}
}

func TestCheckSecret(t *testing.T) {
	good := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct{ s, msg string }{
		{good, ""},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `"whsec_"`},
		{"whsec_!!!!", "base64"},
		{"whsec_AAAA", "decodes to 3 bytes"},
		{SecretPrefix + strings.Repeat("A", MaxSecretLen-len(SecretPrefix)-2) + "==", ""},
		{SecretPrefix + strings.Repeat("A", MaxSecretLen-len(SecretPrefix)), "decodes to 66 bytes"},
	} {
		e := CheckSecret("signing_secret", tc.s)
		if (tc.msg == "") != (e == nil) || (e != nil && !strings.Contains(e.Message, tc.msg)) {
			t.Errorf("%q: %v (want %q)", tc.s, e, tc.msg)
		}
		if e != nil && strings.Contains(e.Message, tc.s) {
			t.Errorf("the message echoes the secret: %s", e.Message)
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	for _, tc := range []struct {
		h   map[string]string
		msg string
	}{
		{map[string]string{"X-Tenant": "42", "Authorization": "Bearer x"}, ""},
		{map[string]string{"Idempotency-Key": "x"}, "callback protocol"},
		{map[string]string{"x tenant": "1"}, "not a valid HTTP header name"},
		{map[string]string{"X-A": "1", "x-a": "2"}, "same header"},
		{map[string]string{"X-A": "a\r\nb"}, "control characters"},
		{map[string]string{"X-A": strings.Repeat("v", MaxHeaderValueLen+1)}, "at most"},
		{map[string]string{"X-Api-Key": Redacted}, "placeholder"},
		{map[string]string{"X-Plain": Redacted}, ""},
	} {
		e := CheckHeaders(tc.h)
		if (tc.msg == "") != (e == nil) || (e != nil && !strings.Contains(e.Message, tc.msg)) {
			t.Errorf("%v: %v (want %q)", tc.h, e, tc.msg)
		}
	}
	many := map[string]string{}
	for i := 0; i <= MaxRouteHeaders; i++ {
		many["X-"+strings.Repeat("a", i+1)] = "v"
	}
	if e := CheckHeaders(many); e == nil || !strings.Contains(e.Message, "at most 64") {
		t.Errorf("too many headers: %v", e)
	}
}

func TestSensitiveHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "X-Api-Key": true, "X-Auth-Token": true, "Cookie": true,
		"X-Tenant": false, "Accept": false,
	} {
		if SensitiveHeader(name) != want {
			t.Errorf("%s: sensitive %v, want %v", name, !want, want)
		}
	}
}

func TestCheckURLRefusesCredentials(t *testing.T) {
	for _, u := range []string{"http://user:pass@example.com/hook", "https://tok@example.com", "http://u:p@127.0.0.1:9/x"} {
		e := CheckURL("callback_url", u)
		if e == nil || !strings.Contains(e.Message, "user name or password") {
			t.Fatalf("%s: %v", u, e)
		}
		if strings.Contains(e.Message, "pass") && strings.Contains(e.Message, "u:p") {
			t.Fatalf("message echoes the credentials: %s", e.Message)
		}
	}
	// Other errors never echo a credential either.
	e := CheckURL("callback_url", "http://user:s3cret@exa mple.com/")
	if e == nil || strings.Contains(e.Message, "s3cret") {
		t.Fatalf("%v", e)
	}
	if got := redactUserinfo("https://a:b@h/p@q"); got != "https://REDACTED@h/p@q" {
		t.Fatal(got)
	}
}
