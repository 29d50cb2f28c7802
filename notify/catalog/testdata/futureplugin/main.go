// Command futureplugin is a notifier plugin built against a protocol version this host does not
// serve (2): the tests check that the host refuses it with a message that says so.
package main

import (
	"context"

	plugin "github.com/hashicorp/go-plugin"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/proto"
)

type silent struct{}

func (silent) Configure(context.Context, map[string]string) error { return nil }
func (silent) Notify(context.Context, *sdk.Notification) error    { return nil }

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: proto.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			2: {proto.PluginName: &proto.GRPCPlugin{Impl: sdk.NewServer(silent{})}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
