// Package builtin holds the notifiers Veritrail ships: webhook (signed JSON), chat (Slack and
// Microsoft Teams incoming webhooks) and email (SMTP with STARTTLS). Each implements
// sdk.Notifier, the interface every plugin implements, and passes the plugintest suite both
// in-process and through gRPC.
//
// Built-ins run in-process: the embedded mode is one binary with nothing to install beside it,
// a built-in is compiled into the binary it would otherwise be pinned against, and an in-process
// call costs no process, no serialization and no restart handling. What keeps them honest as
// plugins is that they implement only sdk.Notifier and are tested through the gRPC contract too,
// so any of them can be served as a separate plugin process with sdk.Serve unchanged.
package builtin

import (
	"github.com/veritrail/veritrail/plugins/builtin/chat"
	"github.com/veritrail/veritrail/plugins/builtin/email"
	"github.com/veritrail/veritrail/plugins/builtin/webhook"
	"github.com/veritrail/veritrail/plugins/sdk"
)

// The catalog names of the built-in notifiers.
const (
	Webhook = "webhook"
	Chat    = "chat"
	Email   = "email"
)

// Notifiers returns a fresh, unconfigured instance of every built-in notifier by catalog name.
// The caller configures each with its settings.
func Notifiers() map[string]sdk.Notifier {
	return map[string]sdk.Notifier{
		Webhook: webhook.New(),
		Chat:    chat.New(),
		Email:   email.New(),
	}
}
