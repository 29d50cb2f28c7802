package ingest

import (
	"context"
	"fmt"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
)

// A multipart operation declares its parts once (formParts, and the payload type its JSON part
// holds); registerForm documents them in the OpenAPI description and parses every request by
// them, so the description and the checks cannot drift apart. Huma's own multipart support
// (huma.MultipartFormFiles) is not used: it reads the body with net/http's ParseMultipartForm,
// which spills large files to temporary files and has no limit per part to name in a 413, it
// takes a JSON part only as a field (the Kosli CLI's contract accepts one sent as a file too),
// and it would decode data_json beside the one pass attestations make over it.

// filePart declares a file part of a multipart operation.
type filePart struct {
	name string
	doc  string
	// large parts (attachments, templates) may be up to Config.MaxFileBytes; the others up to
	// Config.MaxPartBytes.
	large bool
	// required is documented; the handler checks the part, with its own message.
	required bool
}

// jsonDecoding is how the adapter decodes an operation's JSON part into its payload type.
type jsonDecoding int

const (
	// decodeDocument applies the text rules to the whole part (decodeJSONDoc), then decodes it.
	decodeDocument jsonDecoding = iota
	// decodeValue decodes the part without the text rules (decodeJSONPart).
	decodeValue
	// decodeByHandler leaves the part to the handler (Form.Raw), decoding and checks alike:
	// attestations decode data_json in one pass of their own (decodeAttestationData, then
	// AttestationCommon.check), and their kind's rules read the rest.
	decodeByHandler
)

// formParts declares the parts of a multipart operation: one JSON document part (data_json, or
// payload for policies), whose content is the operation's payload type, and its file parts.
type formParts struct {
	json string
	// optional JSON parts may be left out; a missing required one is "Field required".
	optional bool
	decoding jsonDecoding
	files    []filePart
}

// checkedPayload is a payload type with rules beyond its JSON types: check records each problem
// of the payload (and of the parts that go with it) in c, named, in the hosted service's words.
type checkedPayload interface{ check(c checker, parts *form) }

// FormBody is the raw body of a multipart operation; the input of every multipart operation
// embeds it, and registerForm parses it.
type FormBody struct {
	ContentType string `header:"Content-Type"`
	RawBody     []byte `contentType:"multipart/form-data"`
}

func (b *FormBody) multipart() *FormBody { return b }

type formInput interface{ multipart() *FormBody }

// Form is a parsed multipart request whose JSON part holds a P.
type Form[P any] struct {
	// Payload is the JSON part decoded and checked (checkedPayload); zero when the part was left
	// out or the handler decodes it.
	Payload P
	// Raw is the JSON part as sent; nil when it was left out.
	Raw   []byte
	parts *form
}

// file returns a file part sent as a file (with a file name).
func (f *Form[P]) file(name string) (formFile, bool) {
	ff, ok := f.parts.files[name]
	return ff, ok
}

// part returns the bytes of a part sent either as a file or as a field.
func (f *Form[P]) part(name string) ([]byte, bool) { return f.parts.part(name) }

// registerForm registers the multipart operation o: its request body documents parts, the JSON
// part with P's schema, and handle gets each request's body parsed and its JSON part decoded into
// P, then checked when P is a checkedPayload. The input type I embeds FormBody.
func registerForm[I, P, O any](a *API, o huma.Operation, parts formParts, handle func(context.Context, *I, *Form[P]) (*O, error)) {
	if _, ok := any(new(I)).(formInput); !ok {
		panic(fmt.Sprintf("ingest: the input of multipart operation %s does not embed FormBody", o.OperationID))
	}
	o.MaxBodyBytes = a.cfg.MaxFileBytes + a.cfg.MaxPartBytes
	o.SkipValidateBody = true // the parts are checked here and by the handler, with the hosted service's messages
	o.RequestBody = formRequestBody(a.huma.OpenAPI().Components.Schemas, reflect.TypeFor[P](), parts, a.cfg.MaxFileBytes, a.cfg.MaxPartBytes)
	var large []string
	for _, f := range parts.files {
		if f.large {
			large = append(large, f.name)
		}
	}
	huma.Register(a.huma, o, func(ctx context.Context, in *I) (*O, error) {
		body := any(in).(formInput).multipart()
		f, err := parseForm(body.ContentType, body.RawBody, large, a.cfg.MaxFileBytes, a.cfg.MaxPartBytes)
		if err != nil {
			return nil, err
		}
		form := &Form[P]{parts: f}
		raw, ok := f.part(parts.json)
		if !ok && !parts.optional {
			return nil, fieldError(parts.json, "Field required [input: None]") // pydantic's words for a missing part
		}
		form.Raw = raw
		if parts.decoding == decodeByHandler {
			return handle(ctx, in, form)
		}
		if ok {
			if parts.decoding == decodeDocument {
				err = decodeJSONDoc(parts.json, raw, &form.Payload)
			} else {
				err = decodeJSONPart(parts.json, raw, &form.Payload)
			}
			if err != nil {
				return nil, err
			}
		}
		if p, ok := any(&form.Payload).(checkedPayload); ok {
			c := checker{}
			p.check(c, f)
			if err := c.err(); err != nil {
				return nil, err
			}
		}
		return handle(ctx, in, form)
	})
}

// formRequestBody describes a multipart body: the JSON part is a form field holding a JSON
// document of the payload's schema (an encoding with contentType application/json: OpenAPI 3.0
// and 3.1 tools render the object schema of such a part), and each file part is binary.
func formRequestBody(reg huma.Registry, payload reflect.Type, parts formParts, maxFile, maxPart int64) *huma.RequestBody {
	doc := &huma.Schema{
		Ref: reg.Schema(payload, true, payload.Name()).Ref,
		Description: fmt.Sprintf("A JSON document of at most %d bytes, sent as a form field (the Kosli CLI sends it "+
			"without a file name and without a content type); a file part is accepted too.", maxPart),
	}
	props := map[string]*huma.Schema{parts.json: doc}
	encoding := map[string]*huma.Encoding{parts.json: {ContentType: "application/json"}}
	var required []string
	if !parts.optional {
		required = append(required, parts.json)
	}
	for _, f := range parts.files {
		limit := maxPart
		if f.large {
			limit = maxFile
		}
		props[f.name] = &huma.Schema{Type: "string", Format: "binary", ContentEncoding: "binary",
			Description: fmt.Sprintf("%s (a file, at most %d bytes)", f.doc, limit)}
		encoding[f.name] = &huma.Encoding{ContentType: "application/octet-stream"}
		if f.required {
			required = append(required, f.name)
		}
	}
	return &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
		"multipart/form-data": {
			Schema:   &huma.Schema{Type: "object", Properties: props, Required: required},
			Encoding: encoding,
		},
	}}
}
