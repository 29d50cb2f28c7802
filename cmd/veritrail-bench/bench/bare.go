package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"

	"github.com/veritrail/veritrail/ingest"
)

// Part limits of the product (ingest.Config defaults), so the baseline reads parts the same way.
const (
	maxFileBytes = 10 << 20
	maxPartBytes = 1 << 20
)

// startBare serves the baseline: the product's attest route on net/http + chi + Huma, with the
// same operation settings (raw multipart body, no body validation, the same size limit) and
// the same parsing (every part read through a limit, data_json decoded as JSON with numbers
// kept), answering 201 with a JSON string. It leaves out only what the product adds on top:
// authentication, store lookups, validation of the attestation and the publish.
func startBare() (addr string, stop func(), err error) {
	return serveBare(registerBareMultipart)
}

// serveBare serves the operations register adds on net/http + chi + Huma, configured as the
// product configures Huma, on a real TCP port of the loopback interface.
func serveBare(register func(huma.API)) (addr string, stop func(), err error) {
	mux := chi.NewRouter()
	hc := huma.DefaultConfig("Veritrail bench baseline", "1.0")
	hc.DocsPath = ""
	hc.CreateHooks = nil // as the product: no $schema links in responses
	register(humachi.New(mux, hc))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}

// registerBareMultipart is the baseline of the attestation phases.
func registerBareMultipart(api huma.API) {
	type in struct {
		ingest.TrailPath
		ContentType string `header:"Content-Type"`
		RawBody     []byte `contentType:"multipart/form-data"`
	}
	type out struct {
		Status int
		Body   string
	}
	huma.Register(api, huma.Operation{
		OperationID:      "attest_generic",
		Method:           http.MethodPost,
		Path:             "/api/v2/attestations/{org}/{flow}/trail/{trail}/generic",
		DefaultStatus:    http.StatusCreated,
		MaxBodyBytes:     maxFileBytes + maxPartBytes,
		SkipValidateBody: true,
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"multipart/form-data": {Schema: &huma.Schema{Type: "object", Required: []string{"data_json"},
				Properties: map[string]*huma.Schema{
					"data_json":       {Type: "string"},
					"attachment_file": {Type: "string", Format: "binary"},
				}}},
		}},
	}, func(_ context.Context, in *in) (*out, error) {
		parts, err := parseMultipart(in.ContentType, in.RawBody)
		if err != nil {
			return nil, huma.Error400BadRequest(err.Error())
		}
		raw, ok := parts["data_json"]
		if !ok {
			return nil, huma.Error400BadRequest("data_json: Field required")
		}
		var data map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, huma.Error400BadRequest("data_json: " + err.Error())
		}
		name, _ := data["attestation_name"].(string)
		return &out{Status: http.StatusCreated, Body: fmt.Sprintf("Attestation '%s' was reported", name)}, nil
	})
}

// parseMultipart mirrors the product's form parsing: boundary from the media type, each named
// part read in full through its size limit.
func parseMultipart(contentType string, body []byte) (map[string][]byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, errors.New("expected a multipart/form-data body with a boundary")
	}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	parts := map[string][]byte{}
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("malformed multipart body: %w", err)
		}
		name := p.FormName()
		if name == "" {
			continue
		}
		limit := int64(maxPartBytes)
		if name == "attachment_file" {
			limit = maxFileBytes
		}
		data, err := io.ReadAll(io.LimitReader(p, limit+1))
		if err != nil {
			return nil, fmt.Errorf("malformed part %s: %w", name, err)
		}
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("part %s is larger than %d bytes", name, limit)
		}
		parts[name] = data
	}
}
