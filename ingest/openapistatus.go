package ingest

import (
	"net/http"

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
