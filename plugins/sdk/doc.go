// Package sdk is what a notifier imports: the Notifier interface, the payload it delivers
// (schema version SchemaVersion), the classification of failures, helpers for HTTP receivers
// and Serve, which runs a Notifier as a go-plugin process speaking the gRPC contract of
// plugins/sdk/proto.
//
// A notifier makes one attempt per Notify call and says whether another could succeed:
//
//	func (n *pager) Notify(ctx context.Context, msg *sdk.Notification) error {
//		resp, err := n.client.Do(req.WithContext(ctx))
//		if err != nil {
//			return sdk.ClassifyRequestError(err) // network errors: retryable
//		}
//		defer resp.Body.Close()
//		return sdk.CheckResponse(resp, time.Now()) // 5xx, 429: retryable; other 4xx: permanent
//	}
//
// The host retries retryable failures with backoff within a time budget, honours RetryAfter,
// deduplicates deliveries and records outcomes; a notifier does none of that. plugins/README.md
// is the guide from nothing to a running plugin.
package sdk
