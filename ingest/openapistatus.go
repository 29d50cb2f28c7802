package ingest

import (
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
)

// createOrUpdate are the operations that answer 201 when they create and 200 when what they
// name exists already; Huma declares only the default status (201).
var createOrUpdate = []struct{ method, path string }{
	{http.MethodPost, "/custom-attestation-types/{org}"},
	{http.MethodPut, "/environments/{org}"},
	{http.MethodPut, "/flows/{org}/template_file"},
	{http.MethodPut, "/flows/{org}"},
	{http.MethodPut, "/trails/{org}/{flow}"},
	{http.MethodPut, "/policies/{org}"},
	{http.MethodPut, "/policies/{org}/{policy}"},
}

// declareUpdates lists the 200 of the create-or-update operations in the OpenAPI description,
// with the body of their 201, so that the description holds every status they answer.
func declareUpdates(api huma.API) {
	for _, c := range createOrUpdate {
		item := api.OpenAPI().Paths[apiPrefix+c.path]
		if item == nil {
			panic("ingest: no operation at " + c.path) // a route renamed without this list
		}
		o := item.Put
		if c.method == http.MethodPost {
			o = item.Post
		}
		if created := o.Responses["201"]; created != nil {
			o.Responses["200"] = &huma.Response{Description: "Updated: it existed already", Content: created.Content}
		}
	}
}

// declareErrors makes every operation list the error statuses it can answer besides those op
// declares, with the Error body, so that the description holds every answer:
//   - 503 anywhere: the store or the bus is unavailable, a read's wait for the organization's
//     writes ran out, or writes are shed under load (always with Retry-After);
//   - 408, 413 and 415 where there is a body: it arrived too slowly, it (or a part) is too
//     large, or its content type is not one the operation reads.
//
// 422 goes: the error model answers Huma's 422 as the hosted service's 400.
// A request no operation serves gets 404 or 405 with the Error body (the router's NotFound
// and MethodNotAllowed); OpenAPI has no place for those, docs/ARCHITECTURE.md states them.
func declareErrors(api huma.API) {
	for _, item := range api.OpenAPI().Paths {
		for _, o := range []*huma.Operation{item.Get, item.Put, item.Post, item.Patch, item.Delete} {
			if o == nil {
				continue
			}
			errBody := o.Responses[strconv.Itoa(http.StatusBadRequest)]
			if errBody == nil {
				panic("ingest: operation " + o.OperationID + " declares no 400") // op() gives every operation one
			}
			delete(o.Responses, strconv.Itoa(http.StatusUnprocessableEntity))
			statuses := []int{http.StatusServiceUnavailable}
			if o.RequestBody != nil {
				statuses = append(statuses, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
			}
			for _, s := range statuses {
				if o.Responses[strconv.Itoa(s)] == nil {
					o.Responses[strconv.Itoa(s)] = &huma.Response{Description: http.StatusText(s), Content: errBody.Content}
				}
			}
		}
	}
}
