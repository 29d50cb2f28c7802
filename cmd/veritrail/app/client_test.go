package app

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"testing"
	"time"
)

// kosli is a test client that sends requests exactly as the Kosli CLI v2.38 does: a bearer
// token and a JSON content type on every request (GETs included), the body `null` for empty
// writes, JSON multipart parts without a filename and files as application/octet-stream.
type kosli struct {
	t     testing.TB
	base  string
	token string
	http  *http.Client
}

type reply struct {
	Status int
	Body   []byte
	Header http.Header
}

// JSON decodes the reply body.
func (r reply) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("reply is not a JSON object (%d): %s", r.Status, r.Body)
	}
	return m
}

// Array decodes a JSON array reply.
func (r reply) Array(t testing.TB) []any {
	t.Helper()
	var a []any
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("reply is not a JSON array (%d): %s", r.Status, r.Body)
	}
	return a
}

func newKosli(t testing.TB, base, token string) *kosli {
	return &kosli{t: t, base: base, token: token, http: &http.Client{Timeout: 30 * time.Second}}
}

func (k *kosli) do(method, path, contentType string, body []byte) reply {
	k.t.Helper()
	req, err := http.NewRequest(method, k.base+path, bytes.NewReader(body))
	if err != nil {
		k.t.Fatal(err)
	}
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	req.Header.Set("User-Agent", "Kosli/v2.38.0")
	req.Header.Set("Content-Type", contentType)
	resp, err := k.http.Do(req)
	if err != nil {
		k.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		k.t.Fatal(err)
	}
	checkAnswer(k.t, method, req.URL.String(), resp.StatusCode, resp.Header, b)
	return reply{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

func (k *kosli) get(path string) reply {
	k.t.Helper()
	return k.do(http.MethodGet, path, "application/json; charset=utf-8", nil)
}

// send writes a JSON body (nil sends the CLI's `null`).
func (k *kosli) send(method, path string, body any) reply {
	k.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		k.t.Fatal(err)
	}
	return k.do(method, path, "application/json; charset=utf-8", b)
}

// file is a file part of a multipart request.
type file struct {
	field, name string
	data        []byte
}

// multipart sends a JSON part (no filename, no content type) and file parts.
func (k *kosli) multipart(method, path, jsonField string, payload any, files ...file) reply {
	k.t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	var js []byte
	if raw, ok := payload.(rawJSON); ok {
		js = []byte(raw)
	} else {
		var err error
		if js, err = json.Marshal(payload); err != nil {
			k.t.Fatal(err)
		}
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+jsonField+`"`)
	pw, err := w.CreatePart(h)
	if err != nil {
		k.t.Fatal(err)
	}
	pw.Write(js)
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+f.field+`"; filename="`+f.name+`"`)
		h.Set("Content-Type", "application/octet-stream")
		fw, err := w.CreatePart(h)
		if err != nil {
			k.t.Fatal(err)
		}
		fw.Write(f.data)
	}
	w.Close()
	return k.do(method, path, w.FormDataContentType(), buf.Bytes())
}

// want fails unless the reply has the status.
func (r reply) want(t testing.TB, status int) reply {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}
