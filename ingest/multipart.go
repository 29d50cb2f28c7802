package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"reflect"
	"strings"
)

// form is a parsed multipart body: JSON parts by name and file parts by name. The Kosli CLI
// sends JSON parts without a filename and files with one, but a JSON part sent as a file is
// accepted too.
type form struct {
	values map[string][]byte
	files  map[string]formFile
}

type formFile struct {
	name string
	data []byte
}

// part returns the bytes of a part whichever way it was sent.
func (f *form) part(name string) ([]byte, bool) {
	if v, ok := f.values[name]; ok {
		return v, true
	}
	if v, ok := f.files[name]; ok {
		return v.data, true
	}
	return nil, false
}

// parseForm reads a multipart body, enforcing the size limit of each part: fileParts may be
// up to maxFile bytes, every other part up to maxPart. A part over its limit is a 413 naming it.
// Every part of the API is single-valued: a part given twice (as a field or a file) is a 400
// naming it, not a silent choice of one, and so is a file name that is not a fit name.
func parseForm(contentType string, body []byte, fileParts []string, maxFile, maxPart int64) (*form, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, apiError(http.StatusBadRequest, "Expected a multipart/form-data body with a boundary")
	}
	isFile := map[string]bool{}
	for _, n := range fileParts {
		isFile[n] = true
	}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	f := &form{values: map[string][]byte{}, files: map[string]formFile{}}
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return nil, apiError(http.StatusBadRequest, "Malformed multipart body: %v", err)
		}
		name := p.FormName()
		if name == "" {
			continue
		}
		if _, dup := f.values[name]; dup {
			return nil, repeatedPart(name)
		}
		if _, dup := f.files[name]; dup {
			return nil, repeatedPart(name)
		}
		if fn := p.FileName(); fn != "" {
			if msg := nameProblem(fn, maxNameLen); msg != "" {
				return nil, fieldError(name, "File name: %s", msg)
			}
		}
		limit := maxPart
		if isFile[name] {
			limit = maxFile
		}
		data, err := io.ReadAll(io.LimitReader(p, limit+1))
		if err != nil {
			return nil, apiError(http.StatusBadRequest, "Malformed multipart part '%s': %v", name, err)
		}
		if int64(len(data)) > limit {
			// Not a validation error: {"message"} alone, which names the part.
			return nil, apiError(http.StatusRequestEntityTooLarge, "Part '%s' is larger than the limit of %d bytes", name, limit)
		}
		if p.FileName() != "" {
			f.files[name] = formFile{name: p.FileName(), data: data}
		} else {
			f.values[name] = data
		}
	}
}

func repeatedPart(name string) *Error {
	return fieldError(name, "Part given more than once; send one part named '%s'", name)
}

// decodeJSONDoc is decodeJSONPart for a document the request gives whole (a part, not a value
// of one): a string that breaks the text rules (jsonTextOK) is a 400 naming it, before any type
// error.
func decodeJSONDoc(name string, b []byte, v any) error {
	err := decodeJSONPart(name, b, v)
	if (err == nil || validJSON(b)) && !jsonTextOK(b) {
		return textError(name, b)
	}
	return err
}

// decodeJSONPart decodes a JSON part into v, rejecting unknown types and trailing data. It
// does not apply the text rules: decodeJSONDoc does.
func decodeJSONPart(name string, b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fieldError(name, "Field required")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fieldError(te.Field, "Input should be %s [input: %s]", jsonKind(te.Type), te.Value)
		}
		return fieldError(name, "Invalid JSON: %s", jsonErrorText(err))
	}
	if dec.More() {
		return fieldError(name, "Invalid JSON: unexpected data after the object")
	}
	return nil
}

// jsonErrorText names the field a type error happened in.
func jsonErrorText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field '%s' should be %s, not %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

// jsonKind names a Go type the way a JSON author thinks of it.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a valid boolean"
	case reflect.String:
		return "a valid string"
	case reflect.Slice, reflect.Array:
		return "a valid list"
	case reflect.Map, reflect.Struct:
		return "a valid dictionary"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a valid number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "of type " + t.String()
}
