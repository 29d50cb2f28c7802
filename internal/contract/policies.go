package contract

// Kinds of the environment-policy messages.
const (
	KindPolicyVersion    Kind = "policy.version"       // a new policy, or a new version of one
	KindPolicyAttachment Kind = "environment.policies" // policies attached to or detached from an environment
)

// PolicyVersion creates a policy or adds a version to it. Content was validated by ingest; the evaluator adds no
// version when Content equals the latest one (then only a non-empty Description applies).
type PolicyVersion struct {
	Name        string `json:"name"`
	Description string `json:"description"` // "" keeps the policy's description
	Comment     string `json:"comment"`
	Format      string `json:"format"` // yaml or rego
	Content     string `json:"content"`
	ContentID   string `json:"content_id"` // what the content means (envpolicy's Policy.ID)
}

// PolicyAttachment attaches policies to an environment, or detaches them.
type PolicyAttachment struct {
	EnvID  string   `json:"env_id"`
	Names  []string `json:"names"`
	Detach bool     `json:"detach,omitempty"`
}

// PolicyKey is the partition key of a policy: its versions apply in order.
func PolicyKey(orgID, name string) string { return orgID + "/policy/" + name }
