package contract

// Request names the API request that produced a message, for the audit log.
type Request struct {
	Operation string `json:"operation"` // the API operation ID, e.g. beginTrail
	Target    string `json:"target"`    // the request path below /api/v2, e.g. /trails/acme/app
}
